"""Produce (0): validate record batches, append them, acknowledge per the acks setting.

Only the partition's leader takes writes (NOT_LEADER_OR_FOLLOWER elsewhere). acks=0 gets
no response at all (as Kafka); acks=1 is answered once the leader has the write; acks=-1
(all) is refused with NOT_ENOUGH_REPLICAS when the ISR is smaller than
``min.insync.replicas`` and answered once the high watermark covers the write, i.e. every
ISR member has it (REQUEST_TIMED_OUT after the request's timeout). With
``log.flush.policy=fsync`` the answer also waits for the fsync round that covers the write.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any, TypeAlias

from kio.schema.errors import ErrorCode
from kio.schema.produce.v13 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from dataplane.handlers.leader_hints import PRODUCE_HINT_VERSION, PRODUCE_HINTED, LeaderHints
from dataplane.log.partition_log import AppendResult
from dataplane.log.producer_state import REFUSALS
from dataplane.replication.partition import Partition
from wire.errors import (
    BrokerError,
    CorruptRecord,
    InvalidRequiredAcks,
    RecordValidationError,
    UnknownTopicId,
    error_code_for,
    error_message_for,
)
from wire.framing import EncodedResponse
from wire.produce_response import encode_success
from wire.record_batch import validate_batches

VersionedRequest: TypeAlias = Any
"""Its fields change shape between versions (read by version), which no single kio class
describes."""
API_KEY = 0
ZERO = datetime.timedelta(0)
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: VersionedRequest) -> Any:
    broker = ctx.broker
    if broker.config.get_bool("auto.create.topics.enable"):
        topics = broker.metadata.topics
        missing = [
            t.name
            for t in request.topic_data
            if getattr(t, "name", None)
            and t.name not in topics
            and (ctx.on_cluster(Operation.CREATE) or ctx.on_topic(Operation.CREATE, t.name))
        ]
        if missing:
            return _after_auto_create(ctx, request, missing)
    return _append(ctx, request)


async def _after_auto_create(ctx: RequestContext, request: Any, missing: list[str]) -> Any:
    """Topics are created (auto.create.topics.enable) before the write, as Metadata does."""
    for name in dict.fromkeys(missing):
        try:
            await ctx.broker.auto_create(name)
        except BrokerError as exc:
            log.info("auto-creating %s for a produce request failed: %s", name, exc)
    response = _append(ctx, request)
    if hasattr(response, "__await__"):
        response = await response
    return response


def _append(ctx: RequestContext, request: Any) -> Any:  # noqa: C901, PLR0912 - the produce path's per-partition outcomes
    acks = request.acks
    broker = ctx.broker
    fsync = broker.logs.fsync_on_append and acks != 0
    pending: list[asyncio.Future[None]] = []
    replicated: list[tuple[list[tuple[int, Any]], int, asyncio.Future[None]]] = []
    results: list[tuple[Any, list[tuple[int, AppendResult | BaseException]]]] = []
    failed = False
    timeout = max(request.timeout.total_seconds(), 0.001)
    for topic_data in request.topic_data:
        name: str | None = getattr(topic_data, "name", None)
        topic_id = getattr(topic_data, "topic_id", None)
        partitions: list[tuple[int, AppendResult | BaseException]] = []
        for pdata in topic_data.partition_data:
            try:
                if acks not in (0, 1, -1):
                    raise _invalid_acks(acks)
                part = _resolve(ctx, name, topic_id, pdata.index)
                plog = part.plog
                min_isr = 1
                if acks == -1:
                    min_isr = plog.config.get_int("min.insync.replicas")
                    part.check_min_isr(min_isr)
                data = pdata.records
                if data is None:
                    raise CorruptRecord("produce request has null records")
                result = plog.append(data, validate_batches(data))
                if not result.duplicate:
                    broker.usage.meter.bytes_in(plog.topic, ctx.caller, len(data))
                    if fsync:
                        pending.append(broker.logs.sync(plog))
                part.maybe_advance_high_watermark()
                if acks == -1 and plog.high_watermark <= result.last_offset:
                    waiting = part.wait_replicated(result.last_offset + 1, timeout, min_isr)
                    replicated.append((partitions, len(partitions), waiting))
                partitions.append((pdata.index, result))
            except BrokerError as exc:
                if isinstance(exc, RecordValidationError):  # raised by plog.append
                    exc.log_start_offset = plog.log_start_offset  # as Kafka answers them
                elif type(exc) in REFUSALS:  # refused unwritten
                    _note_refused(ctx, name, topic_id, pdata, type(exc))
                partitions.append((pdata.index, exc))
                failed = True
            except OSError as exc:
                log.error("produce to %s-%d failed: %s", name, pdata.index, exc)
                partitions.append((pdata.index, exc))
                failed = True
        results.append((topic_data, partitions))
    if acks == 0:
        return None
    if replicated:
        return _after_replication(ctx, pending, replicated, results)
    response = _response(ctx, results) if failed else _fast_response(ctx, results)
    if not pending:
        return response
    return _after_fsync(ctx, pending, results, response)


async def _after_replication(
    ctx: RequestContext,
    pending: list[asyncio.Future[None]],
    replicated: list[tuple[list[tuple[int, Any]], int, asyncio.Future[None]]],
    results: list[tuple[Any, list[tuple[int, Any]]]],
) -> Any:
    """acks=all: answer once the ISR has every write (and the fsync round, if any)."""
    for partitions, position, waiting in replicated:
        try:
            await waiting
        except BrokerError as exc:
            partitions[position] = (partitions[position][0], exc)
    failed = any(isinstance(r, BaseException) for _, parts in results for _, r in parts)
    response = _response(ctx, results) if failed else _fast_response(ctx, results)
    if not pending:
        return response
    return await _after_fsync(ctx, pending, results, response)


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


def _note_refused(
    ctx: RequestContext,
    name: str | None,
    topic_id: Any,
    pdata: Any,
    refusal: type[BrokerError],
) -> None:
    """A write this replica refused unwritten (a refusal of ``REFUSALS``: NOT_LEADER_OR_
    FOLLOWER, NOT_ENOUGH_REPLICAS; a full disk's is noted by the append already, and noting
    it again changes nothing): its producer state notes it (``ProducerStateTable.note_refused``),
    so that the batches behind it (here, or once this replica leads) are refused alike
    until the client retries it, not answered OUT_OF_ORDER_SEQUENCE: librdkafka bumps its
    epoch on that error and re-sends what it has in flight under new sequence numbers,
    duplicating what was written (a client sent here by a leader hint can be faster than
    this broker's metadata; the soak found the same after NOT_ENOUGH_REPLICAS)."""
    broker = ctx.broker
    if name is None:
        info = broker.metadata.topics_by_id.get(topic_id)
        name = None if info is None else info.name
    replica = None if name is None else broker.replicas.partitions.get((name, pdata.index))
    if replica is None or pdata.records is None:
        return
    try:
        headers = validate_batches(pdata.records)
    except BrokerError:
        return  # not a batch to remember
    replica.plog.producers.note_refused(headers, refusal)


def _invalid_acks(acks: int) -> BrokerError:
    return InvalidRequiredAcks(f"acks must be -1, 0 or 1, got {acks}")


def _resolve(ctx: RequestContext, name: str | None, topic_id: Any, partition: int) -> Partition:
    """The partition, if this broker leads it (as Kafka, Produce never creates topics)."""
    broker = ctx.broker
    if name is None:
        info = broker.metadata.topics_by_id.get(topic_id)
        if info is None:
            raise UnknownTopicId(f"unknown topic id {topic_id}")
        name = info.name
    ctx.require_topic(Operation.WRITE, name)
    return broker.replicas.leader(name, partition)


def _ok(ctx: RequestContext, index: int, result: AppendResult) -> Any:
    append_time = None
    if result.log_append_time >= 0:
        append_time = datetime.datetime.fromtimestamp(
            result.log_append_time / 1000, tz=datetime.UTC
        )
    return ctx.make(
        resp.PartitionProduceResponse,
        index=index,
        error_code=ErrorCode.none,
        base_offset=result.base_offset,
        log_append_time=append_time,
        log_start_offset=result.log_start_offset,
        record_errors=(),
    )


def _error(
    ctx: RequestContext, index: int, exc: BaseException, hint: dict[str, Any] | None = None
) -> Any:
    """``hint``: the partition's ``current_leader`` keyword (KIP-951), if it has one."""
    record_errors: tuple[Any, ...] = ()
    log_start_offset = -1
    if isinstance(exc, RecordValidationError):  # KIP-467: which records, and why (v8+)
        log_start_offset = exc.log_start_offset
        if ctx.api_version >= 8:
            record_errors = tuple(
                ctx.make(resp.BatchIndexAndErrorMessage, batch_index=i, batch_index_error_message=m)
                for i, m in exc.record_errors
            )
    return ctx.make(
        resp.PartitionProduceResponse,
        index=index,
        error_code=error_code_for(exc),
        base_offset=-1,
        log_append_time=None,
        log_start_offset=log_start_offset,
        record_errors=record_errors,
        error_message=error_message_for(exc),
        **(hint or {}),
    )


def _response(ctx: RequestContext, results: list[tuple[Any, list[tuple[int, Any]]]]) -> Any:
    hints = LeaderHints(ctx) if ctx.api_version >= PRODUCE_HINT_VERSION else None

    def partition(topic: Any, index: int, result: Any) -> Any:
        if isinstance(result, AppendResult):
            return _ok(ctx, index, result)
        hint = None
        if hints is not None and error_code_for(result) in PRODUCE_HINTED:
            hint = hints.current_leader(
                resp.LeaderIdAndEpoch,
                getattr(topic, "name", None),
                getattr(topic, "topic_id", None),
                index,
            )
        return _error(ctx, index, result, hint)

    responses = tuple(
        ctx.make(
            resp.TopicProduceResponse,
            name=getattr(t, "name", None),
            topic_id=getattr(t, "topic_id", None),
            partition_responses=tuple(partition(t, i, r) for i, r in parts),
        )
        for t, parts in results
    )
    return ctx.make(
        resp.ProduceResponse,
        responses=responses,
        throttle_time=ZERO,
        **(hints.node_endpoints(resp.NodeEndpoint) if hints is not None else {}),
    )
