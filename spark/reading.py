"""Executor side of a read: one split in, Arrow batches of Kafka rows out.

Every client is created here, inside the task, and closed before it returns: the S3 client
of a tiered split (``tiered.object_store.S3ObjectStore``: ranged GETs presigned by boto3
and received by ``tiered.ranged_get``) and the confluent-kafka consumer of a hot split.
Tiered reads never pass through a broker.

read_committed: a hot split's consumer gets ``isolation.level`` with the other ``kafka.*``
options (librdkafka drops aborted records); a tiered split reads its segment's
``.txnindex`` object (every aborted transaction overlapping the segment: uploaded segments
are wholly below the last stable offset, so it is complete) and drops their batches.
Control batches are never rows, in either mode.
"""

from __future__ import annotations

import functools
import gc
import itertools
import time
import uuid
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any, cast

import pyarrow as pa
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from spark.chunk_queue import ChunkQueue
from spark.planning import HotSplit, InputSplits, TieredSplit
from spark.records import AbortedRanges, Columns, CorruptSegment, decode_into, iter_batches
from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectNotFound, ObjectStoreError
from tiered.object_store import S3ObjectStore
from wire import record_columns
from wire.errors import CorruptRecord
from wire.record_batch import CREATE_TIME, LOG_APPEND_TIME
from wire.segment_index import parse_index
from wire.transactions import TXN_INDEX_ENTRY_SIZE, parse_txn_index


class DataLossError(Exception):
    """Offsets the plan promised are gone (retention ran between planning and reading)."""


@functools.cache
def settle_heap() -> None:
    """Once per process: load the compiled walker, then move every object the process holds
    to the collector's permanent generation (``gc.freeze``).

    Spark's Python daemon runs a full ``gc.collect()`` after every task of a reused worker.
    numba and llvmlite leave ~170,000 long-lived objects in the worker, and a collection that
    walks them all took 150-300 ms on 2 cores: 5-10 ms per MB of a 16 MiB split, more than
    reading it. Frozen objects are skipped by collections and still freed by reference
    counting; what the first collection here finds unreachable is collected first.
    """
    record_columns.load()
    gc.collect()
    gc.freeze()


def read_splits(
    splits: InputSplits,
    *,
    include_headers: bool,
    rows_per_batch: int,
    store: ObjectStoreSettings | None,
    chunk_bytes: int,
    bootstrap: str,
    kafka_conf: Mapping[str, str],
    hot_timeout_ms: int,
    fail_on_data_loss: bool,
    read_committed: bool = False,
    prefetch_chunks: int = 1,
) -> Iterator[pa.RecordBatch]:
    """The rows of one input partition: its splits in order (a run of tiered ones shares
    one queue of GETs)."""
    settle_heap()
    for tiered, run in itertools.groupby(splits, lambda s: isinstance(s, TieredSplit)):
        if tiered:
            if store is None:
                raise ValueError("a tiered split without object store settings")
            yield from read_tiered(
                cast("list[TieredSplit]", list(run)),
                store,
                include_headers=include_headers,
                rows_per_batch=rows_per_batch,
                chunk_bytes=chunk_bytes,
                fail_on_data_loss=fail_on_data_loss,
                read_committed=read_committed,
                prefetch=prefetch_chunks,
            )
            continue
        for split in cast("list[HotSplit]", list(run)):
            yield from read_hot(
                split,
                bootstrap=bootstrap,
                kafka_conf=kafka_conf,
                include_headers=include_headers,
                rows_per_batch=rows_per_batch,
                timeout_ms=hot_timeout_ms,
                fail_on_data_loss=fail_on_data_loss,
            )


_stores: dict[ObjectStoreSettings, S3ObjectStore] = {}


def _store(settings: ObjectStoreSettings) -> S3ObjectStore:
    """One store (so one boto3 client, made on first use) per executor process and settings:
    Python workers are reused across tasks, and a client costs ~0.2 s to make."""
    store = _stores.get(settings)
    if store is None:
        store = _stores[settings] = S3ObjectStore(settings)
    return store


def read_tiered(
    splits: Sequence[TieredSplit],
    settings: ObjectStoreSettings,
    *,
    include_headers: bool,
    rows_per_batch: int,
    chunk_bytes: int,
    fail_on_data_loss: bool,
    read_committed: bool = False,
    prefetch: int = 1,
) -> Iterator[pa.RecordBatch]:
    """Records ``[start, end)`` of each split's segment object (splits of one topic
    partition, as ``group_splits`` makes them), in order, batches checked by
    CRC; the GETs of all the splits' chunks in one queue (``ChunkQueue``, ``prefetch`` of
    them ahead). A split starting inside its segment begins at the batch the segment's
    index names for its start (one small GET), not at the first byte. ``read_committed``:
    batches of aborted transactions are dropped (the segment's ``.txnindex`` object, one
    small GET)."""
    if not splits:
        return
    topic, partition = splits[0].topic, splits[0].partition
    if any((s.topic, s.partition) != (topic, partition) for s in splits):
        raise ValueError("tiered splits of several topic partitions in one read")
    store = _store(settings)
    queue = ChunkQueue(store, chunk_bytes, prefetch)
    # a batch may pass rows_per_batch by one records block; its data is at most a chunk's
    columns = Columns(topic, partition, include_headers, 2 * rows_per_batch, chunk_bytes)
    try:
        numbers = [queue.add(s.key, start_position(store, s), s.size_bytes) for s in splits]
        for split, number in zip(splits, numbers, strict=True):
            yield from _decode_split(
                split,
                queue.chunks(number),
                columns,
                rows_per_batch,
                store if read_committed else None,
                fail_on_data_loss,
            )
    finally:
        queue.close()
    if len(columns):
        yield columns.flush()


def _decode_split(  # noqa: PLR0917 - one split and where its rows go
    split: TieredSplit,
    chunks: Generator[bytes],
    columns: Columns,
    rows_per_batch: int,
    committed_from: S3ObjectStore | None,
    fail_on_data_loss: bool,
) -> Iterator[pa.RecordBatch]:
    """One split's rows into ``columns``, full batches handed on. ``committed_from``: the
    store to read the segment's aborted transactions from (read_committed)."""
    try:
        aborted = None if committed_from is None else aborted_ranges(committed_from, split)
        for batch in iter_batches(chunks):
            base = int.from_bytes(batch[0:8], "big", signed=True)
            if base >= split.end:
                break
            decode_into(columns, batch, split.start, split.end, aborted=aborted)
            if columns.full(rows_per_batch):
                yield columns.flush()
    except ObjectNotFound as exc:
        if not fail_on_data_loss:
            return  # the segment expired after planning: its records are gone
        raise DataLossError(
            f"{split.topic}-{split.partition}: segment {split.key} is gone from the object "
            "store (remote retention ran after planning); run the query again"
        ) from exc
    finally:
        chunks.close()


def aborted_ranges(store: S3ObjectStore, split: TieredSplit) -> AbortedRanges:
    """The aborted transactions overlapping the split's segment, from its ``.txnindex``
    object (none when the segment has no such object). A damaged object fails the read
    (CorruptSegment): without it aborted records cannot be told apart."""
    size = split.txn_index_bytes
    if size <= 0 or not split.txn_index_key:
        return AbortedRanges(())
    raw = store.get_range(split.txn_index_key, 0, size)
    if len(raw) != size or size % TXN_INDEX_ENTRY_SIZE:
        raise CorruptSegment(
            f"{split.txn_index_key}: {len(raw)} bytes, the remote log says {size} (whole "
            f"entries of {TXN_INDEX_ENTRY_SIZE}); the object is damaged"
        )
    try:
        return AbortedRanges(parse_txn_index(raw))
    except CorruptRecord as exc:
        raise CorruptSegment(f"{split.txn_index_key}: {exc}") from exc


def start_position(store: S3ObjectStore, split: TieredSplit) -> int:
    """Byte position in the segment object of the last indexed batch at or before the
    split's start; 0 for a split from the segment's base, or when the index cannot be used
    (a damaged index costs time, never rows: batches below the start are skipped)."""
    if split.start <= split.segment_base or not split.index_key or split.index_bytes <= 0:
        return 0
    try:
        raw = store.get_range(split.index_key, 0, split.index_bytes)
    except ObjectStoreError:
        return 0
    view = parse_index(raw)
    if view is None or view.base_offset != split.segment_base:
        return 0
    position, _ = view.entry_for(split.start)
    return position if 0 <= position < split.size_bytes else 0


def _headers(raw: Any) -> list[tuple[str, bytes | None]]:
    """confluent-kafka's headers (a list of pairs; a dict on some producers' side)."""
    pairs = raw.items() if isinstance(raw, dict) else raw
    return [(str(k), None if v is None else bytes(v)) for k, v in pairs]


def read_hot(  # noqa: C901, PLR0912, PLR0915 - the hot-tail consumer loop and its end conditions
    split: HotSplit,
    *,
    bootstrap: str,
    kafka_conf: Mapping[str, str],
    include_headers: bool,
    rows_per_batch: int,
    timeout_ms: int,
    fail_on_data_loss: bool,
) -> Iterator[pa.RecordBatch]:
    """Records ``[start, end)`` fetched from the partition leader (confluent-kafka).

    Done when a record at or past ``end`` arrives, or the consumer's position reaches
    ``end`` (control records at the end are skipped by the client and only move the
    position), or end-of-partition is reported at or past ``end``.
    """
    consumer = Consumer(
        {
            **kafka_conf,
            "bootstrap.servers": bootstrap,
            "group.id": f"sluice-spark-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "log_level": 3,
        }
    )
    tp = TopicPartition(split.topic, split.partition, split.start)
    columns = Columns(split.topic, split.partition, include_headers)
    next_offset = split.start
    deadline = time.monotonic() + timeout_ms / 1000
    last_error = "none"
    try:
        consumer.assign([tp])
        while next_offset < split.end:
            # asking for no more than are left makes consume() return once they are here
            wanted = max(1, min(rows_per_batch, 10_000, split.end - next_offset))
            messages = consumer.consume(num_messages=wanted, timeout=0.5)
            progressed = False
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if (msg.offset() or 0) >= split.end:
                            next_offset = split.end
                        continue
                    if err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                        if fail_on_data_loss:
                            raise DataLossError(
                                f"{split.topic}-{split.partition}: offset {next_offset} is out "
                                f"of range (deleted by retention after planning): {err.str()}"
                            )
                        # continue at the log start, if it is still inside the split
                        low, _ = consumer.get_watermark_offsets(tp, timeout=10)
                        next_offset = max(next_offset, min(int(low), split.end))
                        if next_offset < split.end:
                            consumer.assign(
                                [TopicPartition(split.topic, split.partition, next_offset)]
                            )
                        break
                    if err.fatal():
                        raise KafkaException(err)
                    last_error = err.str()  # retried until the deadline
                    continue
                offset = msg.offset()
                if offset is None:
                    continue
                if offset >= split.end:
                    next_offset = split.end
                    break
                if offset < next_offset:
                    continue
                progressed = True
                next_offset = offset + 1
                kind, ts = msg.timestamp()
                hdrs = msg.headers() if include_headers else None
                columns.append(
                    msg.key(),
                    msg.value(),
                    offset,
                    ts,
                    LOG_APPEND_TIME if kind == TIMESTAMP_LOG_APPEND_TIME else CREATE_TIME,
                    _headers(hdrs) if hdrs else None,
                )
            if columns.full(rows_per_batch):
                yield columns.flush()
            if next_offset < split.end:
                position = consumer.position([tp])[0].offset
                if position >= 0 and position >= split.end:
                    next_offset = split.end
                elif position > next_offset:
                    next_offset = position
                    progressed = True
            if progressed:
                deadline = time.monotonic() + timeout_ms / 1000
            elif time.monotonic() > deadline:
                raise TimeoutError(
                    f"{split.topic}-{split.partition}: no record for {timeout_ms} ms at offset "
                    f"{next_offset} (reading up to {split.end}); last error: {last_error}"
                )
    finally:
        consumer.close()
    if len(columns):
        yield columns.flush()
