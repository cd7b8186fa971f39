"""A broker with tiered storage against the embedded S3 server, all real processes:
closed segments are uploaded and then deleted locally; consumers (confluent-kafka and kcat)
read everything from offset 0 across both tiers; ListOffsets and the log start offset
span both tiers; a broker restart keeps it all; remote retention and topic deletion empty
the bucket; an object store that is down delays uploads and keeps local data, and uploads
catch up when it returns."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from controlplane.kafka import Admin
from tests.conftest import unique
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tests.support.tiering import TEST_ADMIN, TOPIC_CONFIG, broker_settings
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.object_store import S3ObjectStore
from wire.record_batch import parse_header

BUCKET = "tiering"
RECORDS = 3000
VALUE = b"v" * 200


@pytest.fixture(scope="module")
def broker(s3: EmbeddedS3, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("tiered-broker"), broker_settings(s3.endpoint, BUCKET)
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def bucket(s3: EmbeddedS3) -> S3ObjectStore:
    return S3ObjectStore(
        ObjectStoreSettings(
            endpoint=s3.endpoint,
            bucket=BUCKET,
            access_key_id="test",
            secret_access_key="test",
        )
    )


def create_topic(broker: BrokerProcess, topic: str, **extra: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={**TOPIC_CONFIG, **extra})])
    futures[topic].result(30)


def produce(broker: BrokerProcess, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 4000})
    for i in range(start, start + count):
        producer.produce(topic, key=b"%d" % i, value=VALUE)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def describe_remote(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    host, port = broker.bootstrap.split(":")
    return asyncio.run(Admin(host, int(port), 10).describe_remote_log([topic]))


def remote_segments(broker: BrokerProcess, topic: str) -> list[dict[str, Any]]:
    doc = describe_remote(broker, topic)
    part = doc["topics"].get(topic, {}).get("partitions", {}).get("0", {})
    return [s for s in part.get("segments", []) if s["state"] == "copy_finished"]


def local_segments(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-0").glob("*.log"))


def watermarks(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def consume_all(broker: BrokerProcess, topic: str, expected: int) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("read"),
            "enable.auto.commit": False,
            "fetch.max.bytes": 100_000,
            "message.max.bytes": 100_000,
            "max.partition.fetch.bytes": 50_000,
        }
    )
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    continue  # retriable errors (the object store was slow) are retried
                got.append((msg.offset(), msg.key()))
    finally:
        consumer.close()
    return got


def first_local(broker: BrokerProcess, topic: str) -> int:
    return int(local_segments(broker, topic)[0].name.split(".")[0])


def reading(broker: BrokerProcess, topic: str, offset: int = 0) -> Any:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, 0, offset)])
    return consumer


def drain(consumer: Any, seconds: float, until: int = -1) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (until < 0 or len(got) < until):
        for msg in consumer.consume(1000, 0.3):
            if msg.error() is None:
                got.append((msg.offset(), msg.key()))
    return got


def consume_from(broker: BrokerProcess, topic: str, offset: int, count: int) -> list[Any]:
    consumer = reading(broker, topic, offset)
    try:
        return drain(consumer, 10, count)
    finally:
        consumer.close()


def wait_tiered(broker: BrokerProcess, topic: str) -> list[dict[str, Any]]:
    """Until segments are remote and the local log starts above 0."""

    def tiered() -> list[dict[str, Any]] | None:
        segments = remote_segments(broker, topic)
        first_local = local_segments(broker, topic)[0].name
        if segments and int(first_local.split(".")[0]) > 0:
            return segments
        return None

    found: list[dict[str, Any]] = wait_for(tiered, 60, "segments uploaded and deleted locally")
    return found


def test_segments_move_to_the_object_store_and_read_back(
    broker: BrokerProcess, s3: EmbeddedS3
) -> None:
    topic = unique("tiered")
    create_topic(broker, topic)
    produce(broker, topic, RECORDS)
    segments = wait_tiered(broker, topic)

    # the objects: each uploaded segment has its .log, .index and .epochs
    keys = {info.key for info in bucket(s3).list("")}
    for segment in segments:
        stem = f"{segment['base_offset']:020d}-{segment['segment_id']}"
        assert any(k.endswith(stem + ".log") for k in keys), stem
        assert any(k.endswith(stem + ".index") for k in keys), stem
        assert any(k.endswith(stem + ".epochs") for k in keys), stem

    # both tiers look like one log
    assert watermarks(broker, topic) == (0, RECORDS)
    got = consume_all(broker, topic, RECORDS)
    assert [o for o, _ in got] == list(range(RECORDS))
    assert [k for _, k in got] == [b"%d" % i for i in range(RECORDS)]


def test_kcat_reads_from_offset_zero(broker: BrokerProcess) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed and could not be (tools/ensure-system-deps.sh)")
    topic = unique("tiered-kcat")
    create_topic(broker, topic)
    produce(broker, topic, RECORDS)
    wait_tiered(broker, topic)
    out = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %k\n"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    lines = out.stdout.decode().split()
    offsets = [int(x) for x in lines[0::2]]
    assert offsets == list(range(RECORDS))


def test_timestamps_and_restart_span_both_tiers(broker: BrokerProcess) -> None:
    topic = unique("tiered-time")
    create_topic(broker, topic)
    produce(broker, topic, RECORDS)
    wait_tiered(broker, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
        assert found[0].offset == 0, "timestamp 0: the first record, in the remote tier"
    finally:
        consumer.close()

    broker.stop()
    broker.start()
    assert watermarks(broker, topic) == (0, RECORDS)
    got = consume_all(broker, topic, RECORDS)
    assert [o for o, _ in got] == list(range(RECORDS))


def test_remote_retention_and_topic_deletion_empty_the_bucket(
    broker: BrokerProcess, s3: EmbeddedS3
) -> None:
    topic = unique("tiered-expire")
    create_topic(broker, topic)
    produce(broker, topic, RECORDS)
    segments = wait_tiered(broker, topic)
    topic_id = describe_remote(broker, topic)["topics"][topic]["topic_id"]
    prefix = next(k for k in (i.key for i in bucket(s3).list("")) if topic_id in k).rsplit("/", 2)[
        0
    ]

    # retention.bytes smaller than the log: the oldest remote segments go, the log start moves
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.bytes", "200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    wait_for(lambda: watermarks(broker, topic)[0] > 0, 60, "remote retention moving the log start")
    low = watermarks(broker, topic)[0]
    remaining = remote_segments(broker, topic)
    assert remaining[0]["base_offset"] == low
    expired = [s["segment_id"] for s in segments if s["end_offset"] < low]
    assert expired

    def expired_keys() -> list[str]:
        keys = [i.key for i in bucket(s3).list(prefix + "/")]
        return [k for k in keys if any(segment_id in k for segment_id in expired)]

    # the log start may move before every object of the expired segments is deleted
    wait_for(lambda: not expired_keys(), 30, "the expired segments' objects deleted")
    got = consume_all(broker, topic, RECORDS - low)
    assert got[0][0] == low

    # deleting the topic deletes its objects
    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: not list(bucket(s3).list(prefix + "/")), 60, "the topic's objects deleted")


def test_object_store_down_keeps_local_data_and_catches_up(
    tmp_path: Path,
) -> None:
    s3 = EmbeddedS3(tmp_path / "s3", admin=TEST_ADMIN).start()
    proc = BrokerProcess(tmp_path / "broker", broker_settings(s3.endpoint, BUCKET))
    proc.start()
    try:
        topic = unique("tiered-down")
        create_topic(proc, topic)
        produce(proc, topic, 1000)
        wait_for(
            lambda: remote_segments(proc, topic) and first_local(proc, topic) > 0,
            60,
            "a first upload, deleted locally",
        )
        port = s3.port
        s3.kill()
        produce(proc, topic, RECORDS - 500, start=1000)  # produce keeps working
        time.sleep(2)  # several upload attempts fail meanwhile
        before = remote_segments(proc, topic)
        local = local_segments(proc, topic)
        uploaded_end = max(s["end_offset"] for s in before) + 1
        assert int(local[0].name.split(".")[0]) < uploaded_end + 1, "nothing unuploaded deleted"
        assert watermarks(proc, topic) == (0, RECORDS + 500)

        # reads of the remote part fail (retriable) and return nothing wrong; the local part
        # is still served
        reader = reading(proc, topic)
        early = drain(reader, 3)
        assert early == [], "nothing from the remote part while the store is down"
        local_start = first_local(proc, topic)
        assert consume_from(proc, topic, local_start, 10)[0][0] == local_start

        s3 = EmbeddedS3(
            tmp_path / "s3", port=port, admin=TEST_ADMIN
        ).start()  # back, with what it had
        wait_for(
            lambda: max(s["end_offset"] for s in remote_segments(proc, topic)) > uploaded_end,
            60,
            "uploads catching up",
        )
        got = early + drain(reader, 30, RECORDS + 500)  # the same consumer reads on
        reader.close()
        assert [o for o, _ in got] == list(range(RECORDS + 500))
    finally:
        proc.stop()
        s3.kill()


def test_delete_records_in_the_remote_tier(broker: BrokerProcess) -> None:
    topic = unique("tiered-delrec")
    create_topic(broker, topic)
    produce(broker, topic, RECORDS)
    wait_tiered(broker, topic)
    target = 500  # below the local log start: in the remote tier
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    result = admin.delete_records([TopicPartition(topic, 0, target)])
    low = next(iter(result.values())).result(30)
    assert low.low_watermark == target
    assert watermarks(broker, topic) == (target, RECORDS)
    got = consume_all(broker, topic, RECORDS - target)
    assert [o for o, _ in got] == list(range(target, RECORDS))
    wait_for(
        lambda: all(s["end_offset"] >= target for s in remote_segments(broker, topic)),
        30,
        "remote segments below the new log start deleted",
    )


@pytest.mark.parametrize(("where", "at"), [("records", 40), ("base offset", 6)])
def test_a_corrupted_object_is_never_served(
    broker: BrokerProcess, s3: EmbeddedS3, where: str, at: int
) -> None:
    """A flipped byte in an uploaded segment, in a part the batch CRC covers or in the base
    offset (which it does not): consumers get retriable errors for that range, never its
    records; once the object is whole again the same consumer reads on."""
    topic = unique("tiered-corrupt")
    create_topic(broker, topic)
    produce(broker, topic, RECORDS)
    wait_tiered(broker, topic)

    def remote_only() -> list[dict[str, Any]] | None:
        local_start = int(local_segments(broker, topic)[0].name.split(".")[0])
        found = [s for s in remote_segments(broker, topic) if s["end_offset"] < local_start]
        return sorted(found, key=lambda s: s["base_offset"]) if len(found) >= 3 else None

    victim = wait_for(remote_only, 60, "three segments only in the remote tier")[1]
    store = bucket(s3)
    key = next(
        k.key for k in store.list("") if victim["segment_id"] in k.key and k.key.endswith(".log")
    )
    original = store.get(key)
    position = 0
    while position < len(original) // 2:  # a batch in the middle of the object
        position += parse_header(original, position).size
    damaged = bytearray(original)
    damaged[position + at] ^= 0xFF
    store.put(key, bytes(damaged))

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("corrupt"),
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.3):
                if msg.error() is None:
                    got.append((msg.offset(), msg.key()))
        offsets = [o for o, _ in got]
        assert offsets == list(range(len(offsets))), "in order, nothing skipped"
        assert all(k == b"%d" % o for o, k in got), "no wrong data"
        assert victim["base_offset"] <= len(got) <= victim["end_offset"], "stops in the segment"
        assert "the object is corrupted" in broker.logs()

        store.put(key, original)  # repaired: the reader drops its cached chunks and refetches
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.3):
                if msg.error() is None:
                    got.append((msg.offset(), msg.key()))
    finally:
        consumer.close()
    assert [o for o, _ in got] == list(range(RECORDS))
    assert all(k == b"%d" % o for o, k in got)
