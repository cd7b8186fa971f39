"""CreateAcls (30): decided by the active controller (forwarded from any other broker) and
recorded in the metadata log, so ACLs survive restarts and failover. Each creation is
checked as Kafka checks it (``AclBinding.validate``: INVALID_REQUEST with Kafka's message);
an ACL identical to one that exists is accepted and not stored twice.

Enforcement is not wired yet: the ACLs are stored, listed and deleted with Kafka's admin
clients, and every principal may still do everything (issue 15)."""

from __future__ import annotations

import datetime
import logging
import uuid
from typing import Any

from kio.schema.create_acls.v3 import request as req
from kio.schema.create_acls.v3 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import AclBinding, InvalidAcl, Operation
from dataplane.cluster.changes import Changes
from dataplane.handlers._acls import binding_of, binding_of_creation, record_of
from dataplane.handlers._controller import via_controller
from dataplane.handlers.context import RequestContext, acl_api_refusal

API_KEY = 30
ZERO = datetime.timedelta(0)
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: req.CreateAclsRequest) -> Any:
    refusal = acl_api_refusal(ctx, Operation.ALTER)  # here: the controller sees this broker
    if refusal is not None:
        results = tuple(_result(ctx, *refusal) for _ in request.creations)
        return ctx.make(resp.CreateAclsResponse, throttle_time=ZERO, results=results)
    return via_controller(ctx, request, decide, _settled(ctx, request))


def _settled(ctx: RequestContext, request: req.CreateAclsRequest) -> Any:
    """A forwarded creation is answered once this broker's image has the ACLs."""
    image = ctx.broker.metadata
    wanted = [binding_of_creation(c) for c in request.creations]

    def settled(response: Any) -> bool:
        have = {binding_of(a) for a in image.acls.values()}
        return all(
            b in have
            for b, result in zip(wanted, response.results, strict=False)
            if result.error_code == ErrorCode.none
        )

    return settled


def decide(ctx: RequestContext, request: req.CreateAclsRequest, changes: Changes) -> Any:
    existing = {binding_of(a) for a in changes.image.acls.values()}
    results = []
    for creation in request.creations:
        binding: AclBinding = binding_of_creation(creation)
        try:
            binding.validate()
        except InvalidAcl as exc:
            results.append(_result(ctx, ErrorCode.invalid_request, str(exc)))
            continue
        if binding not in existing:
            changes.add_acl(record_of(str(uuid.uuid4()), binding))
            existing.add(binding)
            log.info("created ACL %s", binding)
        results.append(_result(ctx, ErrorCode.none, None))
    return ctx.make(resp.CreateAclsResponse, throttle_time=ZERO, results=tuple(results))


def _result(ctx: RequestContext, code: ErrorCode, message: str | None) -> Any:
    return ctx.make(resp.AclCreationResult, error_code=code, error_message=message)
