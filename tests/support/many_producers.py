"""Many idempotent producers from several client libraries at once, and what they leave in the
log (tests/cluster/test_many_producers.py).

``ProducerPool``      N idempotent acks=all producers: confluent-kafka, kafka-python, aiokafka
                      and Apache Kafka's Java client (tools/java/ClientHarness.java, one JVM
                      each), released together by a barrier so that their InitProducerId
                      requests and first batches race. Producer ``NAME`` writes records whose
                      key and value are ``NAME:SEQ`` (the Java harness: key ``NAME:SEQ``,
                      value ``vSEQ``); every acknowledgement (partition, offset) and failure
                      is recorded.
``read_log``          every record of a topic from offset 0 to the end offsets, with a consumer
``read_batches``      producer id, epoch and offsets of every batch, by raw Fetch from each
                      partition's leader (the consumer APIs do not show producer ids)
``check_log``         acknowledged records are in the log exactly once, where they were
                      acknowledged; no record twice; each producer's records in order within
                      a partition; no producer id shared by two producers. Counts per client.
``init_producer_ids_at_once``  N InitProducerId requests on N raw connections at the same
                      instant, spread over several brokers
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import ctypes
import datetime
import functools
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer
from kafka.net.inet import KafkaNetSocket
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

from .cluster_workload import high_watermark, wait_for
from .java_client import REPO_ROOT, harness_command, parse_json_lines
from .processes import kill_group
from .raw_client import RawClient
from .records import fetch_request

CLIENTS = ("confluent", "kafka-python", "aiokafka", "java")


# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Ack:
    seq: int
    partition: int
    offset: int  # -1 when the client did not learn it
    at: float  # monotonic clock


@dataclass
class Outcome:
    """What one producer was told: acknowledgements, failures, other errors."""

    name: str
    client: str
    produced_at: dict[int, float] = field(default_factory=dict)
    acks: dict[int, Ack] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    """Errors not tied to one record: fatal producer errors, exceptions, a JVM's exit."""

    @property
    def sent(self) -> int:
        return len(self.produced_at)

    def key(self, seq: int) -> bytes:
        return f"{self.name}:{seq}".encode()


def parse_key(key: bytes | None) -> tuple[str, int] | None:
    """(producer name, seq) from a record key ``NAME:SEQ``; None for anything else."""
    if key is None:
        return None
    name, sep, seq = key.decode(errors="replace").rpartition(":")
    if not sep or not seq.isdigit():
        return None
    return name, int(seq)


# --------------------------------------------------------------------------- the pool


class ProducerPool:
    """Idempotent acks=all producers of several libraries writing ``topic`` at once.

    ``add(client, n)`` before ``start()``; ``start()`` releases every producer through one
    barrier (each creates its client after it, so InitProducerId requests race too).
    Python producers write ``records`` records each (None: until ``stop()``), at ``rate``
    records/s each (None: as fast as the client takes them), record SEQ to partition
    SEQ % partitions. Java producers write ``java_records`` records as fast as they can
    (the harness has no rate), partitioned by the hash of their key. ``launch_java``
    adds a Java producer while the others run. ``close()`` always stops everything,
    killing JVMs still running."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        records: int | None,
        rate: float | None = None,
        java_records: int = 300,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.records = records
        self.rate = rate
        self.java_records = java_records
        self.delivery_timeout_ms = delivery_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.outcomes: list[Outcome] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._planned: dict[str, list[Outcome]] = defaultdict(list)
        self._threads: list[threading.Thread] = []
        self._procs: list[subprocess.Popen[str]] = []
        self._closed = False
        self._unpatch: Callable[[], None] | None = None

    # ------------------------------------------------------------------ set-up

    def add(self, client: str, count: int) -> ProducerPool:
        if client not in CLIENTS:
            raise ValueError(f"unknown client {client!r}; one of {CLIENTS}")
        for _ in range(count):
            self._planned[client].append(self._new_outcome(client))
        return self

    def _new_outcome(self, client: str) -> Outcome:
        out = Outcome(f"{client}-{len(self.outcomes):02d}", client)
        self.outcomes.append(out)
        return out

    def start(self) -> ProducerPool:
        """Release every producer added so far at the same instant."""
        if self._planned["kafka-python"] and self._unpatch is None:
            self._unpatch = _close_refused_kafka_python_sockets()
        if self._planned["java"]:
            harness_command([])  # compiles the harness once, before the barrier
        groups: list[tuple[Callable[[Outcome], None], Outcome]] = []
        for out in self._planned["confluent"]:
            groups.append((self._run_confluent, out))
        for out in self._planned["kafka-python"]:
            groups.append((self._run_kafka_python, out))
        for out in self._planned["java"]:
            groups.append((self._run_java, out))
        aio = list(self._planned["aiokafka"])
        parties = len(groups) + (1 if aio else 0)
        barrier = threading.Barrier(parties)

        def released(body: Callable[[], None], outs: list[Outcome]) -> Callable[[], None]:
            def run() -> None:
                try:
                    barrier.wait(timeout=120)
                    body()
                except BaseException as exc:
                    for out in outs:
                        out.errors.append(f"{type(exc).__name__}: {exc}")

            return run

        for body, out in groups:
            self._thread(released(functools.partial(body, out), [out]), out.name)
        if aio:
            self._thread(released(lambda: asyncio.run(self._run_aiokafka_all(aio)), aio), "aio")
        self._planned.clear()
        return self

    def launch_java(self, records: int | None = None) -> Outcome:
        """One more Java producer, started now (no barrier)."""
        out = self._new_outcome("java")

        def run() -> None:
            try:
                self._run_java(out, records)
            except BaseException as exc:
                out.errors.append(f"{type(exc).__name__}: {exc}")

        self._thread(run, out.name)
        return out

    def _thread(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=f"producer-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    # ------------------------------------------------------------------ progress

    def stop(self) -> None:
        """Ask the Python producers to stop producing (they then flush)."""
        self._stop.set()

    def join(self, timeout: float) -> bool:
        """Until every producer has finished (flushed and closed); False on timeout."""
        deadline = time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def close(self, timeout: float = 60) -> None:
        """Stop producing, wait for the producers, kill JVMs still running."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        self.join(timeout)
        with self.lock:
            procs = list(self._procs)
        for proc in procs:
            kill_group(proc)
        self.join(10)
        if self._unpatch is not None:
            self._unpatch()
            self._unpatch = None

    def __enter__(self) -> ProducerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def overlap(self) -> float:
        """Seconds during which every producer was active (from its first record produced to
        its last acknowledgement); negative when some finished before others began."""
        with self.lock:
            spans = [
                (min(o.produced_at.values()), max(a.at for a in o.acks.values()))
                for o in self.outcomes
                if o.produced_at and o.acks
            ]
        if not spans:
            return 0.0
        return min(end for _, end in spans) - max(begin for begin, _ in spans)

    @property
    def acked(self) -> int:
        with self.lock:
            return sum(len(o.acks) for o in self.outcomes)

    def wait_acked(self, count: int, timeout: float) -> None:
        wait_for(lambda: self.acked >= count, timeout, f"{count} acknowledged records")

    def wait_ack_after(self, partition: int, moment: float, timeout: float) -> Ack:
        """Until a record produced at or after ``moment`` is acknowledged on ``partition``
        (by a Python producer: their records carry the time they were produced)."""

        def acked() -> Ack | None:
            with self.lock:
                found = [
                    a
                    for o in self.outcomes
                    if o.client != "java"
                    for a in o.acks.values()
                    if a.partition == partition and o.produced_at[a.seq] >= moment
                ]
            return min(found, key=lambda a: a.at) if found else None

        ack: Ack = wait_for(
            acked, timeout, f"an acknowledged write to partition {partition}", interval=0.02
        )
        return ack

    # ------------------------------------------------------------------ bookkeeping

    def _produced(self, out: Outcome, seq: int) -> None:
        with self.lock:
            out.produced_at[seq] = time.monotonic()

    def _ack(self, out: Outcome, seq: int, partition: int, offset: int) -> None:
        with self.lock:
            out.acks[seq] = Ack(seq, partition, offset, time.monotonic())

    def _fail(self, out: Outcome, seq: int, error: str) -> None:
        with self.lock:
            out.failed[seq] = error

    def _paced(self, wait: Callable[[float], Any]) -> Iterator[int]:
        """Sequence numbers to produce, at ``rate``, until ``records`` or ``stop()``."""
        seq = 0
        next_at = time.monotonic()
        while not self._stop.is_set() and (self.records is None or seq < self.records):
            if self.rate is not None:
                now = time.monotonic()
                if now < next_at:
                    wait(next_at - now)
                    continue
                next_at += 1.0 / self.rate
                if now - next_at > 1.0:  # fell behind (a stall): do not burst
                    next_at = now
            yield seq
            seq += 1

    # ------------------------------------------------------------------ confluent-kafka

    def _run_confluent(self, out: Outcome) -> None:
        # Callbacks must not raise: confluent-kafka would re-raise from poll() or flush().
        def on_error(err: Any) -> None:
            if err.fatal():
                out.errors.append(f"fatal: {err}")

        def on_delivery(err: Any, msg: Any) -> None:
            try:
                parsed = parse_key(msg.key())
                if parsed is None:
                    out.errors.append(f"delivery report for key {msg.key()!r}")
                elif err is None:
                    # None: librdkafka did not learn the offset (a retry answered as a
                    # duplicate of a batch the broker already holds).
                    offset = msg.offset()
                    self._ack(out, parsed[1], msg.partition(), -1 if offset is None else offset)
                else:
                    self._fail(out, parsed[1], str(err))
            except Exception as exc:
                out.errors.append(f"delivery callback: {type(exc).__name__}: {exc}")

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": out.name,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "compression.type": "none",
                "delivery.timeout.ms": self.delivery_timeout_ms,
                "request.timeout.ms": self.request_timeout_ms,
                "log_level": 0,
                "error_cb": on_error,
            }
        )
        # After a fatal error (an idempotence violation, as OUT_OF_ORDER_SEQUENCE_NUMBER)
        # produce() and poll() raise KafkaException: the producer is unusable, stop.
        try:
            for seq in self._paced(producer.poll):
                key = out.key(seq)
                self._produced(out, seq)
                try:
                    while True:
                        try:
                            producer.produce(
                                self.topic,
                                key=key,
                                value=key,
                                partition=seq % self.partitions,
                                on_delivery=on_delivery,
                            )
                            break
                        except BufferError:
                            producer.poll(0.05)
                except KafkaException as exc:
                    self._fail(out, seq, f"not sent: {exc}")
                    raise
                producer.poll(0)
        except KafkaException as exc:
            out.errors.append(f"stopped: {exc}")
        try:
            left = producer.flush(self.delivery_timeout_ms / 1000 + 30)
        except Exception as exc:
            out.errors.append(f"flush: {type(exc).__name__}: {exc}")
        else:
            if left:
                out.errors.append(f"{left} records still undelivered after flush")

    # ------------------------------------------------------------------ kafka-python

    def _run_kafka_python(self, out: Outcome) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            client_id=out.name,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            delivery_timeout_ms=self.delivery_timeout_ms,
            request_timeout_ms=self.request_timeout_ms,
        )

        def ok(seq: int, metadata: Any) -> None:
            self._ack(out, seq, metadata.partition, metadata.offset)

        def failed(seq: int, exc: BaseException) -> None:
            self._fail(out, seq, f"{type(exc).__name__}: {exc}")

        try:
            for seq in self._paced(time.sleep):
                key = out.key(seq)
                self._produced(out, seq)
                try:
                    future = producer.send(
                        self.topic, key=key, value=key, partition=seq % self.partitions
                    )
                except Exception as exc:
                    failed(seq, exc)
                    continue
                future.add_callback(ok, seq)
                future.add_errback(failed, seq)
            producer.flush(self.delivery_timeout_ms / 1000 + 30)
        finally:
            producer.close(timeout=10)

    # ------------------------------------------------------------------ aiokafka

    async def _run_aiokafka_all(self, outs: list[Outcome]) -> None:
        await asyncio.gather(*(self._run_aiokafka(out) for out in outs))

    async def _run_aiokafka(self, out: Outcome) -> None:
        try:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap.split(","),
                client_id=out.name,
                enable_idempotence=True,
                acks="all",
                linger_ms=5,
                request_timeout_ms=self.request_timeout_ms,
            )
            await producer.start()
        except Exception as exc:
            out.errors.append(f"start: {type(exc).__name__}: {exc}")
            return

        def done(seq: int, future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                self._fail(out, seq, "cancelled")
            elif future.exception() is not None:
                exc = future.exception()
                self._fail(out, seq, f"{type(exc).__name__}: {exc}")
            else:
                metadata = future.result()
                self._ack(out, seq, metadata.partition, metadata.offset)

        try:
            seq = 0
            next_at = time.monotonic()
            while not self._stop.is_set() and (self.records is None or seq < self.records):
                if self.rate is not None:
                    now = time.monotonic()
                    if now < next_at:
                        await asyncio.sleep(next_at - now)
                        continue
                    next_at += 1.0 / self.rate
                    if now - next_at > 1.0:
                        next_at = now
                key = out.key(seq)
                self._produced(out, seq)
                try:
                    future = await producer.send(
                        self.topic, key=key, value=key, partition=seq % self.partitions
                    )
                except Exception as exc:
                    self._fail(out, seq, f"{type(exc).__name__}: {exc}")
                else:
                    future.add_done_callback(lambda f, s=seq: done(s, f))
                seq += 1
                if self.rate is None and seq % 50 == 0:
                    await asyncio.sleep(0)  # let the other producers of this loop in
            await producer.flush()
        finally:
            await producer.stop()

    # ------------------------------------------------------------------ Java

    def _run_java(self, out: Outcome, records: int | None = None) -> None:
        """One JVM: ClientHarness ``produce``. It prints one line per record, in send order,
        once every record is acknowledged; on the first failed record it prints an error
        line and exits 1: the records before it were acknowledged, that one failed, the
        ones after it are unknown."""
        count = self.java_records if records is None else records
        args = [
            "produce",
            "--bootstrap",
            self.bootstrap,
            "--topic",
            self.topic,
            "--count",
            str(count),
            "--key-prefix",
            f"{out.name}:",
            "--acks",
            "all",
            "--compression",
            "none",
        ]
        for key, value in {
            "client.id": out.name,
            "enable.idempotence": "true",
            "linger.ms": "5",
            "delivery.timeout.ms": str(self.delivery_timeout_ms),
            "request.timeout.ms": str(self.request_timeout_ms),
            "max.block.ms": "60000",
        }.items():
            args += ["--config", f"{key}={value}"]
        with self.lock:
            if self._closed:
                return
            for seq in range(count):
                out.produced_at[seq] = time.monotonic()
            proc = subprocess.Popen(
                harness_command(args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO_ROOT,
                start_new_session=True,
                preexec_fn=_die_with_this_thread,
            )
            self._procs.append(proc)
        timeout = self.delivery_timeout_ms / 1000 + 120
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            stdout, stderr = proc.communicate()
            out.errors.append(f"JVM still running after {timeout:.0f} s: killed")
        lines = parse_json_lines(stdout)
        for line in lines:
            if "index" in line:
                self._ack(out, int(line["index"]), int(line["partition"]), int(line["offset"]))
        if proc.returncode != 0:
            error = next((x for x in reversed(lines) if "error" in x), None)
            what = (
                f"{error['error']}: {error['message']}"
                if error
                else (stderr.strip()[-300:] or f"exit {proc.returncode}")
            )
            first_unacked = len(out.acks)
            if first_unacked < count:
                self._fail(out, first_unacked, what)
            out.errors.append(f"JVM exited {proc.returncode}: {what}")


# Looked up once here: the child of a fork in a threaded process should not dlopen.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
_PR_SET_PDEATHSIG = 1


def _die_with_this_thread() -> None:
    """``preexec_fn`` of the JVMs: SIGKILL when the thread that started it ends (Linux's
    PR_SET_PDEATHSIG follows the creating thread). That thread waits for the JVM, so this
    only fires if the test process dies first."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _close_refused_kafka_python_sockets() -> Callable[[], None]:
    """Work around a socket leak of kafka-python 3.0.12: ``KafkaNetSocket.sock_connect``
    raises on a refused connection (a killed broker) without closing its socket, which the
    garbage collector later reports as a ResourceWarning (an error in this suite). Closes
    the socket when the connection fails; returns the function that undoes it."""
    original = KafkaNetSocket.sock_connect

    async def sock_connect(self: Any, net: Any, sock: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(self, net, sock, *args, **kwargs)
        except BaseException:
            sock.close()
            raise

    KafkaNetSocket.sock_connect = sock_connect

    def undo() -> None:
        KafkaNetSocket.sock_connect = original

    return undo


# --------------------------------------------------------------------------- reading the log


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def read_log(
    bootstrap: str, topic: str, partitions: int, *, timeout: float = 120
) -> dict[int, list[LogRecord]]:
    """Every record of ``topic`` from offset 0 up to the end offsets (read first), with a
    confluent-kafka consumer (assigned, no group membership)."""
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
        out: dict[int, list[LogRecord]] = {p: [] for p in range(partitions)}
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
                    out[p].append(LogRecord(p, offset, msg.key(), msg.value()))
                nxt[p] = max(nxt[p], offset + 1)
        return out
    finally:
        consumer.close()


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount (61 bytes)
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")


def parse_batches(data: bytes) -> list[Batch]:
    """The complete record batches (magic 2) in ``data`` (a Fetch response's records)."""
    batches: list[Batch] = []
    pos = 0
    while pos + _BATCH_HEADER.size <= len(data):
        (base, length, _, magic, _, _, delta, _, _, pid, epoch, seq, _) = _BATCH_HEADER.unpack_from(
            data, pos
        )
        if pos + 12 + length > len(data):
            break  # a partial batch at the end of the response
        if magic != 2:
            raise ValueError(f"batch at offset {base} has magic {magic}")
        batches.append(Batch(base, base + delta, pid, epoch, seq))
        pos += 12 + length
    return batches


def read_batches(
    bootstrap: str, topic: str, partitions: int, *, timeout: float = 60
) -> dict[int, list[Batch]]:
    """The batch headers of each partition up to its high watermark, fetched (Fetch v12) from
    the partition's leader over a raw connection; retried from a fresh leader lookup while
    leadership moves (Kafka's preferred-leader election after a restart)."""
    out: dict[int, list[Batch]] = {}
    for p in range(partitions):
        found: tuple[list[Batch]] = wait_for(
            functools.partial(_fetch_batches, bootstrap, topic, p),
            timeout,
            f"the batches of {topic}-{p}",
            interval=0.5,
        )
        out[p] = found[0]
    return out


def _fetch_batches(bootstrap: str, topic: str, partition: int) -> tuple[list[Batch]]:
    """(the partition's batches,): a tuple, true for wait_for even when there are none."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(topic=topic, timeout=10)
    broker = md.brokers[md.topics[topic].partitions[partition].leader]
    batches: list[Batch] = []
    with RawClient(f"{broker.host}:{broker.port}", timeout=30) as client:
        offset = 0
        while True:
            response = client.request(fetch_request(topic, offset, partition=partition))
            (part,) = response.responses[0].partitions
            if part.error_code.name != "none":
                raise RuntimeError(f"fetch {topic}-{partition}@{offset}: {part.error_code.name}")
            found = parse_batches(bytes(part.records or b""))
            batches += [b for b in found if b.last_offset >= offset]
            if batches:
                offset = batches[-1].last_offset + 1
            if offset >= part.high_watermark or not found:
                return (batches,)


# --------------------------------------------------------------------------- checks


@dataclass
class Verdict:
    problems: list[str]
    lines: list[str]

    def report(self) -> str:
        return "\n".join(self.lines + [f"PROBLEM: {p}" for p in self.problems])


def _examples(items: list[Any], n: int = 5) -> str:
    return ", ".join(map(str, items[:n])) + (", ..." if len(items) > n else "")


def check_log(
    outcomes: list[Outcome],
    log: dict[int, list[LogRecord]],
    batches: dict[int, list[Batch]],
    *,
    every_record_acknowledged: bool,
) -> Verdict:
    """Compare what producers were told with what the log holds.

    - every acknowledged record is in the log exactly once, at the partition (and offset,
      when the client reported one) it was acknowledged at;
    - no record is in the log twice (failed or unacknowledged records may be absent, or
      present once);
    - each producer's records are in sequence order within each partition;
    - every record in the log was sent by one of the producers, with the value it was sent
      with;
    - no producer id (batch header) carries records of two producers;
    - with ``every_record_acknowledged`` (no faults injected), no record failed or stayed
      unacknowledged and no producer reported an error.
    """
    by_name = {o.name: o for o in outcomes}
    where: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    at: dict[tuple[int, int], tuple[str, int] | None] = {}
    foreign: list[str] = []
    order: list[str] = []
    pid_names: dict[int, set[str]] = defaultdict(set)
    pids_of: dict[str, set[int]] = defaultdict(set)
    for p, rows in log.items():
        starts = [b.base_offset for b in batches.get(p, [])]
        last_seq: dict[str, int] = {}
        for rec in rows:
            ident = parse_key(rec.key)
            at[(p, rec.offset)] = ident
            out = by_name.get(ident[0]) if ident else None
            if ident is None or out is None or ident[1] not in out.produced_at:
                foreign.append(f"{p}@{rec.offset} key={rec.key!r}")
                continue
            name, seq = ident
            expected = f"v{seq}".encode() if out.client == "java" else rec.key
            if rec.value != expected:
                foreign.append(f"{p}@{rec.offset} key={rec.key!r} value={rec.value!r}")
            where[ident].append((p, rec.offset))
            if name in last_seq and seq <= last_seq[name]:
                order.append(f"{name}:{seq} after {name}:{last_seq[name]} in partition {p}")
            last_seq[name] = max(seq, last_seq.get(name, -1))
            i = bisect.bisect_right(starts, rec.offset) - 1
            if i >= 0 and batches[p][i].last_offset >= rec.offset:
                pid = batches[p][i].producer_id
                pid_names[pid].add(name)
                pids_of[name].add(pid)

    lost: list[str] = []
    misplaced: list[str] = []
    per_client: dict[str, Counter[str]] = defaultdict(Counter)
    for out in outcomes:
        c = per_client[out.client]
        c["producers"] += 1
        c["sent"] += out.sent
        c["acked"] += len(out.acks)
        c["failed"] += len(out.failed)
        c["unacked"] += out.sent - len(out.acks) - len(out.failed)
        c["in log"] += sum(1 for seq in out.produced_at if (out.name, seq) in where)
        for seq, ack in sorted(out.acks.items()):
            found = where.get((out.name, seq), [])
            if not found:
                lost.append(f"{out.name}:{seq} (acked at {ack.partition}@{ack.offset})")
                c["acked, not in log"] += 1
            elif ack.offset >= 0 and (ack.partition, ack.offset) not in found:
                there = at.get((ack.partition, ack.offset))
                shown = f"{there[0]}:{there[1]}" if there else "nothing"
                misplaced.append(
                    f"{out.name}:{seq} acked at {ack.partition}@{ack.offset}, which holds "
                    f"{shown}; found at {_examples(found)}"
                )
                c["acked elsewhere"] += 1
            elif ack.offset < 0 and all(p != ack.partition for p, _ in found):
                misplaced.append(f"{out.name}:{seq} acked on {ack.partition}, found at {found}")
                c["acked elsewhere"] += 1
    duplicated = [f"{n}:{s} at {places}" for (n, s), places in where.items() if len(places) > 1]
    shared = {pid: sorted(names) for pid, names in pid_names.items() if len(names) > 1}
    in_log = sum(len(rows) for rows in log.values())

    total = Counter[str]()
    for c in per_client.values():
        total.update(c)
    lines = [
        f"{total['producers']} producers: {total['sent']} records sent, {total['acked']} "
        f"acknowledged, {total['failed']} failed, {total['unacked']} neither; {in_log} records "
        f"in the log ({len(where)} distinct); {len(lost)} acknowledged but not in the log, "
        f"{len(misplaced)} acknowledged at another place, {len(duplicated)} duplicated, "
        f"{len(order)} out of order, {len(foreign)} foreign; {len(pid_names)} producer ids in "
        f"the log, {len(shared)} shared by several producers"
    ]
    for client in CLIENTS:
        if client in per_client:
            n = per_client[client]
            lines.append(
                f"  {client}: {n['producers']} producers, {n['sent']} sent, {n['acked']} acked, "
                f"{n['failed']} failed, {n['unacked']} neither, {n['in log']} in the log, "
                f"{n['acked, not in log']} acked but not in the log, {n['acked elsewhere']} "
                "acked at another place"
            )
    errors = [f"{o.name}: {e}" for o in outcomes for e in o.errors]
    if errors:
        lines.append(f"  producer errors ({len(errors)}): {_examples(errors, 8)}")
    failures = [f"{o.name}:{s}: {e}" for o in outcomes for s, e in sorted(o.failed.items())]
    if failures:
        lines.append(f"  failed records ({len(failures)}): {_examples(failures, 5)}")

    problems: list[str] = []
    if lost:
        problems.append(
            f"{len(lost)} of {total['acked']} acknowledged records are not in the log: "
            f"{_examples(lost)}"
        )
    if misplaced:
        problems.append(
            f"{len(misplaced)} acknowledged records are not where they were acknowledged: "
            f"{_examples(misplaced, 3)}"
        )
    if duplicated:
        problems.append(
            f"{len(duplicated)} records are in the log more than once: {_examples(duplicated)}"
        )
    if order:
        problems.append(f"{len(order)} records out of producer order: {_examples(order)}")
    if foreign:
        problems.append(f"{len(foreign)} records no producer sent: {_examples(foreign)}")
    if shared:
        problems.append(
            f"{len(shared)} producer ids carry records of several producers: "
            f"{_examples([f'{pid}: {names}' for pid, names in shared.items()])}"
        )
    if every_record_acknowledged:
        unacked = total["sent"] - total["acked"]
        if unacked:
            problems.append(f"{unacked} of {total['sent']} records were not acknowledged")
        if errors:
            problems.append(f"{len(errors)} producer errors: {_examples(errors, 3)}")
    return Verdict(problems, lines)


# --------------------------------------------------------------------------- InitProducerId


def init_producer_ids_at_once(
    servers: list[str], count: int, *, retry_for: float = 30
) -> list[tuple[int, int]]:
    """``count`` InitProducerId requests (no transactional id), each on its own connection to
    ``servers[i % len(servers)]``, released together by a barrier; requests answered with a
    retriable error are sent again (all at once) as clients do. (producer id, epoch) each."""
    request = InitProducerIdRequest(
        transactional_id=None,
        transaction_timeout=datetime.timedelta(seconds=60),  # type: ignore[arg-type]
        producer_id=-1,  # type: ignore[arg-type]
        producer_epoch=-1,  # type: ignore[arg-type]
    )
    retriable = {"coordinator_load_in_progress", "coordinator_not_available", "not_controller"}
    answers: list[Any] = [None] * count
    pending = list(range(count))
    deadline = time.monotonic() + retry_for
    while pending:
        for i, answer in zip(pending, _at_once(servers, pending, request), strict=True):
            answers[i] = answer
        pending = [i for i in pending if answers[i].error_code.name in retriable]
        if pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"still retriable after {retry_for:.0f} s: {answers}")
            time.sleep(0.2)
    errors = [a.error_code.name for a in answers if a.error_code.name != "none"]
    if errors:
        raise AssertionError(f"InitProducerId errors: {Counter(errors)}")
    return [(int(a.producer_id), int(a.producer_epoch)) for a in answers]


def _at_once(servers: list[str], which: list[int], request: Any) -> list[Any]:
    clients: list[RawClient] = []
    try:
        for i in which:
            clients.append(RawClient(servers[i % len(servers)], timeout=60))
        barrier = threading.Barrier(len(clients))
        answers: list[Any] = [None] * len(clients)
        errors: list[BaseException] = []

        def run(k: int) -> None:
            try:
                barrier.wait(timeout=30)
                answers[k] = clients[k].request(request)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(len(clients))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        if errors:
            raise errors[0]
        return answers
    finally:
        for c in clients:
            with contextlib.suppress(OSError):
                c.close()
