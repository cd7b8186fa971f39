"""DeleteGroups (42): delete Empty groups with their committed offsets.

NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND for unknown groups. Deletion
writes tombstones for every offset and for the group's metadata; with
``log.flush.policy=fsync`` the answer waits for them to be on disk.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.delete_groups.v2 import request as req
from kio.schema.delete_groups.v2 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.groups.storage import kafka_answer_order
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, GroupAuthorizationFailed, NotCoordinator, error_code_for

API_KEY = 42
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: req.DeleteGroupsRequest) -> Any:
    names = [str(g) for g in dict.fromkeys(request.groups_names)]  # distinct, as Kafka
    groups = ctx.broker.groups
    if groups is not None and groups.storage.partitions:
        # Answers come in Kafka's order (by coordinator partition, then hash order).
        order = kafka_answer_order(names, groups.storage.partitions, hashed_within=True)
        names = [names[i] for i in order]
    denied = [n for n in names if not ctx.on_group(Operation.DELETE, n)]
    allowed = [n for n in names if n not in denied]
    try:
        errors, durable = coordinator_of(ctx).delete_groups(allowed) if allowed else ([], [])
    except BrokerError as exc:
        errors, durable = [exc for _ in allowed], []
    # Kafka's: GROUP_AUTHORIZATION_FAILED for the groups the caller may not DELETE
    refused = {n: GroupAuthorizationFailed(f"not authorized to DELETE group {n}") for n in denied}
    outcome = dict(zip(allowed, errors, strict=True))
    errors = [refused.get(n, outcome.get(n)) for n in names]
    if not durable:
        return _response(ctx, names, errors)
    return _after_fsync(ctx, durable, names, errors)


async def _after_fsync(
    ctx: RequestContext,
    durable: list[asyncio.Future[None]],
    names: list[str],
    errors: list[BrokerError | None],
) -> Any:
    outcomes = await asyncio.gather(*durable, return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if failures:
        log.error("fsync of group deletion failed: %s", failures[0])
        failed = NotCoordinator(f"fsync failed: {failures[0]}")
        errors = [e if e is not None else failed for e in errors]
    return _response(ctx, names, errors)


def _response(ctx: RequestContext, names: list[str], errors: list[BrokerError | None]) -> Any:
    return ctx.make(
        resp.DeleteGroupsResponse,
        throttle_time=ZERO,
        results=tuple(
            ctx.make(
                resp.DeletableGroupResult,
                group_id=name,
                error_code=ErrorCode.none if error is None else error_code_for(error),
            )
            for name, error in zip(names, errors, strict=True)
        ),
    )
