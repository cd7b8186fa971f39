"""LeaveGroup (13): members leave (v3+: a batch, also by group.instance.id alone).

v0-v2 carry one member and answer with one top-level error code.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from kio.schema.errors import ErrorCode
from kio.schema.leave_group.v5 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

VersionedRequest: TypeAlias = Any
"""Its fields change shape between versions (read by version), which no single kio class
describes."""
API_KEY = 13
BATCH_VERSION = 3


def handle(ctx: RequestContext, request: VersionedRequest) -> Any:
    batch = ctx.api_version >= BATCH_VERSION
    if batch:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    try:
        ctx.require_group(Operation.READ, request.group_id)
        errors = coordinator_of(ctx).membership.leave(request.group_id, members)
    except BrokerError as exc:
        return ctx.make(
            resp.LeaveGroupResponse, throttle_time=ZERO, error_code=error_code_for(exc), members=()
        )
    codes = [ErrorCode.none if e is None else error_code_for(e) for e in errors]
    if not batch:
        return ctx.make(resp.LeaveGroupResponse, throttle_time=ZERO, error_code=codes[0])
    return ctx.make(
        resp.LeaveGroupResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        members=tuple(
            ctx.make(
                resp.MemberResponse,
                member_id=member_id,
                group_instance_id=instance_id,
                error_code=code,
            )
            for (member_id, instance_id), code in zip(members, codes, strict=True)
        ),
    )
