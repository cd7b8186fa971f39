"""The ``__consumer_offsets`` topic as the coordinator's write-ahead log.

The coordinator of group G is the leader of partition ``abs(javaHash(G)) % N`` of
``__consumer_offsets`` (N = its partition count, ``offsets.topic.num.partitions`` when it
is created), the placement Apache Kafka uses, so a group lands on the same partition
number as it would in Kafka. On a single broker this broker leads every partition.

Records are written as broker-built record batches (``encode_batch``) appended to the
partition; with ``log.flush.policy=fsync`` callers get a future that resolves once the
write is on disk. On start-up every partition is read from its log start and its records
are handed back in log order for replay. The topic is compacted: the newest record per
key wins, and a null value (tombstone) deletes the key.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dataplane.errors import BrokerError, CorruptRecord, NotCoordinator
from dataplane.log.partition_log import PartitionLog
from dataplane.protocol.record_batch import decode_records, encode_batch, iter_headers

if TYPE_CHECKING:
    from dataplane.broker import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
SEGMENT_BYTES = 104857600
"""Kafka's offsets.topic.segment.bytes default."""
READ_CHUNK = 4 * 1024 * 1024
BATCH_OVERHEAD = 128
"""Room kept for the batch header and record framing when splitting large writes."""

Record = tuple[bytes, bytes | None]


def java_string_hash(text: str) -> int:
    """``String.hashCode()`` of Java: 31-polynomial over UTF-16 code units, as int32."""
    data = text.encode("utf-16-le", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack("<H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions``."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class OffsetsTopic:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.partitions = 0

    def ensure(self) -> None:
        """Create the topic on first start (compacted, offsets.topic.num.partitions)."""
        info = self.broker.metadata.topics.get(OFFSETS_TOPIC)
        if info is None:
            count = int(self.broker.config["offsets.topic.num.partitions"])
            log.info("creating %s with %d partitions", OFFSETS_TOPIC, count)
            info = self.broker.create_topic(
                OFFSETS_TOPIC,
                count,
                1,
                {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES)},
            )
        else:
            self.broker.logs.ensure_partitions(info)
        self.partitions = info.partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def log_for(self, group_id: str) -> PartitionLog | None:
        if not self.partitions:
            return None
        return self.broker.logs.logs.get((OFFSETS_TOPIC, self.partition_for(group_id)))

    # ------------------------------------------------------------------ writes

    def append(self, group_id: str, records: list[Record]) -> asyncio.Future[None] | None:
        """Append ``records`` to the group's partition.

        Returns a future for the fsync when ``log.flush.policy=fsync``, else None. A
        failed write raises NotCoordinator (Kafka's answer to a storage error on the
        coordinator's log), or BrokerError (UNKNOWN_SERVER_ERROR) for other failures.
        """
        plog = self.log_for(group_id)
        if plog is None:
            raise NotCoordinator(f"{OFFSETS_TOPIC} is not available on this broker")
        now = int(time.time() * 1000)
        limit = int(plog.config("max.message.bytes")) - BATCH_OVERHEAD
        try:
            for chunk in _chunks(records, limit):
                plog.append_internal(encode_batch(chunk, timestamp_ms=now))
        except OSError as exc:
            log.error("writing to %s-%d failed: %s", OFFSETS_TOPIC, plog.partition, exc)
            raise NotCoordinator(f"write to the group log failed: {exc}") from exc
        except BrokerError as exc:
            raise BrokerError(f"write to the group log failed: {exc}") from exc
        if self.broker.logs.fsync_on_append:
            return self.broker.logs.sync(plog)
        return None

    def append_detached(self, group_id: str, records: list[Record], what: str) -> None:
        """Append where nobody waits for the answer; failures are only logged."""
        try:
            durable = self.append(group_id, records)
        except BrokerError as exc:
            log.warning("writing %s of group %s failed: %s", what, group_id, exc)
            return
        if durable is not None:

            def done(future: asyncio.Future[None]) -> None:
                if not future.cancelled() and future.exception() is not None:
                    log.warning(
                        "fsync of %s of group %s failed: %s", what, group_id, future.exception()
                    )

            durable.add_done_callback(done)

    # ------------------------------------------------------------------ replay

    def replay(self) -> Iterator[Record]:
        """Every (key, value) of the topic, partition by partition, in log order."""
        for plog in list(self.broker.logs.partitions_of(OFFSETS_TOPIC)):
            yield from _read_partition(plog)


def _chunks(records: list[Record], limit: int) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    size = 0
    for key, value in records:
        item = len(key) + (len(value) if value is not None else 0) + 24
        if chunk and size + item > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append((key, value))
        size += item
    if chunk:
        yield chunk


def _read_partition(plog: PartitionLog) -> Iterator[Record]:
    offset = plog.log_start_offset
    end = plog.high_watermark
    while offset < end:
        data = plog.read(offset, READ_CHUNK)
        if not data:
            break
        advanced = offset
        for header in iter_headers(data):
            advanced = max(advanced, header.next_offset)
            if header.is_control or header.last_offset < offset:
                continue
            raw = data[header.position : header.position + header.size]
            try:
                decoded = decode_records(raw)
            except CorruptRecord as exc:
                log.error(
                    "skipping unreadable batch at %s-%d offset %d: %s",
                    OFFSETS_TOPIC,
                    plog.partition,
                    header.base_offset,
                    exc,
                )
                continue
            for record in decoded:
                if record.offset >= offset and record.key is not None:
                    yield record.key, record.value
        if advanced == offset:
            break
        offset = advanced


def _java_int(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _hash_map_capacity(entries: int) -> int:
    capacity = 16
    while entries > capacity * 3 // 4:
        capacity *= 2
    return capacity


def _bucket(hash_code: int, capacity: int) -> int:
    h = hash_code & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def kafka_answer_order(
    keys: list[str], partitions: int, *, hashed_within: bool = False
) -> list[int]:
    """Positions of ``keys`` in the order Kafka answers a batched group request.

    Kafka's coordinator service splits DescribeGroups and DeleteGroups by
    ``__consumer_offsets`` partition in a ``HashMap<TopicPartition, ...>`` and
    concatenates the answers in that map's iteration order: by bucket (the spread hash of
    the TopicPartition masked to the table size), ties by first use. Within a partition
    the keys keep request order, or (``hashed_within``, DeleteGroups) the iteration order
    of a ``HashSet`` of them. Both were measured against Kafka 4.3.
    """
    topic_hash = java_string_hash(OFFSETS_TOPIC)
    grouped: dict[int, list[int]] = {}
    for position, key in enumerate(keys):
        grouped.setdefault(partition_for(key, partitions), []).append(position)
    capacity = _hash_map_capacity(len(grouped))
    first_use = {p: i for i, p in enumerate(grouped)}
    ordered = sorted(
        grouped,
        key=lambda p: (_bucket(_java_int(31 * (31 + p) + topic_hash), capacity), first_use[p]),
    )
    result: list[int] = []
    for p in ordered:
        positions = grouped[p]
        if hashed_within:
            inner = _hash_map_capacity(len(positions))
            positions = sorted(positions, key=lambda i: _bucket(java_string_hash(keys[i]), inner))
        result.extend(positions)
    return result
