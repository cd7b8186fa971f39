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

from dataplane.cluster.topics import NewTopic
from dataplane.log.partition_log import PartitionLog
from wire.errors import BrokerError, CoordinatorNotAvailable, CorruptRecord, NotCoordinator
from wire.record_batch import decode_records, encode_batch, iter_headers

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage
    from dataplane.cluster.member import ClusterMember
    from dataplane.config import BrokerConfig
    from dataplane.log.manager import LogManager
    from dataplane.replication.manager import ReplicaManager

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
SEGMENT_BYTES = 104857600
"""Kafka's offsets.topic.segment.bytes default."""
READ_CHUNK = 4 * 1024 * 1024
COMMIT_TIMEOUT_S = 5.0
"""How long a group write waits for the ISR (Kafka's offsets.commit.timeout.ms)."""
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
    def __init__(
        self,
        config: BrokerConfig,
        image: MetadataImage,
        cluster: ClusterMember,
        replicas: ReplicaManager,
        logs: LogManager,
    ) -> None:
        self.config = config
        self.image = image
        self.cluster = cluster
        self.replicas = replicas
        self.logs = logs
        self.loaded: set[int] = set()
        """Partitions whose groups this broker coordinates (it leads them, replayed)."""
        self._creating: asyncio.Task[None] | None = None

    @property
    def partitions(self) -> int:
        info = self.image.topics.get(OFFSETS_TOPIC)
        if info is not None:
            return info.partitions
        return self.config.get_int("offsets.topic.num.partitions")

    async def ensure_topic(self) -> None:
        """Create the topic if it does not exist (compacted, offsets.topic.num.partitions,
        offsets.topic.replication.factor capped at the cluster's size)."""
        if OFFSETS_TOPIC in self.image.topics:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())
        await asyncio.shield(self._creating)

    async def _create(self) -> None:
        member = self.cluster
        image = self.image
        wanted = self.config.get_int("offsets.topic.replication.factor")
        size = max(len(image.brokers), len(member.voters), 1)
        factor = min(wanted, size)
        if len(image.live_brokers()) < factor:
            raise CoordinatorNotAvailable(
                f"{OFFSETS_TOPIC} needs {factor} live brokers; "
                f"{len(image.live_brokers())} are registered"
            )
        count = self.config.get_int("offsets.topic.num.partitions")
        log.info(
            "creating %s with %d partitions, replication factor %d", OFFSETS_TOPIC, count, factor
        )
        await self.cluster.create_topic(
            NewTopic(
                OFFSETS_TOPIC,
                count,
                factor,
                # producer: as Kafka, so a broker-wide compression.type never recompresses
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(SEGMENT_BYTES),
                    "compression.type": "producer",
                },
            )
        )

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def led_partitions(self) -> set[int]:
        out = set()
        for (topic, partition), part in self.replicas.partitions.items():
            if topic == OFFSETS_TOPIC and part.is_leader:
                out.add(partition)
        return out

    def plog(self, partition: int) -> PartitionLog | None:
        part = self.replicas.partitions.get((OFFSETS_TOPIC, partition))
        return None if part is None or not part.is_leader else part.plog

    def owns(self, group_id: str) -> bool:
        """True when this broker coordinates ``group_id`` (leads its loaded partition)."""
        return self.partition_for(group_id) in self.loaded

    def log_for(self, group_id: str) -> PartitionLog | None:
        partition = self.partition_for(group_id)
        if partition not in self.loaded:
            return None
        return self.plog(partition)

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
        limit = plog.config.get_int("max.message.bytes") - BATCH_OVERHEAD
        try:
            for chunk in _chunks(records, limit):
                plog.append_internal(encode_batch(chunk, timestamp_ms=now))
        except OSError as exc:
            log.error("writing to %s-%d failed: %s", OFFSETS_TOPIC, plog.partition, exc)
            raise NotCoordinator(f"write to the group log failed: {exc}") from exc
        except BrokerError as exc:
            raise BrokerError(f"write to the group log failed: {exc}") from exc
        waits: list[asyncio.Future[None]] = []
        if self.logs.fsync_on_append:
            waits.append(self.logs.sync(plog))
        part = self.replicas.partitions.get((OFFSETS_TOPIC, plog.partition))
        if part is not None:
            part.maybe_advance_high_watermark()
            if plog.high_watermark < plog.log_end_offset:
                # as Kafka: group writes are acks=all, answered once the ISR has them
                waits.append(part.wait_replicated(plog.log_end_offset, COMMIT_TIMEOUT_S, 1))
        if not waits:
            return None
        if len(waits) == 1:
            return waits[0]
        return asyncio.ensure_future(_all(waits))

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

    def replay(self, plog: PartitionLog) -> Iterator[Record]:
        """Every (key, value) of one partition, in log order."""
        yield from _read_partition(plog)


async def _all(waits: list[asyncio.Future[None]]) -> None:
    await asyncio.gather(*waits)


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
    end = plog.log_end_offset  # as Kafka: a new coordinator loads everything its log has
    while offset < end:
        data = plog.read(offset, READ_CHUNK, upper=end)
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
