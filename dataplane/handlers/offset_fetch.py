"""OffsetFetch (9): a group's committed offsets; -1 where nothing is committed.

v1-v7 ask for one group, v8+ for several; ``topics`` null means every committed
partition. v10 names topics by id (unknown ids: UNKNOWN_TOPIC_ID). With ``require_stable``
(v7+, KIP-447) a partition whose offset an open transaction holds (TxnOffsetCommit before
the marker) answers UNSTABLE_OFFSET_COMMIT and offset -1, as Kafka does; the client retries
(a read_committed consumer and Kafka Streams with exactly_once_v2 ask so).
"""

from __future__ import annotations

import uuid
from typing import Any, TypeAlias

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import response as old
from kio.schema.offset_fetch.v10 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, InvalidGroupId, error_code_for

VersionedRequest: TypeAlias = Any
"""Its fields change shape between versions (read by version), which no single kio class
describes."""
API_KEY = 9
GROUPS_VERSION = 8
TOPIC_ID_VERSION = 10
TOP_LEVEL_ERROR_VERSION = 2

Partition = tuple[int, int, int, str, ErrorCode]
"""(partition, offset, leader epoch, metadata, error)."""
TopicAnswer = tuple[str | None, uuid.UUID | None, list[Partition]]


def handle(ctx: RequestContext, request: VersionedRequest) -> Any:
    stable = bool(getattr(request, "require_stable", False))  # v7+
    if ctx.api_version >= GROUPS_VERSION:
        groups = tuple(_group(ctx, g.group_id, g.topics, stable) for g in request.groups)
        return ctx.make(resp.OffsetFetchResponse, throttle_time=ZERO, groups=groups)
    error, topics = _fetch(ctx, request.group_id, request.topics, stable)
    if error is not None:
        if ctx.api_version >= TOP_LEVEL_ERROR_VERSION:
            topics = []
        else:  # v1 has no top-level error: every requested partition carries it.
            topics = [
                (name, tid, [(p[0], -1, -1, "", error) for p in parts])
                for name, tid, parts in topics
            ]
    return ctx.make(
        resp.OffsetFetchResponse,
        throttle_time=ZERO,
        topics=tuple(
            _topic(ctx, old.OffsetFetchResponseTopic, old.OffsetFetchResponsePartition, t)
            for t in topics
        ),
        error_code=error or ErrorCode.none,
    )


def _group(ctx: RequestContext, group_id: str, topics: Any, stable: bool) -> Any:
    error, answers = _fetch(ctx, group_id, topics, stable)
    return ctx.make(
        resp.OffsetFetchResponseGroup,
        group_id=group_id,
        topics=()
        if error
        else tuple(
            _topic(ctx, resp.OffsetFetchResponseTopics, resp.OffsetFetchResponsePartitions, t)
            for t in answers
        ),
        error_code=error or ErrorCode.none,
    )


def _fetch(
    ctx: RequestContext, group_id: str | None, topics: Any, stable: bool
) -> tuple[ErrorCode | None, list[TopicAnswer]]:
    by_id = ctx.api_version >= TOPIC_ID_VERSION
    metadata = ctx.broker.metadata
    wanted: list[tuple[str, list[int]]] | None = None
    unknown: list[TopicAnswer] = []
    if topics is not None:
        wanted = []
        for t in topics:
            if not by_id:
                wanted.append((t.name, list(t.partition_indexes)))
                continue
            info = metadata.topics_by_id.get(t.topic_id)
            if info is None:
                unknown.append(
                    (
                        None,
                        t.topic_id,
                        [(p, -1, -1, "", ErrorCode.unknown_topic_id) for p in t.partition_indexes],
                    )
                )
            else:
                wanted.append((info.name, list(t.partition_indexes)))
    try:
        if group_id is None:
            raise InvalidGroupId("group id is null")
        ctx.require_group(Operation.DESCRIBE, group_id)
        coordinator = coordinator_of(ctx)
        found = coordinator.fetch_offsets(group_id, wanted)
    except BrokerError as exc:
        requested: list[TopicAnswer] = [
            (name, None, [(p, -1, -1, "", ErrorCode.none) for p in ps]) for name, ps in wanted or []
        ]
        return error_code_for(exc), [*requested, *unknown]
    answers: list[TopicAnswer] = []
    for name, partitions in found:
        if not ctx.on_topic(Operation.DESCRIBE, name):  # Kafka's: hidden, or refused by name
            if wanted is not None:
                denied = ErrorCode.topic_authorization_failed
                answers.append((name, None, [(p, -1, -1, "", denied) for p, _ in partitions]))
            continue
        topic_id = None
        if by_id:
            info = metadata.topics.get(name)
            if info is None:
                continue  # committed for a topic that no longer exists: no id to name it by
            topic_id = info.topic_id
        answers.append(
            (
                name,
                topic_id,
                [
                    (p, -1, -1, "", ErrorCode.unstable_offset_commit)
                    if stable and coordinator.unstable_offset(group_id, name, p)
                    else (p, -1, -1, "", ErrorCode.none)
                    if c is None
                    else (p, c.offset, c.leader_epoch, c.metadata, ErrorCode.none)
                    for p, c in partitions
                ],
            )
        )
    return None, answers + unknown


def _topic(ctx: RequestContext, entity: type, part_entity: type, answer: TopicAnswer) -> Any:
    """A topic's answer: entities of v0-v7 (``old``) or of v8+ (one group per request)."""
    name, topic_id, partitions = answer
    return ctx.make(
        entity,
        name=name,
        topic_id=topic_id,
        partitions=tuple(
            ctx.make(
                part_entity,
                partition_index=p,
                committed_offset=offset,
                committed_leader_epoch=epoch,
                metadata=meta,
                error_code=code,
            )
            for p, offset, epoch, meta, code in partitions
        ),
    )
