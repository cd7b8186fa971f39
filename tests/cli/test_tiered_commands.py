"""cloudctl and tiered storage: describe-topic shows hot and tiered bytes; find-orphans lists
objects in the cluster's bucket that no segment record names, and removes only those."""

from __future__ import annotations

import json
import time

from tests.cli.conftest import Cloud
from tests.controlplane.harness import wait_until
from tiered.object_store import S3ObjectStore

RECORDS = 3000


def produce(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4000})
    for i in range(RECORDS):
        producer.produce(topic, key=b"%d" % i, value=b"v" * 200)
        producer.poll(0)
    assert producer.flush(30) == 0


def count_from_zero(bootstrap: str, topic: str) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"c{time.monotonic_ns()}"})
    offsets: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while len(offsets) < RECORDS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    offsets.add(msg.offset())
    finally:
        consumer.close()
    return len(offsets)


def test_tiered_bytes_and_orphans(cloud: Cloud) -> None:
    created = cloud.run(
        "create-cluster",
        "tiers",
        "--brokers",
        "1",
        "--config",
        "remote.log.manager.task.interval.ms=200",
        "--config",
        "log.retention.check.interval.ms=200",
        "--wait",
        "-o",
        "json",
    )
    assert created.returncode == 0, created.stderr
    made = cloud.run(
        "create-topic",
        "--cluster",
        "tiers",
        "history",
        "--partitions",
        "1",
        "--config",
        "remote.storage.enable=true",
        "--config",
        "segment.bytes=40000",
        "--config",
        "local.retention.bytes=80000",
    )
    assert made.returncode == 0, made.stderr
    bootstrap = cloud.run("get-bootstrap-brokers", "tiers").stdout.strip()
    produce(bootstrap, "history")

    def described() -> dict[str, object] | None:
        out = cloud.invoke("describe-topic", "--cluster", "tiers", "history", "-o", "json")
        topic = json.loads(out.stdout)
        return topic if topic["tiered_segments"] >= 5 else None

    topic = wait_until(described, 60, "segments in the object store")
    assert isinstance(topic["tiered_bytes"], int)
    assert topic["tiered_bytes"] > 0
    assert isinstance(topic["hot_bytes"], int)
    assert topic["hot_bytes"] > 0
    table = cloud.invoke("describe-topic", "--cluster", "tiers", "history").stdout
    storage = next(line for line in table.splitlines() if line.startswith("storage:"))
    assert "hot" in storage
    assert "tiered" in storage

    status = json.loads(cloud.invoke("describe-cluster", "tiers", "-o", "json").stdout)
    cluster_id = status["cluster_id"]
    endpoint = json.loads(cloud.invoke("status", "-o", "json").stdout)["object_store"]["endpoint"]
    from tiered.config import ObjectStoreSettings

    store = S3ObjectStore(
        ObjectStoreSettings(
            endpoint=endpoint,
            bucket=status["object_store"]["bucket"],
            access_key_id="sluice",
            secret_access_key="sluice-embedded",
        )
    )
    real = next(info.key for info in store.list(f"{cluster_id}/"))
    stray_segment = real.rsplit("/", 1)[0] + "/00000000000000000000-" + "f" * 32 + ".log"
    stray_other = f"{cluster_id}/notes.txt"
    store.put(stray_segment, b"left by a dead leader")
    store.put(stray_other, b"?")

    found = cloud.invoke(
        "find-orphans", "--cluster", "tiers", "--min-age-seconds", "0", "-o", "json"
    )
    assert found.exit_code == 0, found.output
    report = json.loads(found.stdout)
    assert {o["key"]: o["reason"] for o in report["orphans"]} == {
        stray_segment: "unknown segment",
        stray_other: "unparseable",
    }
    assert report["deleted"] is False
    young = json.loads(cloud.invoke("find-orphans", "--cluster", "tiers", "-o", "json").stdout)
    assert young["orphans"] == [], "objects younger than --min-age-seconds are left out"

    removed = cloud.invoke(
        "find-orphans", "--cluster", "tiers", "--min-age-seconds", "0", "--delete"
    )
    assert removed.exit_code == 0, removed.output
    assert "2 orphaned object(s)" in removed.stdout
    assert "deleted" in removed.stdout
    assert not store.exists(stray_segment)
    assert not store.exists(stray_other)
    assert store.exists(real)
    assert count_from_zero(bootstrap, "history") == RECORDS
