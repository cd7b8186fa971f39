"""DescribeGroups (15): state, protocol and members of groups.

Only a Stable group shows its protocol and each member's metadata for it; during a
rebalance members are listed without metadata. An unknown group is "Dead": with error
GROUP_ID_NOT_FOUND from v6, without error before (as Kafka).
"""

from __future__ import annotations

from typing import Any

from kio.schema.describe_groups.v6 import request as req
from kio.schema.describe_groups.v6 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation, ResourceType
from dataplane.groups.group import ClassicGroup, GroupState
from dataplane.groups.storage import kafka_answer_order
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, GroupIdNotFound, error_code_for

API_KEY = 15
NOT_FOUND_ERROR_VERSION = 6
NOT_REQUESTED = -(2**31)


def handle(ctx: RequestContext, request: req.DescribeGroupsRequest) -> Any:
    names = [str(g) for g in request.groups]
    # include_authorized_operations exists from v3; earlier versions have no such field
    ops = bool(getattr(request, "include_authorized_operations", False))
    groups = ctx.broker.groups
    order = list(range(len(names)))
    if groups is not None and groups.storage.partitions:
        # Answers come in Kafka's order (grouped by coordinator partition).
        order = kafka_answer_order(names, groups.storage.partitions)
    return ctx.make(
        resp.DescribeGroupsResponse,
        throttle_time=ZERO,
        groups=tuple(_describe(ctx, names[i], ops) for i in order),
    )


def _describe(ctx: RequestContext, group_id: str, with_ops: bool) -> Any:
    ops = ctx.operations(ResourceType.GROUP, group_id) if with_ops else NOT_REQUESTED
    try:
        ctx.require_group(Operation.DESCRIBE, group_id)
        group = coordinator_of(ctx).describe_group(group_id)
    except GroupIdNotFound as exc:
        if ctx.api_version < NOT_FOUND_ERROR_VERSION:
            return _empty(ctx, group_id, ErrorCode.none, None, GroupState.DEAD.value, ops=ops)
        return _empty(ctx, group_id, exc.code, exc.message, GroupState.DEAD.value)
    except BrokerError as exc:
        return _empty(ctx, group_id, error_code_for(exc), exc.message, "")
    return ctx.make(
        resp.DescribedGroup,
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=_protocol(group),
        members=tuple(_member(ctx, group, m) for m in group.members.values()),
        authorized_operations=ops,
    )


def _protocol(group: ClassicGroup) -> str:
    return (group.protocol_name or "") if group.is_in(GroupState.STABLE) else ""


def _member(ctx: RequestContext, group: ClassicGroup, member: Any) -> Any:
    protocol = _protocol(group)
    return ctx.make(
        resp.DescribedGroupMember,
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        member_metadata=member.metadata(protocol) if protocol else b"",
        member_assignment=member.assignment,
    )


def _empty(
    ctx: RequestContext,
    group_id: str,
    code: ErrorCode,
    message: str | None,
    state: str,
    *,
    ops: int = NOT_REQUESTED,
) -> Any:
    return ctx.make(
        resp.DescribedGroup,
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state=state,
        protocol_type="",
        protocol_data="",
        members=(),
        authorized_operations=ops,
    )
