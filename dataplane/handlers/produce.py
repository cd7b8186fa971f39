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
from dataplane.protocol.codec import EncodedResponse
from dataplane.protocol.produce_response import encode_success
from dataplane.protocol.record_batch import validate_batches

API_KEY = 0
ZERO = datetime.timedelta(0)
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    broker = ctx.broker
    fsync = broker.logs.fsync_on_append and acks != 0
    pending: list[asyncio.Future[None]] = []
    results: list[tuple[Any, list[tuple[int, AppendResult | BaseException]]]] = []
    failed = False
    for topic_data in request.topic_data:
        name: str | None = getattr(topic_data, "name", None)
        topic_id = getattr(topic_data, "topic_id", None)
        partitions: list[tuple[int, AppendResult | BaseException]] = []
        for pdata in topic_data.partition_data:
            try:
                if acks not in (0, 1, -1):
                    raise _invalid_acks(acks)
                plog = _resolve(ctx, name, topic_id, pdata.index)
                data = pdata.records
                if data is None:
                    raise CorruptRecord("produce request has null records")
                result = plog.append(data, validate_batches(data))
                if fsync and not result.duplicate:
                    pending.append(broker.logs.sync(plog))
                partitions.append((pdata.index, result))
            except BrokerError as exc:
                partitions.append((pdata.index, exc))
                failed = True
            except OSError as exc:
                log.error("produce to %s-%d failed: %s", name, pdata.index, exc)
                partitions.append((pdata.index, exc))
                failed = True
        results.append((topic_data, partitions))
    if acks == 0:
        return None
    response = _response(ctx, results) if failed else _fast_response(ctx, results)
    if not pending:
        return response
    return _after_fsync(ctx, pending, results, response)


def _fast_response(
    ctx: RequestContext, results: list[tuple[Any, list[tuple[int, Any]]]]
) -> EncodedResponse:
    body = encode_success(
        ctx.api_version,
        [
            (
                getattr(t, "name", None),
                getattr(t, "topic_id", None),
                [(i, r.base_offset, r.log_append_time, r.log_start_offset) for i, r in parts],
            )
            for t, parts in results
        ],
    )
    return EncodedResponse(body, ctx.api_version >= 9)


async def _after_fsync(
    ctx: RequestContext,
    pending: list[asyncio.Future[None]],
    results: list[tuple[Any, list[tuple[int, Any]]]],
    response: Any,
) -> Any:
    try:
        await asyncio.gather(*pending)
    except OSError as exc:
        log.error("fsync failed, answering KAFKA_STORAGE_ERROR: %s", exc)
        return _response(ctx, [(t, [(i, exc) for i, _ in parts]) for t, parts in results])
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


def _response(ctx: RequestContext, results: list[tuple[Any, list[tuple[int, Any]]]]) -> Any:
    return ctx.make(
        "ProduceResponse",
        responses=tuple(
            ctx.make(
                "TopicProduceResponse",
                name=getattr(t, "name", None),
                topic_id=getattr(t, "topic_id", None),
                partition_responses=tuple(
                    _ok(ctx, i, r) if isinstance(r, AppendResult) else _error(ctx, i, r)
                    for i, r in parts
                ),
            )
            for t, parts in results
        ),
        throttle_time=ZERO,
    )
