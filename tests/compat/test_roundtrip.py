"""Produce/consume round trips with real clients, against Sluice and Apache Kafka alike.

Ordering per partition, keys, headers and timestamps must survive; offsets are dense.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as ATP
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP

from tests.compat.conftest import Target, create_topic, kcat_binary
from tests.conftest import unique
from tests.support.java_client import java_available, run_java_client

# Recent enough that time-based retention (7 days) never deletes what a test wrote, old
# enough to be distinguishable from the broker's clock.
BASE_TS = (int(time.time()) - 3600) * 1000


def consume_assigned(bootstrap: str, topic: str, partitions: int, count: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(messages) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None:
                    messages.append(msg)
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(msg.error())
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_idempotent_producer_every_codec(target: Target, codec: str) -> None:
    topic = unique(f"codec-{codec}")
    create_topic(target.bootstrap, topic, partitions=3)
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    acked: dict[str, tuple[int, int]] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        acked[msg.key().decode()] = (msg.partition(), msg.offset())

    n = 600
    for i in range(n):
        producer.produce(
            topic,
            key=f"k{i}",
            value=f"value-{i}-".encode() * (i % 7 + 1),
            headers=[("i", str(i).encode()), ("empty", b"")],
            timestamp=BASE_TS + i,
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0
    assert len(acked) == n

    messages = consume_assigned(target.bootstrap, topic, 3, n)
    assert len(messages) == n
    by_partition: dict[int, list[Any]] = {}
    for msg in messages:
        key = msg.key().decode()
        i = int(key[1:])
        assert (msg.partition(), msg.offset()) == acked[key]
        assert msg.value() == f"value-{i}-".encode() * (i % 7 + 1)
        assert msg.headers() == [("i", str(i).encode()), ("empty", b"")]
        assert msg.timestamp() == (1, BASE_TS + i)  # CreateTime
        by_partition.setdefault(msg.partition(), []).append(msg)
    for msgs in by_partition.values():
        offsets = [m.offset() for m in msgs]
        assert offsets == list(range(len(msgs))), "offsets are dense from 0"
        keys = [int(m.key()[1:]) for m in msgs]
        assert keys == sorted(keys), "per-partition order is production order"


def test_kcat_produce_and_consume(target: Target) -> None:
    kcat = kcat_binary()
    topic = unique("kcat")
    create_topic(target.bootstrap, topic)
    lines = "".join(f"key{i}:value {i}\n" for i in range(100))
    subprocess.run(
        [kcat, "-b", target.bootstrap, "-P", "-t", topic, "-K:", "-H", "source=kcat", "-z", "lz4"],
        input=lines.encode(),
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        [kcat, "-b", target.bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%k|%s|%o|%h\n"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    rows = [line.split("|") for line in out.splitlines()]
    assert [r[0] for r in rows] == [f"key{i}" for i in range(100)]
    assert [r[1] for r in rows] == [f"value {i}" for i in range(100)]
    assert [int(r[2]) for r in rows] == list(range(100))
    assert {r[3] for r in rows} == {"source=kcat"}


def test_kafka_python_round_trip(target: Target) -> None:
    topic = unique("kpy")
    create_topic(target.bootstrap, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=target.bootstrap, acks="all", linger_ms=5)
    futures = [
        producer.send(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            headers=[("n", str(i).encode())],
            partition=i % 2,
            timestamp_ms=BASE_TS + i,
        )
        for i in range(200)
    ]
    producer.flush()
    metas = [f.get(timeout=30) for f in futures]
    producer.close()
    assert [m.offset for m in metas[0::2]] == list(range(100))

    consumer = KafkaConsumer(
        bootstrap_servers=target.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000
    )
    consumer.assign([KTP(topic, 0), KTP(topic, 1)])
    consumer.seek_to_beginning()
    got = []
    for msg in consumer:
        got.append(msg)
        if len(got) == 200:
            break
    consumer.close()
    assert len(got) == 200
    for msg in got:
        i = int(msg.key[1:])
        assert msg.value == f"v{i}".encode()
        assert msg.partition == i % 2
        assert msg.offset == i // 2
        assert msg.timestamp == BASE_TS + i
        assert msg.headers == [("n", str(i).encode())]


def test_aiokafka_round_trip(target: Target) -> None:
    topic = unique("aio")
    create_topic(target.bootstrap, topic)

    async def run() -> list[Any]:
        producer = AIOKafkaProducer(bootstrap_servers=target.bootstrap, compression_type="gzip")
        await producer.start()
        try:
            for i in range(100):
                await producer.send(
                    topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)]
                )
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=target.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([ATP(topic, 0)])
            await consumer.seek_to_beginning()
            out: list[Any] = []
            while len(out) < 100:
                batches = await consumer.getmany(timeout_ms=2000)
                for msgs in batches.values():
                    out.extend(msgs)
            return out
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert [m.offset for m in got] == list(range(100))
    assert [m.key for m in got] == [b"k%d" % i for i in range(100)]
    assert [list(m.headers) for m in got] == [[("h", b"%d" % i)] for i in range(100)]


def test_java_client_produce_consume(target: Target) -> None:
    reason = java_available()
    if reason:
        pytest.skip(reason)
    topic = unique("java")
    create_topic(target.bootstrap, topic, partitions=2)
    acks = run_java_client(
        [
            "produce",
            "--bootstrap",
            target.bootstrap,
            "--topic",
            topic,
            "--count",
            "200",
            "--compression",
            "zstd",
            "--headers",
        ]
    )
    assert len(acks) == 200
    records = run_java_client(
        [
            "consume",
            "--bootstrap",
            target.bootstrap,
            "--topic",
            topic,
            "--group",
            unique("jg"),
            "--count",
            "200",
            "--timeout-ms",
            "60000",
        ]
    )
    assert len(records) == 200
    acked = {(a["partition"], a["offset"]): a["key"] for a in acks}
    for r in records:
        assert acked[(r["partition"], r["offset"])] == r["key"]
        assert r["value"] == "v" + r["key"][1:]


def test_offsets_for_times_match_kafka(both: dict[str, str]) -> None:
    answers: dict[str, list[tuple[int, int]]] = {}
    for name, bootstrap in both.items():
        topic = unique("times")
        create_topic(bootstrap, topic)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(50):
            producer.produce(topic, value=b"x", timestamp=BASE_TS + 10 * i)
            if i % 10 == 9:
                producer.flush(10)  # several batches
        producer.flush(10)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("t")})
        queries = [BASE_TS - 1, BASE_TS, BASE_TS + 5, BASE_TS + 250, BASE_TS + 490, BASE_TS + 491]
        result = []
        for ts in queries:
            (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            result.append((ts - BASE_TS, tp.offset))
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        result.append((low, high))
        consumer.close()
        answers[name] = result
    assert answers["sluice"] == answers["kafka"]
