"""Crash recovery with real processes: SIGKILL a broker under an idempotent acks=all
producer (log.flush.policy=fsync), restart it on the same port and data directory, and
check that nothing acknowledged is lost, offsets stay dense, nothing is written twice; then
damage a stopped broker's files (torn tail, garbage, missing index) and restart it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.conftest import BrokerProcess, unique
from wire.record_batch import encode_batch

PARTITIONS = 3
SETTINGS = {
    "log.flush.policy": "fsync",
    "auto.create.topics.enable": "true",
    "num.partitions": str(PARTITIONS),
    "log.segment.bytes": "131072",
    "log.index.interval.bytes": "1024",
}
KILLS = 3
PER_ROUND = 3_000

Acked = dict[tuple[int, int], tuple[bytes, bytes]]


class AckedProducer(threading.Thread):
    """A confluent-kafka producer (idempotent, acks=all) that records every acknowledgement."""

    def __init__(self, bootstrap: str, topic: str, prefix: bytes = b"key") -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.prefix = prefix
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "batch.num.messages": 40,
                "message.timeout.ms": 120_000,
                "queue.buffering.max.messages": 5_000,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
                "retry.backoff.ms": 20,
                "error_cb": self._error,
            }
        )
        self.acked: Acked = {}
        self.failures: list[str] = []
        self.sent = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def _error(self, err: Any) -> None:
        # Connection errors while the broker is down are expected; fatal ones are not.
        if err.fatal():
            self.failures.append(f"fatal: {err}")

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failures.append(f"delivery: {err}")
            return
        with self.lock:
            self.acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    def run(self) -> None:
        while not self.stopping.is_set():
            key = b"%s-%d" % (self.prefix, self.sent)
            value = key + b"|" + b"v" * (self.sent % 300)
            try:
                self.producer.produce(self.topic, value, key, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.sent += 1
            self.producer.poll(0)
        self.producer.flush(120)

    def wait_for(self, count: int, broker: BrokerProcess, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert not self.failures, self.failures[:5]
            assert time.monotonic() < deadline, (
                f"only {len(self.acked)} of {count} acknowledged\n{broker.logs()}"
            )
            time.sleep(0.02)


def consume_all(bootstrap: str, topic: str) -> dict[int, list[Any]]:
    """Every message of every partition, from offset 0 to the high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("verify"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
        done = {p for p, (_, high) in ends.items() if high == 0}
        deadline = time.monotonic() + 60
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    if msg.offset() >= ends[msg.partition()][1]:
                        done.add(msg.partition())
                    continue
                out[msg.partition()].append(msg)
                if msg.offset() + 1 >= ends[msg.partition()][1]:
                    done.add(msg.partition())
        assert len(done) == PARTITIONS, f"timed out reading {topic}: {ends}"
        for p, (low, high) in ends.items():
            assert low == 0
            assert [m.offset() for m in out[p]] == list(range(high)), f"partition {p} not dense"
        return out
    finally:
        consumer.close()


def check_against(acked: Acked, consumed: dict[int, list[Any]]) -> None:
    stored = {(p, m.offset()): (m.key(), m.value()) for p, msgs in consumed.items() for m in msgs}
    missing = [k for k in acked if k not in stored]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    wrong = [k for k, kv in acked.items() if stored[k] != kv]
    assert not wrong, f"records changed at {wrong[:5]}"
    keys = [kv[0] for kv in stored.values()]
    assert len(keys) == len(set(keys)), "a record was written twice"


def partition_dirs(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted(broker.data_dir.glob(f"{topic}-*"))


def test_sigkill_under_load_loses_nothing_acknowledged(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker = make_broker(SETTINGS)
    topic = unique("crash")
    producer = AckedProducer(broker.bootstrap, topic)
    producer.start()
    try:
        in_flight = []
        for round_ in range(1, KILLS + 1):
            producer.wait_for(round_ * PER_ROUND, broker)
            broker.kill()  # SIGKILL, mid-produce
            in_flight.append(producer.sent - len(producer.acked))
            broker.start()
        producer.wait_for((KILLS + 1) * PER_ROUND, broker)
    finally:
        producer.stopping.set()
        producer.join(150)
    assert not producer.is_alive()
    assert not producer.failures, producer.failures[:5]
    assert all(n > 0 for n in in_flight), f"a kill found nothing in flight: {in_flight}"
    consumed = consume_all(broker.bootstrap, topic)
    check_against(producer.acked, consumed)
    assert sum(len(m) for m in consumed.values()) >= (KILLS + 1) * PER_ROUND
    # The restarts recovered segments that rolled: there is more than one per partition.
    assert all(len(list(d.glob("*.log"))) > 1 for d in partition_dirs(broker, topic))


def test_damaged_files_are_repaired_on_restart(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker = make_broker(SETTINGS)
    topic = unique("damage")
    producer = AckedProducer(broker.bootstrap, topic)
    producer.start()
    try:
        producer.wait_for(PER_ROUND, broker)
    finally:
        producer.stopping.set()
        producer.join(150)
    assert not producer.failures, producer.failures[:5]
    before = consume_all(broker.bootstrap, topic)
    check_against(producer.acked, before)
    broker.stop()

    dirs = partition_dirs(broker, topic)
    assert len(dirs) == PARTITIONS
    # Partition 0: a half-written batch at the end of the active segment.
    # Partition 1: garbage after the last batch.
    # Partition 2: the index of every closed segment deleted, one corrupted.
    actives = [max(d.glob("*.log")) for d in dirs]
    torn = encode_batch([(b"torn", b"x" * 500)], base_offset=10**6)
    with open(actives[0], "ab") as fh:
        fh.write(torn[: len(torn) // 2])
    with open(actives[1], "ab") as fh:
        fh.write(b"\x00\x01garbage\xff" * 50)
    indexes = sorted(p for p in dirs[2].glob("*.index") if p.stem != actives[2].stem)
    assert len(indexes) >= 2, "expected closed segments in partition 2"
    indexes[0].write_bytes(indexes[0].read_bytes()[:-7] + b"corrupt")
    for path in indexes[1:]:
        path.unlink()

    broker.start()
    after = consume_all(broker.bootstrap, topic)
    assert {p: [(m.offset(), m.key(), m.value()) for m in msgs] for p, msgs in after.items()} == {
        p: [(m.offset(), m.key(), m.value()) for m in msgs] for p, msgs in before.items()
    }
    logs = broker.logs()
    assert logs.count("truncating") >= 2, logs
    for path in indexes:
        assert path.exists(), f"{path.name} was not rebuilt"
    # Appends continue right after the repaired tails.
    more = AckedProducer(broker.bootstrap, topic, prefix=b"more")
    more.start()
    try:
        more.wait_for(300, broker)
    finally:
        more.stopping.set()
        more.join(150)
    assert not more.failures, more.failures[:5]
    consumed = consume_all(broker.bootstrap, topic)
    check_against(producer.acked, consumed)
    check_against(more.acked, consumed)
    for p, msgs in before.items():
        assert len(consumed[p]) >= len(msgs)


@pytest.mark.parametrize("policy", ["page_cache", "fsync"])
def test_clean_restart_keeps_everything(
    make_broker: Callable[..., BrokerProcess], policy: str
) -> None:
    broker = make_broker({**SETTINGS, "log.flush.policy": policy})
    topic = unique("clean")
    producer = AckedProducer(broker.bootstrap, topic)
    producer.start()
    try:
        producer.wait_for(1_000, broker)
    finally:
        producer.stopping.set()
        producer.join(150)
    broker.stop()
    # A clean stop leaves every segment indexed and a producer snapshot at the end.
    for directory in partition_dirs(broker, topic):
        logs = sorted(directory.glob("*.log"))
        assert {p.stem for p in directory.glob("*.index")} == {p.stem for p in logs}
        assert list(directory.glob("*.snapshot"))
    broker.start()
    check_against(producer.acked, consume_all(broker.bootstrap, topic))
    assert "truncating" not in broker.logs()
