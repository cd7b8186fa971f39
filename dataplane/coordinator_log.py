"""An internal compacted topic used as a coordinator's write-ahead log.

The group coordinator (``__consumer_offsets``) and the transaction coordinator
(``__transaction_state``) keep their state the same way: the coordinator of a key is the
leader of partition ``abs(javaHash(key)) % N`` of the topic (Kafka's placement, so a key
lands on the same partition number as in Kafka); every change is a broker-built record
batch appended there and answered once the ISR has it (acks=all, with
``log.flush.policy=fsync`` also after the fsync); a broker that becomes leader of a
partition replays it from the log start to rebuild the state. The topic is compacted: the
newest record per key wins, and a null value (tombstone) deletes the key. It is created on
first use with the partition count and replication factor of the two config keys a
:class:`CoordinatorTopic` names.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dataplane import clock
from dataplane.cluster.topics import NewTopic
from dataplane.log.partition_log import PartitionLog
from wire.errors import (
    BrokerError,
    CoordinatorNotAvailable,
    CorruptRecord,
    KafkaStorageError,
    NotCoordinator,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    RequestTimedOut,
    UnknownTopicOrPartition,
)
from wire.record_batch import BatchHeader, decode_records, encode_batch, iter_headers

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage
    from dataplane.cluster.member import ClusterMember
    from dataplane.config import BrokerConfig
    from dataplane.log.manager import LogManager
    from dataplane.replication.manager import ReplicaManager

log = logging.getLogger(__name__)

READ_CHUNK = 4 * 1024 * 1024
COMMIT_TIMEOUT_S = 5.0
"""How long a coordinator write waits for the ISR (Kafka's offsets.commit.timeout.ms)."""
BATCH_OVERHEAD = 128
"""Room kept for the batch header and record framing when splitting large writes."""

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class CoordinatorTopic:
    """Which topic, and the broker config keys of its shape."""

    name: str
    partitions_key: str
    replication_key: str
    segment_bytes_key: str
    what: str
    """What its records are, for messages ("group", "transaction")."""


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


class CoordinatorLog:
    def __init__(
        self,
        topic: CoordinatorTopic,
        config: BrokerConfig,
        *,
        image: MetadataImage,
        cluster: ClusterMember,
        replicas: ReplicaManager,
        logs: LogManager,
    ) -> None:
        self.topic = topic
        self.config = config
        self.image = image
        self.cluster = cluster
        self.replicas = replicas
        self.logs = logs
        self.loaded: set[int] = set()
        """Partitions whose keys this broker coordinates (it leads them, replayed)."""
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._creating: asyncio.Task[None] | None = None

    @property
    def partitions(self) -> int:
        info = self.image.topics.get(self.topic.name)
        if info is not None:
            return info.partitions
        return self.config.get_int(self.topic.partitions_key)

    async def ensure_topic(self) -> None:
        """Create the topic if it does not exist (compacted, the configured partition count,
        the configured replication factor capped at the cluster's size)."""
        if self.topic.name in self.image.topics:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())
        await asyncio.shield(self._creating)

    async def _create(self) -> None:
        name = self.topic.name
        image = self.image
        wanted = self.config.get_int(self.topic.replication_key)
        size = max(len(image.brokers), len(self.cluster.voters), 1)
        factor = min(wanted, size)
        if len(image.live_brokers()) < factor:
            raise CoordinatorNotAvailable(
                f"{name} needs {factor} live brokers; {len(image.live_brokers())} are registered"
            )
        count = self.config.get_int(self.topic.partitions_key)
        log.info("creating %s with %d partitions, replication factor %d", name, count, factor)
        await self.cluster.create_topic(
            NewTopic(
                name,
                count,
                factor,
                # producer: as Kafka, so a broker-wide compression.type never recompresses
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(self.config.get_int(self.topic.segment_bytes_key)),
                    "compression.type": "producer",
                },
            )
        )

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    def led_partitions(self) -> set[int]:
        out = set()
        for (topic, partition), part in self.replicas.partitions.items():
            if topic == self.topic.name and part.is_leader:
                out.add(partition)
        return out

    def plog(self, partition: int) -> PartitionLog | None:
        part = self.replicas.partitions.get((self.topic.name, partition))
        return None if part is None or not part.is_leader else part.plog

    @property
    def loading(self) -> set[int]:
        """Partitions replayed whose log tail the ISR does not have yet (see mark_loaded)."""
        return set(self._loading)

    def mark_loaded(self, partition: int, ready: Callable[[], None]) -> None:
        """Serve ``partition`` (then run ``ready``) once its high watermark reaches the log end
        it was replayed to: at once when it has. A new leader's log may end with records the
        ISR does not have yet (written by the old leader, or not yet fetched by every
        follower); served at once, a commit shown from them could be lost by the next
        failover, and a group's offsets would go backwards. Kafka's coordinators likewise
        answer reads from the committed part of the log only."""
        self.unload(partition)
        part = self.replicas.partitions.get((self.topic.name, partition))
        if (
            part is None
            or not part.is_leader
            or part.plog.high_watermark >= part.plog.log_end_offset
        ):
            self._serve(partition, ready)
            return
        end = part.plog.log_end_offset
        log.info(
            "%s-%d: serving once the ISR has offsets up to %d (high watermark %d)",
            self.topic.name,
            partition,
            end,
            part.plog.high_watermark,
        )
        task = asyncio.get_running_loop().create_task(
            self._serve_when_committed(partition, end, ready)
        )
        self._loading[partition] = task

    async def _serve_when_committed(
        self, partition: int, end: int, ready: Callable[[], None]
    ) -> None:
        while True:
            part = self.replicas.partitions.get((self.topic.name, partition))
            if part is None or not part.is_leader:
                return  # left in _loading: the coordinator's unload (next metadata) clears it
            try:
                await part.wait_replicated(end, COMMIT_TIMEOUT_S, 1)
                break
            except RequestTimedOut:
                continue  # an ISR member is behind; asked again until it fetches or is dropped
            except BrokerError as exc:  # e.g. a new leader epoch failed the wait: still ours?
                log.info("%s-%d: waiting again for the ISR: %s", self.topic.name, partition, exc)
                await asyncio.sleep(0.1)
        self._loading.pop(partition, None)
        self._serve(partition, ready)

    def _serve(self, partition: int, ready: Callable[[], None]) -> None:
        self.loaded.add(partition)
        ready()

    def unload(self, partition: int) -> None:
        """Stop serving ``partition`` (and stop waiting to serve it)."""
        self.loaded.discard(partition)
        task = self._loading.pop(partition, None)
        if task is not None:
            task.cancel()

    def owns(self, key: str) -> bool:
        """True when this broker coordinates ``key`` (leads its loaded partition)."""
        return self.partition_for(key) in self.loaded

    def log_for(self, key: str) -> PartitionLog | None:
        partition = self.partition_for(key)
        if partition not in self.loaded:
            return None
        return self.plog(partition)

    def leader_of(self, key: str) -> tuple[int, str, int]:
        """(node id, host, port) of the leader of ``key``'s partition; CoordinatorNotAvailable
        while the topic does not exist or the partition has no live leader."""
        image = self.image
        if self.topic.name not in image.topics:
            raise CoordinatorNotAvailable()
        state = image.partition(self.topic.name, self.partition_for(key))
        leader = None if state is None else image.brokers.get(state.leader)
        if leader is None or leader.fenced:
            raise CoordinatorNotAvailable()
        return leader.broker_id, leader.host, leader.port

    # ------------------------------------------------------------------ writes

    def append(
        self, key: str, records: list[Record], *, batch: bytes | None = None
    ) -> asyncio.Future[None] | None:
        """Append ``records`` (or one ready-made ``batch``) to ``key``'s partition.

        Returns a future that resolves once the ISR has the write (and the fsync, with
        ``log.flush.policy=fsync``), or None when nothing is left to wait for. A failed
        write raises NotCoordinator for a storage error on the coordinator's log (a full
        disk included: Kafka's answer, which clients retry), or the BrokerError of the
        failure (``write_error`` maps it to what the client is told).
        """
        plog = self.log_for(key)
        name = self.topic.name
        if plog is None:
            raise NotCoordinator(f"{name} is not available on this broker")
        now = clock.now_ms()
        limit = plog.config.get_int("max.message.bytes") - BATCH_OVERHEAD
        try:
            if batch is not None:
                plog.append_internal(batch)
            for chunk in _chunks(records, limit):
                plog.append_internal(encode_batch(chunk, timestamp_ms=now))
        except (OSError, KafkaStorageError) as exc:
            # not wrapped in a plain BrokerError: that was UNKNOWN_SERVER_ERROR, which
            # librdkafka takes as a permanent EndTxn failure (found by the soak)
            log.error("writing to %s-%d failed: %s", name, plog.partition, exc)
            raise NotCoordinator(f"write to the {self.topic.what} log failed: {exc}") from exc
        waits: list[asyncio.Future[None]] = []
        if self.logs.fsync_on_append:
            waits.append(self.logs.sync(plog))
        part = self.replicas.partitions.get((name, plog.partition))
        if part is not None:
            part.maybe_advance_high_watermark()
            if plog.high_watermark < plog.log_end_offset:
                # as Kafka: coordinator writes are acks=all, answered once the ISR has them
                waits.append(part.wait_replicated(plog.log_end_offset, COMMIT_TIMEOUT_S, 1))
        if not waits:
            return None
        if len(waits) == 1:
            return waits[0]
        return asyncio.ensure_future(_all(waits))

    def append_detached(self, key: str, records: list[Record], what: str) -> None:
        """Append where nobody waits for the answer; failures are only logged."""
        try:
            durable = self.append(key, records)
        except BrokerError as exc:
            log.warning("writing %s of %s %s failed: %s", what, self.topic.what, key, exc)
            return
        if durable is not None:

            def done(future: asyncio.Future[None]) -> None:
                if not future.cancelled() and future.exception() is not None:
                    log.warning(
                        "fsync of %s of %s %s failed: %s",
                        what,
                        self.topic.what,
                        key,
                        future.exception(),
                    )

            durable.add_done_callback(done)

    # ------------------------------------------------------------------ replay

    def replay(self, plog: PartitionLog) -> Iterator[Record]:
        """Every (key, value) of one partition's data batches, in log order."""
        for header, records in self.replay_batches(plog):
            if not header.is_control:
                yield from records

    def replay_batches(self, plog: PartitionLog) -> Iterator[tuple[BatchHeader, list[Record]]]:
        """Every batch of one partition in log order, with its keyed records (a control
        batch's one record is its marker: ``wire.transactions.marker_of``)."""
        yield from _read_partition(plog, self.topic.name)


async def _all(waits: list[asyncio.Future[None]]) -> None:
    await asyncio.gather(*waits)


def write_error(exc: BaseException, *, timeout_means_unavailable: bool) -> BrokerError:
    """Kafka's answer to a coordinator whose state write failed, so that clients retry it
    rather than give the operation up: too few replicas gives COORDINATOR_NOT_AVAILABLE
    (with a timeout too, for the transaction log: TransactionStateManager), a lost
    leadership or a storage error NOT_COORDINATOR, anything else its own error
    (GroupMetadataManager.storeOffsets). The state is then not applied."""
    unavailable: tuple[type[BaseException], ...] = (
        NotEnoughReplicas,
        NotEnoughReplicasAfterAppend,
        UnknownTopicOrPartition,
    )
    if timeout_means_unavailable:
        unavailable += (RequestTimedOut, TimeoutError)
    if isinstance(exc, unavailable):
        return CoordinatorNotAvailable(str(exc) or type(exc).__name__)
    if isinstance(exc, NotLeaderOrFollower | KafkaStorageError | OSError):
        return NotCoordinator(str(exc) or type(exc).__name__)
    if isinstance(exc, BrokerError):
        return exc
    return RequestTimedOut(str(exc) or type(exc).__name__)


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


def _read_partition(plog: PartitionLog, name: str) -> Iterator[tuple[BatchHeader, list[Record]]]:
    offset = plog.log_start_offset
    end = plog.log_end_offset  # as Kafka: a new coordinator loads everything its log has
    while offset < end:
        data = plog.read(offset, READ_CHUNK, upper=end)
        if not data:
            break
        advanced = offset
        for header in iter_headers(data):
            advanced = max(advanced, header.next_offset)
            if header.last_offset < offset:
                continue
            raw = data[header.position : header.position + header.size]
            try:
                decoded = decode_records(raw)
            except CorruptRecord as exc:
                log.error(
                    "skipping unreadable batch at %s-%d offset %d: %s",
                    name,
                    plog.partition,
                    header.base_offset,
                    exc,
                )
                continue
            yield (
                header,
                [(r.key, r.value) for r in decoded if r.offset >= offset and r.key is not None],
            )
        if advanced == offset:
            break
        offset = advanced
