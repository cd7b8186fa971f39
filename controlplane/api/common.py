"""Shared servicer plumbing: the error boundary and protobuf conversions."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from controlplane.errors import ControlPlaneError, rich_status

log = logging.getLogger("sluice.controlplane.api")

S = TypeVar("S")
Req = TypeVar("Req")
Resp = TypeVar("Resp")

Handler = Callable[[S, Req, grpc.aio.ServicerContext], Awaitable[Resp]]


def rpc(method: Handler[S, Req, Resp]) -> Handler[S, Req, Resp]:
    """The error boundary: a typed error ends the call with its status code, its message and
    its ErrorInfo (``errors.rich_status``); anything else with INTERNAL."""

    @functools.wraps(method)
    async def wrapper(self: S, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        try:
            return await method(self, request, context)
        except ControlPlaneError as exc:
            status = rich_status(exc)
        except Exception as exc:
            log.exception("%s failed", method.__name__)
            status = rich_status(
                exc,
                f"internal error in {method.__name__}: {type(exc).__name__}: {exc} "
                "(see $SLUICE_HOME/logs/controlplane.log)",
            )
        await context.abort(status.code, status.details, status.trailing_metadata)
        raise AssertionError("unreachable: context.abort raises")

    return wrapper


def timestamp(seconds: float) -> Any:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts
