"""JoinGroup (11): join or rejoin a classic group; parked until the join phase completes.

The answer may wait up to the rebalance timeout (the request runs as its own task, so the
connection keeps serving). A client that disconnects meanwhile does not cancel its join:
as in Kafka, the member stays until the join phase ends or its session expires.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.join_group.v9 import request as req
from kio.schema.join_group.v9 import response as resp

from dataplane.authorizer import Operation
from dataplane.groups.group import JoinRequest, JoinResult
from dataplane.handlers._groups import ZERO, client_host, coordinator_of, millis
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

API_KEY = 11


def handle(ctx: RequestContext, request: req.JoinGroupRequest) -> Any:
    session = millis(request.session_timeout)
    rebalance = session if ctx.api_version == 0 else millis(request.rebalance_timeout)
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        api_version=ctx.api_version,
        reason=getattr(request, "reason", None),
    )
    try:
        ctx.require_group(Operation.READ, request.group_id)
        future = coordinator_of(ctx).membership.join(join)
    except BrokerError as exc:
        return _response(ctx, JoinResult(exc, request.member_id))
    if future.done():
        return _response(ctx, future.result())
    return _parked(ctx, future)


async def _parked(ctx: RequestContext, future: asyncio.Future[JoinResult]) -> Any:
    # shield: a dropped connection must not cancel the member's pending join.
    return _response(ctx, await asyncio.shield(future))


def _response(ctx: RequestContext, result: JoinResult) -> Any:
    protocol_name = result.protocol_name
    if protocol_name is None and ctx.api_version < 7:
        protocol_name = ""  # not nullable before v7
    return ctx.make(
        resp.JoinGroupResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none if result.error is None else error_code_for(result.error),
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            ctx.make(
                resp.JoinGroupResponseMember,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in result.members
        ),
    )
