"""Produce (0): validate record batches, append them, acknowledge per the acks setting.

acks=0 gets no response at all (as Kafka). With ``log.flush.policy=fsync`` the answer
to acks=1/-1 waits for the fsync round that covers the write.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from dataplane.errors import (
    BrokerError,
    CorruptRecord,
    UnknownTopicId,
    UnknownTopicOrPartition,
    error_code_for,
    error_message_for,
)
from dataplane.handlers.context import RequestContext
from dataplane.log.partition_log import AppendResult
from dataplane.protocol.record_batch import validate_batches

API_KEY = 0
ZERO = datetime.timedelta(0)
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    broker = ctx.broker
    fsync = broker.logs.fsync_on_append and acks != 0
    pending: list[asyncio.Future[None]] = []
    topics: list[tuple[Any, list[Any]]] = []
    for topic_data in request.topic_data:
        name: str | None = getattr(topic_data, "name", None)
        topic_id = getattr(topic_data, "topic_id", None)
        partitions: list[Any] = []
        for pdata in topic_data.partition_data:
            try:
                if acks not in (0, 1, -1):
                    raise _invalid_acks(acks)
                plog = _resolve(ctx, name, topic_id, pdata.index)
                if pdata.records is None:
                    raise CorruptRecord("produce request has null records")
                data = pdata.records
                result = plog.append(data, validate_batches(data))
                if fsync and not result.duplicate:
                    pending.append(broker.logs.sync(plog))
                partitions.append(_ok(ctx, pdata.index, result))
            except BrokerError as exc:
                partitions.append(_error(ctx, pdata.index, exc))
            except OSError as exc:
                log.error("produce to %s-%d failed: %s", name, pdata.index, exc)
                partitions.append(_error(ctx, pdata.index, exc))
        topics.append((topic_data, partitions))
    if acks == 0:
        return None
    response = _response(ctx, topics)
    if not pending:
        return response
    return _after_fsync(ctx, pending, topics, response)


async def _after_fsync(
    ctx: RequestContext, pending: list[asyncio.Future[None]], topics: list[Any], response: Any
) -> Any:
    try:
        await asyncio.gather(*pending)
    except OSError as exc:
        log.error("fsync failed, answering KAFKA_STORAGE_ERROR: %s", exc)
        failed = [(t, [_error(ctx, p.index, exc) for p in partitions]) for t, partitions in topics]
        return _response(ctx, failed)
    return response


def _invalid_acks(acks: int) -> BrokerError:
    from dataplane.errors import InvalidRequiredAcks

    return InvalidRequiredAcks(f"acks must be -1, 0 or 1, got {acks}")


def _resolve(ctx: RequestContext, name: str | None, topic_id: Any, partition: int) -> Any:
    broker = ctx.broker
    if name is None:
        info = broker.metadata.topics_by_id.get(topic_id)
        if info is None:
            raise UnknownTopicId(f"unknown topic id {topic_id}")
        name = info.name
    elif name not in broker.metadata.topics and broker.auto_create(name) is None:
        raise UnknownTopicOrPartition(f"unknown topic {name!r}")
    return broker.logs.get(name, partition)


def _ok(ctx: RequestContext, index: int, result: AppendResult) -> Any:
    append_time = None
    if result.log_append_time >= 0:
        append_time = datetime.datetime.fromtimestamp(
            result.log_append_time / 1000, tz=datetime.UTC
        )
    return ctx.make(
        "PartitionProduceResponse",
        index=index,
        error_code=ErrorCode.none,
        base_offset=result.base_offset,
        log_append_time=append_time,
        log_start_offset=result.log_start_offset,
        record_errors=(),
    )


def _error(ctx: RequestContext, index: int, exc: BaseException) -> Any:
    return ctx.make(
        "PartitionProduceResponse",
        index=index,
        error_code=error_code_for(exc),
        base_offset=-1,
        log_append_time=None,
        log_start_offset=-1,
        record_errors=(),
        error_message=error_message_for(exc),
    )


def _response(ctx: RequestContext, topics: list[tuple[Any, list[Any]]]) -> Any:
    return ctx.make(
        "ProduceResponse",
        responses=tuple(
            ctx.make(
                "TopicProduceResponse",
                name=getattr(t, "name", None),
                topic_id=getattr(t, "topic_id", None),
                partition_responses=tuple(parts),
            )
            for t, parts in topics
        ),
        throttle_time=ZERO,
    )
