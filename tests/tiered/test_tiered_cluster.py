"""Tiered storage on a 3-broker cluster: the leader of a tiered partition is killed with -9
mid-stream; the new leader goes on uploading from where the remote tier ends (nothing
uploaded twice), cleans up what the dead leader left, and leaves no object that the remote
metadata does not name; the restarted broker, far behind the leader's local log start,
starts its log there (OFFSET_MOVED_TO_TIERED_STORAGE) and rejoins the ISR; every
acknowledged record is read back from offset 0 across both tiers."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from controlplane.kafka import Admin, on_any
from tests.conftest import unique
from tests.support.cluster_workload import (
    admin_client,
    create_topic,
    leader_of,
    wait_for,
    wait_in_isr,
    wait_out_of_isr,
)
from tests.support.sluice_cluster import SluiceCluster
from tests.support.tiering import TOPIC_CONFIG, broker_settings
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.layout import parse_key
from tiered.object_store import S3ObjectStore

from .test_broker_tiering import BUCKET

RECORDS = 2500


def describe(bootstrap: str) -> dict[str, Any]:
    """DescribeRemoteLog from the first live broker (any answers)."""

    @dataclass(frozen=True)
    class Address:
        broker_id: int
        host: str
        port: int
        credentials: None = None

    brokers = [
        Address(i, a.split(":")[0], int(a.split(":")[1]))
        for i, a in enumerate(bootstrap.split(","))
    ]

    async def ask(admin: Admin) -> dict[str, Any]:
        return await admin.describe_remote_log(None)

    return asyncio.run(on_any(brokers, ask, 10, read_only=True))


def segments(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    part = describe(bootstrap)["topics"].get(topic, {}).get("partitions", {}).get("0", {})
    return list(part.get("segments", []))


def produce(bootstrap: str, topic: str, start: int, count: int) -> list[tuple[int, int]]:
    """acks=all, idempotent; (seq, offset) of every acknowledged record."""
    acked: list[tuple[int, int]] = []

    def delivered(err: object, msg: Any) -> None:
        if err is None:
            acked.append((int(msg.key()), msg.offset()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 4000,
            "log_level": 0,
        }
    )
    for i in range(start, start + count):
        producer.produce(topic, key=b"%d" % i, value=b"v" * 200, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def read_all(bootstrap: str, topic: str, expected: int) -> dict[int, int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("read"),
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    got: dict[int, int] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 90
        while len(got) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    assert msg.offset() not in got, "an offset read twice"
                    got[msg.offset()] = int(msg.key())
    finally:
        consumer.close()
    return got


def test_failover_continues_uploads_without_orphans(s3: EmbeddedS3, tmp_path: Path) -> None:
    settings = broker_settings(s3.endpoint, BUCKET)
    with SluiceCluster(tmp_path, brokers=3, settings=settings) as cluster:
        topic = unique("tiered-failover")
        create_topic(cluster.bootstrap, topic, partitions=1, replication=3, config=TOPIC_CONFIG)
        admin = admin_client(cluster.bootstrap)
        acked = produce(cluster.bootstrap, topic, 0, RECORDS)
        wait_for(
            lambda: len(segments(cluster.bootstrap, topic)) >= 5,
            60,
            "segments uploaded",
        )

        leader = leader_of(admin, topic, 0)
        cluster.kill(leader)
        wait_out_of_isr(admin, topic, 0, leader, 30)
        acked += produce(cluster.bootstrap, topic, RECORDS, RECORDS)
        end = max(offset for _, offset in acked) + 1

        def caught_up() -> bool:
            done = [s for s in segments(cluster.bootstrap, topic) if s["state"] == "copy_finished"]
            return max(s["end_offset"] for s in done) > RECORDS

        wait_for(caught_up, 60, "the new leader uploading")

        cluster.start(leader)
        wait_in_isr(admin, topic, leader, 90)
        # far behind the leader's local log start: it started there, with the producer
        # state uploaded with the segment that ends there
        logs = cluster.logs(leader, 2000)
        assert "are in the remote tier; starting the log there" in logs
        assert "producer state restored from the remote tier" in logs

        # nothing uploaded twice: finished segments do not start at the same offset, and
        # they cover [first, last] without holes
        def settled() -> list[dict[str, Any]] | None:
            found = segments(cluster.bootstrap, topic)
            if any(s["state"] != "copy_finished" for s in found):
                return None  # leftovers of the killed leader not cleaned up yet
            return found

        done = sorted(wait_for(settled, 60, "leftovers cleaned"), key=lambda s: s["base_offset"])
        bases = [s["base_offset"] for s in done]
        assert len(bases) == len(set(bases)), "a range was uploaded twice"
        for before, after in itertools.pairwise(done):
            assert after["base_offset"] <= before["end_offset"] + 1, "a hole in the remote tier"

        # no orphans: every object under the cluster's prefix is named by the metadata
        store = S3ObjectStore(
            ObjectStoreSettings(
                endpoint=s3.endpoint,
                bucket=BUCKET,
                access_key_id="test",
                secret_access_key="test",
            )
        )
        named = {s["segment_id"] for s in done}
        topic_id = describe(cluster.bootstrap)["topics"][topic]["topic_id"]
        for info in store.list(""):
            parsed = parse_key(info.key)
            assert parsed is not None, info.key
            if parsed.topic_id == topic_id:
                assert parsed.segment_id in named, f"orphan {info.key}"

        # every acknowledged record, once, at its offset, from offset 0
        got = read_all(cluster.bootstrap, topic, end)
        assert sorted(got) == list(range(end))
        for seq, offset in acked:
            assert got[offset] == seq
