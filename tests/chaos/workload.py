"""The soak's clients (confluent-kafka): what each saw goes to the history.

- idempotent producers, acks=all, each its own thread, at a steady rate; a producer that
  hits a fatal error is replaced by a new one under a new name (its order is its own);
- transactional producers: transactions of a few records, committed or aborted at random;
- a consumer group reading the idempotent topics, committing its positions every second;
- a read_committed consumer of the transactional topic;
- an observer reading the group's committed offsets (OffsetFetch) every two seconds.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from tests.chaos.history import (
    Ack,
    Commit,
    Committed,
    HistoryWriter,
    Isolation,
    Read,
    Send,
    SendError,
    TxnEnd,
    TxnOutcome,
)

GROUP = "soak-group"
RC_GROUP = "soak-rc"
FAST_RECONNECT = {"reconnect.backoff.max.ms": 1000}
"""Every client's: librdkafka backs off reconnecting to a broker that was down up to 10 s by
default, so a partition whose leader moves back to a restarted broker would wait for the
client's backoff, not the cluster; the soak times the cluster's recovery."""


@dataclass
class Clients:
    bootstrap: str
    history: HistoryWriter
    t0: float
    idempotent_topics: list[str]
    txn_topic: str
    seed: int
    rate: float = 100.0
    """Records per second of each idempotent producer."""
    client_log: logging.Logger = field(default_factory=lambda: logging.getLogger("soak.clients"))
    """Where librdkafka's idempotence messages go (the run's ``clients.log``)."""
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def start(self, producers: int, txn_producers: int, consumers: int) -> None:
        jobs: list[tuple[str, Callable[[], None]]] = []
        for i in range(producers):
            topic = self.idempotent_topics[i % len(self.idempotent_topics)]
            jobs.append((f"p{i}", partial(self.produce, f"p{i}", topic)))
        for i in range(txn_producers):
            jobs.append((f"x{i}", partial(self.transact, f"x{i}")))
        for i in range(consumers):
            jobs.append(
                (f"c{i}", partial(self.consume, f"c{i}", GROUP, self.idempotent_topics, False))
            )
        jobs.append(("rc", partial(self.consume, "rc", RC_GROUP, [self.txn_topic], True)))
        jobs.append(("observer", self.observe))
        for name, job in jobs:
            thread = threading.Thread(target=self.guard, args=(name, job), name=name, daemon=True)
            thread.start()
            self.threads.append(thread)

    def guard(self, name: str, job: Callable[[], None]) -> None:
        try:
            job()
        except Exception as exc:  # a client thread must not die unseen
            self.errors.append(f"{name}: {exc!r}")
            print(f"client thread {name} died: {exc!r}", flush=True)
            raise

    def join(self, timeout: float) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))

    # --- producers ---------------------------------------------------------------------

    def produce(self, base: str, topic: str) -> None:
        generation = 0
        seq = 0
        interval = 1 / self.rate
        while not self.stop.is_set():
            name = f"{base}g{generation}"
            fatal = threading.Event()
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    **FAST_RECONNECT,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 120_000,
                    "error_cb": lambda err, fatal=fatal: fatal.set() if err.fatal() else None,
                    # why the client bumps its epoch (re-sending in-flight records under new
                    # sequence numbers): librdkafka's idempotence log, to the run's client log
                    "debug": "eos",
                    "logger": self.client_log,
                }
            )
            next_at = time.monotonic()
            while not self.stop.is_set() and not fatal.is_set():
                value = f"{name}-{seq}"
                self.history.write(Send(self.now(), name, topic, value, seq))
                try:
                    producer.produce(topic, value.encode(), on_delivery=self.delivered(name, value))
                except BufferError:
                    producer.poll(0.1)
                    self.history.write(SendError(self.now(), name, value, "local queue full"))
                except KafkaException as exc:
                    self.history.write(SendError(self.now(), name, value, str(exc)))
                    fatal.set()
                seq += 1
                try:
                    producer.poll(0)
                except KafkaException as exc:  # fatal: a new producer takes over
                    print(f"{name}: {exc}", flush=True)
                    fatal.set()
                next_at += interval
                pause = next_at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                else:
                    next_at = time.monotonic()
            with contextlib.suppress(KafkaException):
                producer.flush(180)
            generation += 1

    def delivered(self, producer: str, value: str) -> Callable[[KafkaError | None, Message], None]:
        def callback(err: KafkaError | None, msg: Message) -> None:
            # an exception raised here is left pending inside librdkafka's poll loop, and
            # the next callback's first Python call fails with a SystemError that names
            # neither (a transactional lane died so once): it is recorded here instead
            try:
                record(err, msg)
            except Exception as exc:
                self.errors.append(f"{producer}: delivery report of {value}: {exc!r}")
                print(f"{value}: delivery report failed:", flush=True)
                traceback.print_exc()

        def record(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                partition, offset = msg.partition(), msg.offset()
                if offset is None or offset < 0:
                    print(f"{value}: delivered without an offset ({offset})", flush=True)
                self.history.write(
                    Ack(
                        self.now(), producer, value, str(msg.topic()), partition or 0,
                        offset if offset is not None and offset >= 0 else -1,
                    )
                )  # fmt: skip
            else:
                self.history.write(SendError(self.now(), producer, value, err.str()))

        return callback

    def transact(self, base: str) -> None:
        rng = random.Random(f"{self.seed}-{base}")
        generation = 0
        seq = 0
        txn_no = 0
        while not self.stop.is_set():
            name = f"{base}g{generation}"
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    **FAST_RECONNECT,
                    "transactional.id": f"soak-{base}",
                    "transaction.timeout.ms": 60_000,
                    "message.timeout.ms": 60_000,
                    "linger.ms": 5,
                }
            )
            try:
                producer.init_transactions(120)
            except KafkaException:
                generation += 1
                time.sleep(1)
                continue
            while not self.stop.is_set():
                txn = f"{name}-t{txn_no}"
                txn_no += 1
                values = []
                outcome = TxnOutcome.UNKNOWN
                fatal = False
                try:
                    producer.begin_transaction()
                    for _ in range(rng.randint(1, 6)):
                        value = f"{name}-{seq}"
                        self.history.write(Send(self.now(), name, self.txn_topic, value, seq, txn))
                        producer.produce(
                            self.txn_topic, value.encode(), on_delivery=self.delivered(name, value)
                        )
                        values.append(value)
                        seq += 1
                    time.sleep(rng.uniform(0, 0.2))
                    if rng.random() < 0.25:
                        producer.abort_transaction(60)
                        outcome = TxnOutcome.ABORTED
                    else:
                        producer.commit_transaction(60)
                        outcome = TxnOutcome.COMMITTED
                except KafkaException as exc:
                    error = exc.args[0]
                    if error.txn_requires_abort():
                        try:
                            producer.abort_transaction(60)
                            outcome = TxnOutcome.ABORTED
                        except KafkaException:
                            fatal = True
                    else:
                        fatal = True  # retriable commit that timed out, or fatal: unknown
                    print(f"{txn}: {error} -> {outcome}", flush=True)
                self.history.write(TxnEnd(self.now(), name, txn, outcome, tuple(values)))
                if fatal:
                    break
            with contextlib.suppress(KafkaException):  # a fatal error stays fatal
                producer.flush(10)
            generation += 1

    # --- consumers ---------------------------------------------------------------------

    def consume(self, name: str, group: str, topics: list[str], committed: bool) -> None:
        isolation = Isolation.READ_COMMITTED if committed else Isolation.READ_UNCOMMITTED
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                **FAST_RECONNECT,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": str(isolation),
                "session.timeout.ms": 10_000,
            }
        )
        consumer.subscribe(topics)
        last_commit = time.monotonic()
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    topic, partition, offset = str(msg.topic()), msg.partition(), msg.offset()
                    assert partition is not None
                    assert offset is not None
                    _, hw = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), cached=True
                    )
                    value = bytes(msg.value() or b"").decode()
                    self.history.write(
                        Read(
                            self.now(), name, group, isolation, topic, partition, offset, value,
                            hw if hw >= 0 else None,
                        )
                    )  # fmt: skip
                if not committed and time.monotonic() - last_commit >= 1:
                    last_commit = time.monotonic()
                    self.commit(name, group, consumer)
        finally:
            consumer.close()

    def commit(self, name: str, group: str, consumer: Consumer) -> None:
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException:
            return  # nothing to commit, or not acknowledged: not in the history
        for tp in done or []:
            if tp.error is None and tp.offset >= 0:
                self.history.write(
                    Commit(self.now(), name, group, tp.topic, tp.partition, tp.offset)
                )

    def observe(self) -> None:
        observer = Consumer(
            {"bootstrap.servers": self.bootstrap, **FAST_RECONNECT, "group.id": GROUP}
        )
        try:
            partitions: list[TopicPartition] = []
            while not partitions and not self.stop.is_set():
                try:
                    meta = observer.list_topics(timeout=10)
                except KafkaException:
                    continue
                partitions = [
                    TopicPartition(t, p)
                    for t in self.idempotent_topics
                    if t in meta.topics
                    for p in meta.topics[t].partitions
                ]
            while not self.stop.wait(2):
                asked = self.now()  # an observation is as late as its request, no later
                try:
                    seen = observer.committed(partitions, timeout=10)
                except KafkaException:
                    continue
                for tp in seen:
                    if tp.error is None:
                        self.history.write(
                            Committed(asked, "o", GROUP, tp.topic, tp.partition, max(tp.offset, -1))
                        )
        finally:
            observer.close()
