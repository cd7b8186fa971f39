"""Heartbeat (12): keep a member's session; tells members when to rejoin.

REBALANCE_IN_PROGRESS while the group prepares a rebalance, ILLEGAL_GENERATION for a stale
generation, UNKNOWN_MEMBER_ID for members the group does not know (or an Empty group).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4 import request as req
from kio.schema.heartbeat.v4 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

API_KEY = 12


def handle(ctx: RequestContext, request: req.HeartbeatRequest) -> Any:
    code = ErrorCode.none
    try:
        ctx.require_group(Operation.READ, request.group_id)
        coordinator_of(ctx).membership.heartbeat(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            request.generation_id,
        )
    except BrokerError as exc:
        code = error_code_for(exc)
    return ctx.make(resp.HeartbeatResponse, throttle_time=ZERO, error_code=code)
