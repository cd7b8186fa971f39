"""Compacted topics through real clients: what the log cleaner writes (offset gaps, batches
rewritten with their codec, empty batches kept for idempotent producers, delete horizons)
must read back in librdkafka and aiokafka, survive a restart, and a record without a key
must be refused with the same error as Apache Kafka's."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from dataplane.log.segment import Segment
from tests.compat.conftest import create_topic
from tests.conftest import BrokerProcess, unique

COMPACTING = {
    "auto.create.topics.enable": "true",
    "log.cleanup.policy": "compact",
    "log.segment.bytes": "16384",
    "log.cleaner.backoff.ms": "100",
    "log.retention.check.interval.ms": "1000",
}
KEYS = 30
ROUNDS = 30


def produce_all(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]], **config: Any
) -> dict[int, tuple[bytes, bytes | None]]:
    """Produce in order to partition 0; returns offset -> (key, value) as acknowledged."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "batch.num.messages": 20, **config}
    )
    acked: dict[int, tuple[bytes, bytes | None]] = {}
    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.offset()] = (msg.key(), msg.value())

    for key, value in records:
        producer.produce(topic, value, key, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return acked


def read_confluent(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("compacted"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                if msg.offset() >= high:
                    return out
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError(f"timed out reading {topic} up to {high}")
    finally:
        consumer.close()


async def read_aiokafka(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = AioTopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[tuple[int, bytes, bytes | None]] = []
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            for msg in batch.get(tp, []):
                out.append((msg.offset, msg.key, msg.value))
        return out
    finally:
        await consumer.stop()


def test_compacted_topic_reads_back_in_real_clients(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker = make_broker(COMPACTING)
    topic = unique("compacted")
    rng = random.Random(7)

    def pad() -> bytes:
        return rng.randbytes(300)  # incompressible, so segments roll

    # Producer A (idempotent, lz4) writes every key many times.
    first = [(b"key-%d" % k, b"a%d-" % r + pad()) for r in range(ROUNDS) for k in range(KEYS)]
    acked = produce_all(
        broker.bootstrap, topic, first, **{"enable.idempotence": True, "compression.type": "lz4"}
    )
    # Producer B (idempotent, zstd) overwrites every key once, deletes five, then pads so
    # all of that lies in closed segments.
    second: list[tuple[bytes, bytes | None]] = [(b"key-%d" % k, b"b-" + pad()) for k in range(KEYS)]
    second += [(b"key-%d" % k, None) for k in range(5)]
    second += [(b"filler-%d" % i, pad()) for i in range(120)]
    acked.update(
        produce_all(
            broker.bootstrap,
            topic,
            second,
            **{"enable.idempotence": True, "compression.type": "zstd"},
        )
    )
    latest: dict[bytes, int] = {}
    for offset in sorted(acked):
        latest[acked[offset][0]] = offset

    deadline = time.monotonic() + 60
    while True:
        records = read_confluent(broker.bootstrap, topic)
        keys = [key for _, key, _ in records]
        if all(keys.count(b"key-%d" % k) == 1 for k in range(KEYS)):
            break
        assert time.monotonic() < deadline, (
            f"not compacted: {len(records)} records\n{broker.logs()}"
        )
        time.sleep(0.2)

    def check(records: list[tuple[int, bytes, bytes | None]]) -> None:
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets))
        for offset, key, value in records:
            assert acked[offset] == (key, value), offset  # nothing moved or altered
        present = {offset for offset, _, _ in records}
        assert all(offset in present for offset in latest.values())  # latest always kept
        for k in range(5):
            assert acked[latest[b"key-%d" % k]][1] is None  # tombstones still readable
        assert len(records) < len(acked) // 2

    check(records)
    assert asyncio.run(read_aiokafka(broker.bootstrap, topic)) == records
    broker.stop()
    empty = 0
    for path in (broker.data_dir / f"{topic}-0").glob("*.log"):
        segment = Segment(path.parent, int(path.name[:20]), 4096)
        empty += sum(1 for _, h in segment.iter_batches() if h.record_count == 0)
        segment.close()
    assert empty >= 1, "expected an empty batch kept for producer A's sequence state"
    broker.start()
    assert read_confluent(broker.bootstrap, topic) == records


@pytest.mark.parametrize("system", ["sluice", "kafka"])
def test_null_key_in_compacted_topic_is_invalid_record(
    request: pytest.FixtureRequest,
    make_broker: Callable[..., BrokerProcess],
    system: str,
    tmp_path: Path,
) -> None:
    topic = unique("nullkey")
    if system == "kafka":
        bootstrap = request.getfixturevalue("kafka_oracle").bootstrap
        create_topic(bootstrap, topic, 1, {"cleanup.policy": "compact"})
    else:
        bootstrap = make_broker(COMPACTING).bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
    outcomes: list[Any] = []
    producer.produce(
        topic, b"keyed", b"k", partition=0, on_delivery=lambda e, m: outcomes.append(e)
    )
    producer.flush(30)
    producer.produce(
        topic, b"no key", None, partition=0, on_delivery=lambda e, m: outcomes.append(e)
    )
    producer.flush(30)
    assert outcomes[0] is None
    assert outcomes[1] is not None, outcomes
    assert outcomes[1].code() == KafkaError.INVALID_RECORD, outcomes
