"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3), or by timestamp.

Answered by the partition's leader only; "latest" is the high watermark, or with
``isolation_level`` 1 (read_committed, v2+) the last stable offset; as Kafka, a
read_committed lookup by timestamp (or -3) finds nothing at or above the LSO.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v11 import request as req
from kio.schema.list_offsets.v11 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from dataplane.log.partition_log import PartitionLog
from wire.errors import BrokerError, error_code_for

API_KEY = 2
ZERO = datetime.timedelta(0)
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
READ_COMMITTED = 1


def handle(ctx: RequestContext, request: req.ListOffsetsRequest) -> Any:
    remote = ctx.broker.remote
    if remote is not None and any(p.timestamp >= 0 for t in request.topics for p in t.partitions):
        return _with_remote(ctx, request)
    return _answer(ctx, request, {})


async def _with_remote(ctx: RequestContext, request: Any) -> Any:
    """Timestamp lookups that may land in the remote tier are looked up there first."""
    remote = ctx.broker.remote
    assert remote is not None
    found: dict[tuple[str, int], tuple[int, int] | BrokerError] = {}
    for topic in request.topics:
        for p in topic.partitions:
            if p.timestamp < 0:
                continue
            try:
                ctx.require_topic(Operation.DESCRIBE, topic.name)
                part = ctx.broker.replicas.leader(
                    topic.name, p.partition_index, getattr(p, "current_leader_epoch", -1)
                )
                if part.plog.tiered:
                    found[(topic.name, p.partition_index)] = await tiered_lookup(
                        part.plog, p.timestamp, remote.offset_for_timestamp
                    )
            except BrokerError as exc:
                found[(topic.name, p.partition_index)] = exc
    return _answer(ctx, request, found)


LOOKUP_ATTEMPTS = 5
"""Times a timestamp lookup of a tiered partition starts again when local retention moved
the local log start while the remote tier was read."""


async def tiered_lookup(
    plog: PartitionLog,
    timestamp: int,
    remote: Callable[[PartitionLog, int], Awaitable[tuple[int, int] | None]],
) -> tuple[int, int]:
    """(offset, timestamp) of the first record at or after ``timestamp`` in a tiered
    partition, (-1, -1) when none. The remote tier answers below the local log start, the
    local log from there; the local log is asked with no wait after the remote tier's
    answer. Local retention may delete a segment (already uploaded) while the remote tier is
    read, and the record asked for with it: the lookup then starts again."""
    for _ in range(LOOKUP_ATTEMPTS):
        local_start = plog.log_start_offset
        hit = await remote(plog, timestamp)
        if hit is not None:
            return hit
        if plog.log_start_offset == local_start:
            break
    return _lookup(plog, timestamp)


def _answer(
    ctx: RequestContext, request: Any, found: dict[tuple[str, int], tuple[int, int] | BrokerError]
) -> Any:
    topics = []
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            try:
                ctx.require_topic(Operation.DESCRIBE, topic.name)
                part = ctx.broker.replicas.leader(
                    topic.name, p.partition_index, getattr(p, "current_leader_epoch", -1)
                )
                if ctx.api_version >= 2:  # a client's request (Kafka: isolation level set)
                    part.check_high_watermark_known()
                plog = part.plog
                hit = found.get((topic.name, p.partition_index))
                if isinstance(hit, BrokerError):
                    raise hit
                offset, timestamp = hit if hit is not None else _lookup(plog, p.timestamp)
                if committed and p.timestamp not in (EARLIEST, EARLIEST_LOCAL):
                    offset, timestamp = _committed(plog, p.timestamp, offset, timestamp)
                partitions.append(
                    ctx.make(
                        resp.ListOffsetsPartitionResponse,
                        partition_index=p.partition_index,
                        error_code=ErrorCode.none,
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=part.leader_epoch,
                    )
                )
            except BrokerError as exc:
                partitions.append(
                    ctx.make(
                        resp.ListOffsetsPartitionResponse,
                        partition_index=p.partition_index,
                        error_code=error_code_for(exc),
                    )
                )
        topics.append(
            ctx.make(resp.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions))
        )
    return ctx.make(resp.ListOffsetsResponse, throttle_time=ZERO, topics=tuple(topics))


def _committed(plog: PartitionLog, asked: int, offset: int, timestamp: int) -> tuple[int, int]:
    """A read_committed answer: latest is the LSO; other lookups stop below it."""
    stable = plog.last_stable_offset
    if asked == LATEST:
        return stable, -1
    return (offset, timestamp) if offset < stable else (-1, -1)


def _lookup(plog: PartitionLog, timestamp: int) -> tuple[int, int]:
    if timestamp == LATEST:
        return plog.high_watermark, -1
    if timestamp == EARLIEST:
        return plog.first_offset, -1
    if timestamp == EARLIEST_LOCAL:
        return plog.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
        return found if found is not None else (-1, -1)
    found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    return found
