"""A broker's clock skewed through its one seam (``clock.offset.file``, dataplane/clock.py),
as the fault-injection soak jumps it: LogAppendTime stamps follow the broker's clock, both
ways, while the file changes under a running broker, and a bad file means no offset."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess

HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("clock") / "data"
    proc = BrokerProcess(
        data, {"clock.offset.file": "clock-offset", "clock.offset.poll.ms": "50"}
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


def stamp(bootstrap: str, topic: str, value: bytes) -> int:
    """The LogAppendTime the broker gives one record (ms)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while True:
            msg = consumer.poll(0.5)
            assert time.monotonic() < deadline, "record not read back"
            if msg is not None and msg.error() is None and msg.value() == value:
                return int(msg.timestamp()[1])
    finally:
        consumer.close()


def set_offset(broker: BrokerProcess, text: str) -> None:
    (broker.data_dir / "clock-offset").write_text(text)
    time.sleep(0.5)  # ten polls of the file


def test_log_append_time_follows_the_skewed_clock(broker: BrokerProcess, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "clock-skew"
    futures = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})]
    )
    futures[topic].result(30)

    set_offset(broker, str(HOUR_MS))
    before = int(time.time() * 1000)
    ahead = stamp(broker.bootstrap, topic, b"ahead")
    assert ahead >= before + HOUR_MS  # an hour ahead of this test's clock

    set_offset(broker, str(-HOUR_MS))
    behind = stamp(broker.bootstrap, topic, b"behind")
    assert behind <= int(time.time() * 1000) - HOUR_MS + 1000

    set_offset(broker, "not a number")  # no offset, never a crash
    before = int(time.time() * 1000)
    plain = stamp(broker.bootstrap, topic, b"plain")
    assert before - 1000 <= plain <= int(time.time() * 1000) + 1000
    assert "wall clock offset now -3600000 ms (was +3600000 ms)" in broker.logs()
