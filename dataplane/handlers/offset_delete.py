"""OffsetDelete (47, KIP-496): remove a group's committed offsets of some partitions.

Answered by the group's coordinator. Group-level errors: GROUP_ID_NOT_FOUND for an unknown
group, NON_EMPTY_GROUP for a group with members whose protocol type is not "consumer",
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE as for every group API. A topic that a
member of the group subscribes to keeps its offsets and each of its partitions gets
GROUP_SUBSCRIBED_TO_TOPIC; other partitions get NONE whether or not they had an offset,
and partitions that do not exist UNKNOWN_TOPIC_OR_PARTITION (checked first, as Kafka).
With ``log.flush.policy=fsync`` the answer waits for the tombstones to be on disk.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.offset_delete.v0 import request as req
from kio.schema.offset_delete.v0 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers.context import RequestContext
from wire.errors import (
    BrokerError,
    NotCoordinator,
    TopicAuthorizationFailed,
    UnknownTopicOrPartition,
    error_code_for,
)

API_KEY = 47
log = logging.getLogger(__name__)

Results = list[tuple[str, list[tuple[int, BrokerError | None]]]]


def handle(ctx: RequestContext, request: req.OffsetDeleteRequest) -> Any:
    image = ctx.broker.metadata
    asked: list[tuple[str, list[int]]] = []
    unknown: Results = []
    if not ctx.on_group(Operation.DELETE, request.group_id):
        return _response(ctx, ErrorCode.group_authorization_failed, [])
    for topic in request.topics:
        parts = [int(p.partition_index) for p in topic.partitions]
        if not ctx.on_topic(Operation.READ, topic.name):  # Kafka's: READ on each topic
            denied = TopicAuthorizationFailed(f"not authorized to READ topic {topic.name}")
            unknown.append((topic.name, [(p, denied) for p in parts]))
            continue
        known = [p for p in parts if image.partition(topic.name, p) is not None]
        missing = [p for p in parts if p not in known]
        if known:
            asked.append((topic.name, known))
        if missing:
            unknown.append((topic.name, [(p, UnknownTopicOrPartition()) for p in missing]))
    try:
        results, durable = coordinator_of(ctx).delete_offsets(request.group_id, asked)
    except BrokerError as exc:
        return _response(ctx, error_code_for(exc), [])
    results = _merge([t.name for t in request.topics], results + unknown)
    if durable is None:
        return _response(ctx, ErrorCode.none, results)
    return _after_fsync(ctx, durable, results)


async def _after_fsync(ctx: RequestContext, durable: asyncio.Future[None], results: Results) -> Any:
    try:
        await durable
    except OSError as exc:
        log.error("fsync of offset deletion failed: %s", exc)
        return _response(ctx, NotCoordinator.code, [])
    return _response(ctx, ErrorCode.none, results)


def _merge(order: list[str], results: Results) -> Results:
    """One entry per topic, in the request's order (as Kafka answers)."""
    by_topic: dict[str, list[tuple[int, BrokerError | None]]] = {t: [] for t in order}
    for topic, outcome in results:
        by_topic[topic].extend(outcome)
    return [(t, o) for t, o in by_topic.items() if o]


def _response(ctx: RequestContext, code: ErrorCode, results: Results) -> Any:
    return ctx.make(
        resp.OffsetDeleteResponse,
        error_code=code,
        throttle_time=ZERO,
        topics=tuple(
            ctx.make(
                resp.OffsetDeleteResponseTopic,
                name=topic,
                partitions=tuple(
                    ctx.make(
                        resp.OffsetDeleteResponsePartition,
                        partition_index=partition,
                        error_code=ErrorCode.none if error is None else error_code_for(error),
                    )
                    for partition, error in outcome
                ),
            )
            for topic, outcome in results
        ),
    )
