"""SyncGroup (14): the leader hands in assignments; every member gets its own.

Followers that sync before the leader wait (parked) until the leader's assignment has
been written to ``__consumer_offsets``. From v5 the protocol type and name are mandatory
(INCONSISTENT_GROUP_PROTOCOL otherwise, as Kafka).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sync_group.v5 import request as req
from kio.schema.sync_group.v5 import response as resp

from dataplane.authorizer import Operation
from dataplane.groups.group import SyncRequest, SyncResult
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, InconsistentGroupProtocol, error_code_for

API_KEY = 14
MANDATORY_PROTOCOL_VERSION = 5


def handle(ctx: RequestContext, request: req.SyncGroupRequest) -> Any:
    protocol_type = getattr(request, "protocol_type", None)
    protocol_name = getattr(request, "protocol_name", None)
    if ctx.api_version >= MANDATORY_PROTOCOL_VERSION and (
        protocol_type is None or protocol_name is None
    ):
        error = InconsistentGroupProtocol("SyncGroup v5+ needs protocol type and name")
        return _response(ctx, SyncResult(error))
    sync = SyncRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    try:
        ctx.require_group(Operation.READ, request.group_id)
        future = coordinator_of(ctx).membership.sync(sync)
    except BrokerError as exc:
        return _response(ctx, SyncResult(exc))
    if future.done():
        return _response(ctx, future.result())
    return _parked(ctx, future)


async def _parked(ctx: RequestContext, future: asyncio.Future[SyncResult]) -> Any:
    return _response(ctx, await asyncio.shield(future))


def _response(ctx: RequestContext, result: SyncResult) -> Any:
    return ctx.make(
        resp.SyncGroupResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none if result.error is None else error_code_for(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
