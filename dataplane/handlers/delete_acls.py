"""DeleteAcls (31): every ACL each filter selects is removed, decided by the active
controller; each filter's result lists what it matched (an ACL two filters match is listed
by both and removed once), as Kafka's AclControlManager.deleteAcls."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.delete_acls.v3 import request as req
from kio.schema.delete_acls.v3 import response as resp
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from dataplane.authorizer import Operation
from dataplane.cluster.changes import Changes
from dataplane.handlers._acls import BadFilter, binding_of, filter_of
from dataplane.handlers._controller import via_controller
from dataplane.handlers.context import RequestContext, acl_api_refusal

API_KEY = 31
ZERO = datetime.timedelta(0)
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: req.DeleteAclsRequest) -> Any:
    refusal = acl_api_refusal(ctx, Operation.ALTER)  # here: the controller sees this broker
    if refusal is not None:
        results = tuple(_filter_result(ctx, *refusal, ()) for _ in request.filters)
        return ctx.make(resp.DeleteAclsResponse, throttle_time=ZERO, filter_results=results)
    return via_controller(ctx, request, decide, _settled(ctx))


def _settled(ctx: RequestContext) -> Any:
    """A forwarded deletion is answered once this broker's image no longer has the ACLs."""
    image = ctx.broker.metadata

    def settled(response: Any) -> bool:
        gone = {
            (m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation)
            for result in response.filter_results
            for m in result.matching_acls
        }
        return not any(
            (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation)
            in gone
            for a in image.acls.values()
        )

    return settled


def decide(ctx: RequestContext, request: req.DeleteAclsRequest, changes: Changes) -> Any:
    removed: set[str] = set()
    results = []
    for f in request.filters:
        try:
            selected = filter_of(f)
        except BadFilter as exc:
            results.append(_filter_result(ctx, ErrorCode.invalid_request, str(exc), ()))
            continue
        matching = []
        for acl_id, acl in changes.image.acls.items():
            if not selected.matches(binding_of(acl)):
                continue
            if acl_id not in removed:
                changes.remove_acl(acl_id)
                removed.add(acl_id)
                log.info("deleted ACL %s", binding_of(acl))
            matching.append(
                ctx.make(
                    resp.DeleteAclsMatchingAcl,
                    error_code=ErrorCode.none,
                    error_message=None,
                    resource_type=i8(acl.resource_type),
                    resource_name=acl.resource_name,
                    pattern_type=i8(acl.pattern_type),
                    principal=acl.principal,
                    host=acl.host,
                    operation=i8(acl.operation),
                    permission_type=i8(acl.permission),
                )
            )
        results.append(_filter_result(ctx, ErrorCode.none, None, tuple(matching)))
    return ctx.make(resp.DeleteAclsResponse, throttle_time=ZERO, filter_results=tuple(results))


def _filter_result(
    ctx: RequestContext, code: ErrorCode, message: str | None, matching: tuple[Any, ...]
) -> Any:
    return ctx.make(
        resp.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=matching
    )
