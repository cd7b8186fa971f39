"""Workloads and checks on replicated clusters (KafkaCluster or SluiceCluster), shared by
tests/cluster and bench/bench_replication.py.

``SteadyProducer``   an idempotent acks=all confluent-kafka producer in a thread, writing unique
                     sequential values at a fixed rate and recording every acknowledgement
``create_topic``     CreateTopics, then wait until every partition has a leader and a full ISR
``partition_states`` leader / replicas / ISR of each partition, from Metadata
``read_partitions``  every record of a topic up to the end offsets, per partition
``replica_log``      the record batches of a partition directory up to an offset, as bytes
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic


class Cluster(Protocol):
    """What KafkaCluster and SluiceCluster have in common."""

    size: int

    @property
    def bootstrap(self) -> str: ...

    def start(self, i: int | None = None, *, wait: bool = True) -> None: ...

    def kill(self, i: int) -> None: ...

    def stop(self, i: int | None = None) -> None: ...

    def alive(self, i: int) -> bool: ...

    def log_dir(self, i: int) -> Path: ...

    def logs(self, i: int, lines: int = 60) -> str: ...


def wait_for(
    condition: Callable[[], Any], timeout: float, what: str, *, interval: float = 0.05
) -> Any:
    """Poll ``condition`` until it returns a true value (returned); TimeoutError naming ``what``.
    Exceptions count as false (brokers going away); the last one is reported."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:
            last = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last})" if last is not None else ""
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(interval)


def admin_client(bootstrap: str) -> Any:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


@dataclass(frozen=True)
class PartitionState:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partition_states(admin: Any, topic: str) -> dict[int, PartitionState]:
    """Leader, replicas and ISR of each partition (a Metadata request); raises on an error."""
    md = admin.list_topics(topic=topic, timeout=5)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        raise RuntimeError(f"metadata of {topic}: {None if meta is None else meta.error}")
    return {
        p: PartitionState(int(pm.leader), tuple(pm.replicas), tuple(pm.isrs))
        for p, pm in meta.partitions.items()
    }


def create_topic(
    bootstrap: str,
    topic: str,
    *,
    partitions: int,
    replication: int,
    config: dict[str, str] | None = None,
    timeout: float = 60,
) -> dict[int, PartitionState]:
    """CreateTopics; waits until every partition has a leader and ``replication`` replicas in
    its ISR. Returns the partitions' states."""
    admin = admin_client(bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, partitions, replication, config=dict(config or {}))],
        request_timeout=timeout,
    )
    futures[topic].result(timeout=timeout)

    def ready() -> dict[int, PartitionState] | None:
        states = partition_states(admin, topic)
        if len(states) == partitions and all(
            s.leader >= 0 and len(s.isr) == replication for s in states.values()
        ):
            return states
        return None

    states: dict[int, PartitionState] = wait_for(ready, timeout, f"{topic} to have full ISRs")
    return states


def wait_in_isr(admin: Any, topic: str, node: int, timeout: float) -> float:
    """Until ``node`` is in the ISR of every partition it replicates; the seconds it took."""
    started = time.monotonic()

    def back() -> bool:
        states = partition_states(admin, topic)
        return all(node in s.isr for s in states.values() if node in s.replicas)

    wait_for(back, timeout, f"node {node} back in the ISR of {topic}", interval=0.1)
    return time.monotonic() - started


def leader_of(admin: Any, topic: str, partition: int, timeout: float = 30) -> int:
    """The partition's leader, waiting while it has none."""

    def leader() -> int:
        return partition_states(admin, topic)[partition].leader + 1

    return int(wait_for(leader, timeout, f"a leader of {topic}-{partition}")) - 1


def wait_out_of_isr(admin: Any, topic: str, partition: int, node: int, timeout: float) -> None:
    """Until ``node`` has left the partition's ISR (the controller noticed it died)."""

    def gone() -> bool:
        return node not in partition_states(admin, topic)[partition].isr

    wait_for(gone, timeout, f"node {node} to leave the ISR of {topic}-{partition}", interval=0.1)


@dataclass(frozen=True)
class Ack:
    seq: int
    partition: int
    offset: int
    produced: float
    acked: float


class SteadyProducer:
    """An idempotent acks=all producer in a thread: value ``seq`` (10 ASCII digits) goes to
    partition ``seq % partitions`` at ``rate`` records/s. Delivery callbacks record which
    values were acknowledged, where and when (monotonic clock)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        rate: float = 300.0,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "delivery.timeout.ms": 300_000,
                "log_level": 0,
                "error_cb": self._on_error,
                **(config or {}),
            }
        )
        self.lock = threading.Lock()
        self.produced_at: list[float] = []
        self.acks: list[Ack] = []
        self.failed: list[tuple[int, str]] = []
        self.fatal: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)
        self.run_error: BaseException | None = None

    def _on_error(self, err: Any) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _on_delivery(self, err: Any, msg: Any) -> None:
        now = time.monotonic()
        seq = int(msg.value())
        with self.lock:
            if err is not None:
                self.failed.append((seq, str(err)))
            else:
                self.acks.append(
                    Ack(seq, msg.partition(), msg.offset(), self.produced_at[seq], now)
                )

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            interval = 1.0 / self.rate
            next_at = time.monotonic()
            seq = 0
            while not self._stop.is_set():
                now = time.monotonic()
                if now < next_at:
                    self.producer.poll(next_at - now)
                    continue
                with self.lock:
                    self.produced_at.append(time.monotonic())
                while True:
                    try:
                        self.producer.produce(
                            self.topic,
                            b"%010d" % seq,
                            partition=seq % self.partitions,
                            on_delivery=self._on_delivery,
                        )
                        break
                    except BufferError:
                        self.producer.poll(0.01)
                seq += 1
                next_at += interval
                if time.monotonic() - next_at > 1.0:  # fell behind (stall): do not burst
                    next_at = time.monotonic()
                self.producer.poll(0)
        except BaseException as exc:
            self.run_error = exc

    @property
    def sent(self) -> int:
        with self.lock:
            return len(self.produced_at)

    def first_ack_after(self, partition: int, moment: float) -> Ack | None:
        """The earliest acknowledgement on ``partition`` of a record produced at or after
        ``moment``."""
        with self.lock:
            found = [a for a in self.acks if a.partition == partition and a.produced >= moment]
        return min(found, key=lambda a: a.acked) if found else None

    def wait_ack_after(self, partition: int, moment: float, timeout: float) -> Ack:
        """Until a record produced at or after ``moment`` is acknowledged on ``partition``."""

        def acked() -> Ack | None:
            return self.first_ack_after(partition, moment)

        ack: Ack = wait_for(
            acked, timeout, f"an acknowledged write to partition {partition}", interval=0.01
        )
        return ack

    def stop(self, flush_timeout: float = 120) -> int:
        """Stop producing and flush; the number of records still undelivered."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        return int(self.producer.flush(flush_timeout))


def read_partitions(
    bootstrap: str, topic: str, partitions: int, *, timeout: float = 120
) -> tuple[dict[int, list[tuple[int, bytes]]], dict[int, int]]:
    """Every record of ``topic`` from the beginning up to the end offsets (read first):
    ({partition: [(offset, value), ...]}, {partition: end offset})."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "log_level": 0,
        }
    )
    try:
        ends = {p: high_watermark(consumer, topic, p) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        nxt = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout
        while any(nxt[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {nxt} of end offsets {ends} in {timeout:.0f} s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None:
                    raise RuntimeError(f"consume: {msg.error()}")
                p, offset = msg.partition(), msg.offset()
                assert p is not None
                assert offset is not None
                if offset < ends[p]:
                    out[p].append((offset, msg.value() or b""))
                nxt[p] = max(nxt[p], offset + 1)
        return out, ends
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The high watermark of each partition (ListOffsets latest, answered by the leader)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets", "log_level": 0})
    try:
        return {p: high_watermark(consumer, topic, p) for p in range(partitions)}
    finally:
        consumer.close()


def high_watermark(consumer: Any, topic: str, partition: int, timeout: float = 30) -> int:
    """ListOffsets latest through ``consumer``, retried while the client's metadata is stale
    (NOT_LEADER_OR_FOLLOWER right after a leader moved, from Kafka's brokers as from ours) and
    while a new leader's high watermark is not known yet (OFFSET_NOT_AVAILABLE, KIP-207)."""
    stale = {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    }
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)[1])
        except KafkaException as exc:
            if exc.args[0].code() not in stale or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@dataclass
class ReplicaLog:
    """The record batches of one replica of a partition, below an offset."""

    batches: list[tuple[int, int]]  # (base offset, last offset)
    chunks: list[bytes]  # each batch's bytes
    problems: list[str]

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    def first_difference(self, other: ReplicaLog) -> str | None:
        """None if both hold the same bytes, else the first batch that differs."""
        for i in range(max(len(self.chunks), len(other.chunks))):
            mine = self.chunks[i] if i < len(self.chunks) else None
            theirs = other.chunks[i] if i < len(other.chunks) else None
            if mine != theirs:
                where = self.batches[i] if mine is not None else other.batches[i]
                return (
                    f"batch {i} (offsets {where[0]}-{where[1]}): "
                    f"{'absent' if mine is None else f'{len(mine)} bytes'} vs "
                    f"{'absent' if theirs is None else f'{len(theirs)} bytes'}"
                )
        return None


def replica_log(partition_dir: Path, upto: int) -> ReplicaLog:
    """Concatenate the batches with offsets below ``upto`` of every ``NNNN….log`` segment of
    ``partition_dir`` (Kafka's layout, used by Sluice too), in offset order. Reports batches
    that straddle ``upto``, gaps and overlaps between batches, and a log that ends short."""
    segments = sorted(
        (f for f in partition_dir.glob("*.log") if f.stem.isdigit() and len(f.stem) == 20),
        key=lambda f: int(f.stem),
    )
    chunks: list[bytes] = []
    batches: list[tuple[int, int]] = []
    problems: list[str] = []
    expected = 0
    for segment in segments:
        data = segment.read_bytes()
        pos = 0
        while pos + 27 <= len(data):
            base = int.from_bytes(data[pos : pos + 8], "big")
            length = int.from_bytes(data[pos + 8 : pos + 12], "big")
            end = pos + 12 + length
            if base >= upto or end > len(data) or length < 49:
                break
            last = base + int.from_bytes(data[pos + 23 : pos + 27], "big")
            if last >= upto:
                problems.append(f"batch {base}-{last} straddles {upto}")
                break
            if base != expected:
                problems.append(f"batch at {base}, expected {expected} ({segment.name})")
            chunks.append(data[pos:end])
            batches.append((base, last))
            expected = last + 1
            pos = end
    if expected != upto:
        problems.append(f"batches end at {expected}, expected {upto}")
    return ReplicaLog(batches, chunks, problems)


def partition_dir(log_dir: Path, topic: str, partition: int) -> Path:
    return log_dir / f"{topic}-{partition}"
