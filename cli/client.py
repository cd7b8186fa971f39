"""cloudctl's side of the control-plane client: what its errors mean to a user.

Finding the control plane (``SLUICE_HOME``, ``SLUICE_ENDPOINT``, ``SLUICE_TOKEN``), the
channel with the bearer token and the typed errors are the shared client's,
``controlplane/client.py`` (the Spark data source uses it too). Here a failed call becomes a
one-line :class:`CliError` with a hint, in one place, :func:`explain`, by the error's reason
(the ErrorInfo the control plane attaches), never by its message text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from cli.output import CliError
from controlplane.client import (
    DEFAULT_TIMEOUT,
    ENDPOINT_FILE,
    PID_FILE,
    TOKEN_FILE,
    ApiError,
    Client,
    Env,
    home_dir,
)
from proto.sluice.v1 import errors_pb2 as epb

__all__ = [
    "DEFAULT_TIMEOUT",
    "ENDPOINT_FILE",
    "PID_FILE",
    "TOKEN_FILE",
    "Api",
    "ApiError",
    "Env",
    "endpoint_of",
    "explain",
    "home_dir",
    "token_of",
]


def endpoint_of(env: Env) -> str:
    endpoint = env.endpoint()
    if not endpoint:
        raise CliError(
            f"the control plane is not running for SLUICE_HOME={env.home}",
            "start it with `cloudctl up`, or set SLUICE_ENDPOINT",
        )
    return endpoint


def token_of(env: Env) -> str:
    token = env.token()
    if not token:
        raise CliError(
            f"no API token in {env.token_path}",
            "start the control plane with `cloudctl up`, or set SLUICE_HOME to the "
            "directory it uses",
        )
    return token


class Api:
    """The shared client's stubs, with every failure explained as a :class:`CliError`."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.endpoint = endpoint_of(env)
        self.client = Client(self.endpoint, token_of(env))
        self.clusters = self.client.clusters
        self.topics = self.client.topics
        self.status = self.client.control_plane

    def call(
        self, method: Callable[..., Any], request: Any, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """``method(request)``; a failure raises the :class:`CliError` :func:`explain` gives."""
        try:
            return self.client.call(method, request, timeout)
        except ApiError as exc:
            raise explain(exc, self.env) from None

    def try_call(
        self, method: Callable[..., Any], request: Any, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """``method(request)``; a failure raises the :class:`ApiError` (for callers that
        expect some errors, e.g. NOT_FOUND once a cluster is deleted)."""
        return self.client.call(method, request, timeout)

    def close(self) -> None:
        self.client.close()


def explain(exc: ApiError, env: Env) -> CliError:
    """The one mapping from a failed call to a user-facing error line with a hint."""
    code, reason, details = exc.code, exc.reason, exc.message
    if reason == epb.OBJECT_STORE_UNAVAILABLE:
        return CliError(details, "`cloudctl status` tells whether the object store answers")
    if reason == epb.CONTROL_PLANE_UNAVAILABLE:
        return CliError(
            f"cannot reach the control plane at {exc.endpoint}",
            "is it running? start it with `cloudctl up`; `cloudctl status` tells",
        )
    if code == grpc.StatusCode.UNAVAILABLE:  # BROKER_UNAVAILABLE
        return CliError(details, "the cluster may be healing: check `cloudctl describe-cluster`")
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return CliError(
            "the control plane refused the API token",
            f"use the SLUICE_HOME that `cloudctl up` used (token read from {env.home}/token)",
        )
    if reason == epb.TOPIC_NOT_FOUND:
        return CliError(details, "list topics with `cloudctl list-topics --cluster CLUSTER`")
    if code == grpc.StatusCode.NOT_FOUND:  # CLUSTER_NOT_FOUND
        return CliError(details, "list clusters with `cloudctl list-clusters`")
    if code == grpc.StatusCode.ALREADY_EXISTS:
        return CliError(details, "choose another name, or delete the existing one first")
    if code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT):
        return CliError(details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return CliError(
            f"the control plane at {exc.endpoint} did not answer in time",
            f"see {env.home}/logs/controlplane.log",
        )
    return CliError(f"{details} [{code.name}]", f"see {env.home}/logs/controlplane.log")
