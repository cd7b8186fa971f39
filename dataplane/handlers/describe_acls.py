"""DescribeAcls (29): the ACLs a filter selects (``AclFilter``: ANY and MATCH pattern
filters, null names, principals and hosts), from this broker's metadata image, grouped by
resource pattern as Kafka answers."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.describe_acls.v3 import request as req
from kio.schema.describe_acls.v3 import response as resp
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from dataplane.authorizer import Operation
from dataplane.handlers._acls import BadFilter, binding_of, filter_of
from dataplane.handlers.context import RequestContext, acl_api_refusal

API_KEY = 29
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.DescribeAclsRequest) -> Any:
    refusal = acl_api_refusal(ctx, Operation.DESCRIBE)
    if refusal is not None:
        code, message = refusal
        return ctx.make(
            resp.DescribeAclsResponse,
            throttle_time=ZERO,
            error_code=code,
            error_message=message,
            resources=(),
        )
    try:
        selected = filter_of(request)
    except BadFilter as exc:
        return ctx.make(
            resp.DescribeAclsResponse,
            throttle_time=ZERO,
            error_code=ErrorCode.invalid_request,
            error_message=str(exc),
            resources=(),
        )
    groups: dict[tuple[int, str, int], list[Any]] = {}
    for acl in ctx.broker.metadata.acls.values():
        binding = binding_of(acl)
        if not selected.matches(binding):
            continue
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        groups.setdefault(key, []).append(
            ctx.make(
                resp.AclDescription,
                principal=acl.principal,
                host=acl.host,
                operation=i8(acl.operation),
                permission_type=i8(acl.permission),
            )
        )
    resources = tuple(
        ctx.make(
            resp.DescribeAclsResource,
            resource_type=i8(rtype),
            resource_name=name,
            pattern_type=i8(ptype),
            acls=tuple(acls),
        )
        for (rtype, name, ptype), acls in sorted(groups.items())
    )
    return ctx.make(
        resp.DescribeAclsResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message=None,
        resources=resources,
    )
