"""ListGroups (16): every group this broker coordinates (v4+: filtered by state, v5+: type).

State filters match case-insensitively ("stable", "Empty"); every group here is of type
"classic", so a type filter without "classic" lists nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5 import request as req
from kio.schema.list_groups.v5 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

API_KEY = 16


def handle(ctx: RequestContext, request: req.ListGroupsRequest) -> Any:
    every = ctx.on_cluster(Operation.DESCRIBE)  # else the groups it may DESCRIBE (Kafka's)
    try:
        groups = coordinator_of(ctx).list_groups(
            getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
        )
    except BrokerError as exc:
        return ctx.make(
            resp.ListGroupsResponse, throttle_time=ZERO, error_code=error_code_for(exc), groups=()
        )
    return ctx.make(
        resp.ListGroupsResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        groups=tuple(
            ctx.make(
                resp.ListedGroup,
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
                group_type="classic",
            )
            for g in groups
            if every or ctx.on_group(Operation.DESCRIBE, g.group_id)
        ),
    )
