"""cloudctl and tiered storage, against a real control plane, broker and embedded S3:
describe-topic and list-topics show hot and tiered bytes; find-orphans lists the objects in
the cluster's bucket that no segment record names, and --delete removes only those."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from controlplane.kafka import Admin
from tests.cli.conftest import Cloud
from tests.controlplane.harness import wait_until
from tiered.access_keys import KEYS_FILE, KeyFile
from tiered.config import ObjectStoreSettings
from tiered.layout import parse_key
from tiered.object_store import S3ObjectStore

CLUSTER = "tiers"
TOPIC = "history"
RECORDS = 3000
VALUE = b"v" * 200


def produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4000})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"%d" % i, value=VALUE)
        producer.poll(0)
    assert producer.flush(30) == 0


def offsets_from_zero(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"c{time.monotonic_ns()}"})
    offsets: list[int] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while len(offsets) < RECORDS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    assert msg.value() == VALUE
                    offsets.append(msg.offset())
    finally:
        consumer.close()
    return offsets


def describe_remote_log(bootstrap: str) -> dict[str, Any]:
    """Sluice's DescribeRemoteLog, asked of the broker directly (not through the control
    plane)."""
    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    return asyncio.run(Admin(host, int(port), 10).describe_remote_log([TOPIC]))


def finished(doc: dict[str, Any]) -> tuple[int, int]:
    """Bytes and count of the readable segments of partition 0."""
    segments = [
        s
        for s in doc["topics"][TOPIC]["partitions"].get("0", {}).get("segments", [])
        if s["state"] == "copy_finished"
    ]
    return sum(s["size_bytes"] for s in segments), len(segments)


def remote_end(doc: dict[str, Any]) -> int:
    """One past the last offset the object store holds of partition 0 (0: nothing)."""
    segments = doc["topics"][TOPIC]["partitions"].get("0", {}).get("segments", [])
    return max((s["end_offset"] + 1 for s in segments if s["state"] == "copy_finished"), default=0)


def test_tiered_bytes_and_orphans(cloud: Cloud) -> None:
    created = cloud.run(
        "create-cluster",
        CLUSTER,
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
        CLUSTER,
        TOPIC,
        "--partitions",
        "1",
        "--config",
        "remote.storage.enable=true",
        "--config",
        "segment.bytes=20000",
        "--config",
        "local.retention.bytes=40000",
    )
    assert made.returncode == 0, made.stderr
    bootstrap = cloud.run("get-bootstrap-brokers", CLUSTER).stdout.strip()
    produce(bootstrap)

    def described() -> dict[str, Any]:
        out = cloud.invoke("describe-topic", "--cluster", CLUSTER, TOPIC, "-o", "json")
        assert out.exit_code == 0, out.output
        topic: dict[str, Any] = json.loads(out.stdout)
        return topic

    cluster = json.loads(cloud.invoke("describe-cluster", CLUSTER, "-o", "json").stdout)
    partition_dir = Path(cluster["brokers"][0]["data_dir"]) / f"{TOPIC}-0"

    def settled() -> dict[str, Any] | None:
        # every closed segment copied: the remote tier ends where the active segment begins
        # (it stays local), so nothing is uploaded from now on
        active = max(int(f.stem) for f in partition_dir.glob("*.log"))
        doc = describe_remote_log(bootstrap)
        if remote_end(doc) != active:
            return None
        topic = described()
        return topic if (topic["tiered_bytes"], topic["tiered_segments"]) == finished(doc) else None

    topic = wait_until(settled, 90, "closed segments in the object store, as the broker says")
    assert topic["tiered_segments"] >= 5
    assert topic["tiered_bytes"] > 0
    assert topic["hot_bytes"] > 0
    assert topic["hot_bytes"] + topic["tiered_bytes"] >= RECORDS * len(VALUE), (
        "every record is in one tier or both"
    )
    (part,) = topic["partition_details"]
    assert part["remote_log_start_offset"] == 0, "no remote retention: the tier starts at 0"
    assert (part["tiered_bytes"], part["tiered_segments"]) == (
        topic["tiered_bytes"],
        topic["tiered_segments"],
    )
    listed = json.loads(cloud.invoke("list-topics", "--cluster", CLUSTER, "-o", "json").stdout)
    (entry,) = [t for t in listed["topics"] if t["name"] == TOPIC]
    assert (entry["tiered_bytes"], entry["tiered_segments"]) == (
        topic["tiered_bytes"],
        topic["tiered_segments"],
    )
    assert entry["hot_bytes"] > 0
    table = cloud.invoke("describe-topic", "--cluster", CLUSTER, TOPIC).stdout
    storage = next(line for line in table.splitlines() if line.startswith("storage:"))
    assert "hot per replica" in storage
    assert f"tiered ({topic['tiered_segments']} segments in the object store)" in storage
    assert "REMOTE START" in table

    # strays, put straight into the cluster's bucket
    admin = KeyFile(cloud.home / "s3" / KEYS_FILE).admin()  # the control plane's key
    assert admin is not None
    store = S3ObjectStore(
        ObjectStoreSettings(
            endpoint=cluster["object_store"]["endpoint"],
            bucket=cluster["object_store"]["bucket"],
            access_key_id=admin.access_key_id,
            secret_access_key=admin.secret_access_key,
        )
    )
    prefix = f"{cluster['cluster_id']}/"
    before = {info.key for info in store.list(prefix)}
    real = sorted(before)[0]
    parsed = parse_key(real)
    assert parsed is not None
    assert parsed.topic == TOPIC
    stray_segment = f"{real.rsplit('/', 1)[0]}/{0:020d}-{uuid.uuid4().hex}.log"
    stray_topic = f"{prefix}{TOPIC}-{uuid.uuid4()}/0/{0:020d}-{uuid.uuid4().hex}.index"
    stray_other = f"{prefix}notes.txt"
    store.put(stray_segment, b"left by a dead leader")
    store.put(stray_topic, b"of a topic long gone")
    store.put(stray_other, b"?")
    strays = {
        stray_segment: "unknown segment",
        stray_topic: "deleted topic",
        stray_other: "unparseable",
    }

    found = cloud.invoke(
        "find-orphans", "--cluster", CLUSTER, "--min-age-seconds", "0", "-o", "json"
    )
    assert found.exit_code == 0, found.output
    report = json.loads(found.stdout)
    assert {o["key"]: o["reason"] for o in report["orphans"]} == strays
    assert report["total_bytes"] == 21 + 20 + 1
    assert (report["count"], report["scanned"], report["deleted"]) == (3, len(before) + 3, False)
    assert (report["bucket"], report["prefix"]) == (cluster["object_store"]["bucket"], prefix)
    assert all(o["last_modified"].endswith("Z") for o in report["orphans"])
    assert {info.key for info in store.list(prefix)} == before | set(strays), "nothing deleted"

    young = json.loads(cloud.invoke("find-orphans", "--cluster", CLUSTER, "-o", "json").stdout)
    assert young["orphans"] == [], "objects younger than --min-age-seconds (300) are left out"
    assert young["too_young"] == 3

    removed = cloud.run("find-orphans", "--cluster", CLUSTER, "--min-age-seconds", "0", "--delete")
    assert removed.returncode == 0, removed.stderr
    assert "3 orphaned objects deleted (42 B)" in removed.stdout
    assert all(key in removed.stdout for key in strays)
    assert {info.key for info in store.list(prefix)} == before, "exactly the orphans went"
    again = json.loads(
        cloud.invoke(
            "find-orphans", "--cluster", CLUSTER, "--min-age-seconds", "0", "-o", "json"
        ).stdout
    )
    assert again["orphans"] == []

    offsets = offsets_from_zero(bootstrap)
    assert sorted(offsets) == list(range(RECORDS)), "the topic is whole from offset 0"


def test_find_orphans_errors(cloud: Cloud) -> None:
    missing = cloud.invoke("find-orphans", "--cluster", "nope")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("cloudctl: error: cluster 'nope' not found")
    bad = cloud.invoke("find-orphans", "--cluster", "nope", "--min-age-seconds", "-1")
    assert bad.exit_code == 2
