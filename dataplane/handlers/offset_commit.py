"""OffsetCommit (8): store a group's consumed positions in ``__consumer_offsets``.

Partitions of unknown topics (or unknown topic ids, v10) are answered here and never
reach the coordinator; the rest are validated against the group as a whole (generation,
member) and written. As in Kafka, partitions rejected here come first in their topic's
answer. With ``log.flush.policy=fsync`` the answer waits for the fsync.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypeAlias

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v10 import response as resp

from dataplane.authorizer import Operation
from dataplane.coordinator_log import write_error
from dataplane.groups.coordinator import OffsetCommitEntry
from dataplane.handlers._groups import ZERO, coordinator_of, millis
from dataplane.handlers.context import RequestContext
from wire.errors import (
    BrokerError,
    TopicAuthorizationFailed,
    UnknownTopicId,
    UnknownTopicOrPartition,
    error_code_for,
)

VersionedRequest: TypeAlias = Any
"""Its fields change shape between versions (read by version), which no single kio class
describes."""
API_KEY = 8
TOPIC_ID_VERSION = 10
log = logging.getLogger(__name__)

Answer = tuple[Any, int, BrokerError | None]
"""(request topic, partition index, error)."""


def handle(ctx: RequestContext, request: VersionedRequest) -> Any:
    topics = ctx.broker.metadata
    rejected: list[Answer] = []
    accepted: list[tuple[Any, OffsetCommitEntry]] = []
    try:  # Kafka's: READ on the group for the whole request, then READ on each topic
        ctx.require_group(Operation.READ, request.group_id)
    except BrokerError as exc:
        return _response(
            ctx, [(t, p.partition_index, exc) for t in request.topics for p in t.partitions]
        )
    for topic in request.topics:
        if ctx.api_version >= TOPIC_ID_VERSION:
            info = topics.topics_by_id.get(topic.topic_id)
            missing: BrokerError = UnknownTopicId(f"unknown topic id {topic.topic_id}")
        else:
            info = topics.topics.get(topic.name)
            missing = UnknownTopicOrPartition(f"unknown topic {topic.name!r}")
        name = info.name if info is not None else getattr(topic, "name", None)
        if name is not None and not ctx.on_topic(Operation.READ, name):
            info = None
            missing = TopicAuthorizationFailed(f"not authorized to READ topic {name}")
        for p in topic.partitions:
            if info is None:
                rejected.append((topic, p.partition_index, missing))
            elif not 0 <= p.partition_index < info.partitions:
                rejected.append(
                    (topic, p.partition_index, UnknownTopicOrPartition("unknown partition"))
                )
            else:
                entry = OffsetCommitEntry(
                    info.name,
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
                accepted.append((topic, entry))
    if not accepted:
        return _response(ctx, rejected)
    try:
        outcome = coordinator_of(ctx).commit_offsets(
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id,
            getattr(request, "group_instance_id", None),
            [entry for _, entry in accepted],
            api_version=ctx.api_version,
            retention_ms=millis(getattr(request, "retention_time", None)),
        )
    except BrokerError as exc:
        return _response(ctx, rejected + [(t, e.partition, exc) for t, e in accepted])
    answers = rejected + [
        (t, e.partition, err) for (t, e), err in zip(accepted, outcome.errors, strict=True)
    ]
    if outcome.durable is None:
        return _response(ctx, answers)
    return _after_fsync(ctx, outcome.durable, answers)


async def _after_fsync(
    ctx: RequestContext, durable: asyncio.Future[None], answers: list[Answer]
) -> Any:
    try:
        await durable
    except (OSError, BrokerError) as exc:
        log.warning("offset commit not durable: %s", exc)
        failed = write_error(exc, timeout_means_unavailable=False)
        answers = [(t, p, err if err is not None else failed) for t, p, err in answers]
    return _response(ctx, answers)


def _response(ctx: RequestContext, answers: list[Answer]) -> Any:
    by_topic: dict[int, tuple[Any, list[Any]]] = {}
    for topic, partition, error in answers:
        entry = by_topic.setdefault(id(topic), (topic, []))
        entry[1].append(
            ctx.make(
                resp.OffsetCommitResponsePartition,
                partition_index=partition,
                error_code=ErrorCode.none if error is None else error_code_for(error),
            )
        )
    return ctx.make(
        resp.OffsetCommitResponse,
        throttle_time=ZERO,
        topics=tuple(
            ctx.make(
                resp.OffsetCommitResponseTopic,
                name=getattr(topic, "name", None),
                topic_id=getattr(topic, "topic_id", None),
                partitions=tuple(parts),
            )
            for topic, parts in by_topic.values()
        ),
    )
