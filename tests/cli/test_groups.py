"""Consumer groups through cloudctl (the Groups service) against real consumers: a live
confluent-kafka member and Apache Kafka's Java client (tools/java/ClientHarness.java).

Lag is the end offset minus the committed offset; offsets are reset only while the group has
no member (kafka-consumer-groups' rule and message), and the next consumer of the group starts
where the reset put it; a group with members is not deleted."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cli.conftest import SHARED_CLUSTER, Cloud
from tests.controlplane.harness import wait_until
from tests.support.java_client import java_available, run_java_client

CLUSTER = SHARED_CLUSTER
TOPIC = "grp-orders"
JAVA_TOPIC = "grp-java"
RECORDS = 30
BASE_MS = int((time.time() - 3600) * 1000)
"""Timestamp of the Java topic's first record; record i is i seconds later."""


def cli(cloud: Cloud, *args: str) -> Any:
    done = cloud.run(*args, "-o", "json")
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def describe(cloud: Cloud, group: str) -> dict[str, Any]:
    found: dict[str, Any] = cli(cloud, "describe-group", "--cluster", CLUSTER, group)
    return found


def by_partition(group: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {p["partition"]: p for p in group["partitions"]}


@pytest.fixture(scope="module")
def bootstrap(shared_cloud: Cloud) -> str:
    for topic, partitions in ((TOPIC, 3), (JAVA_TOPIC, 1)):
        cli(
            shared_cloud,
            "create-topic",
            "--cluster",
            CLUSTER,
            topic,
            "--partitions",
            str(partitions),
        )
    servers: str = cli(shared_cloud, "get-bootstrap-brokers", CLUSTER)["bootstrap_brokers"]
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for i in range(RECORDS):
        for p in range(3):
            producer.produce(TOPIC, value=f"{p}-{i}".encode(), partition=p)
        producer.produce(
            JAVA_TOPIC, value=f"j-{i}".encode(), partition=0, timestamp=BASE_MS + i * 1000
        )
    assert producer.flush(30) == 0
    return servers


def consumer(servers: str, group: str, reset: str = "earliest") -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "client.id": "grp-client",
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
            "log_level": 3,
        }
    )


def test_lag_and_refusals_with_a_live_member(shared_cloud: Cloud, bootstrap: str) -> None:
    member = consumer(bootstrap, "grp-cg")
    member.subscribe([TOPIC])

    def assigned() -> bool:
        member.poll(0.2)
        return len(member.assignment()) == 3

    wait_until(assigned, 60, "the member's assignment")
    member.commit(
        offsets=[TopicPartition(TOPIC, 0, 10), TopicPartition(TOPIC, 1, 20)], asynchronous=False
    )
    try:
        group = describe(shared_cloud, "grp-cg")
        assert (group["state"], group["protocol_type"]) == ("Stable", "consumer")
        (only,) = group["members"]
        assert only["client_id"] == "grp-client"
        assert only["client_host"].endswith("127.0.0.1")
        assert only["assignment"] == [{"topic": TOPIC, "partitions": [0, 1, 2]}]
        parts = by_partition(group)
        assert [(parts[p]["committed_offset"], parts[p]["end_offset"]) for p in range(3)] == [
            (10, RECORDS),
            (20, RECORDS),
            (-1, RECORDS),
        ]
        for p in (0, 1):
            assert parts[p]["lag"] == parts[p]["end_offset"] - parts[p]["committed_offset"]
        assert parts[2]["lag"] is None, "nothing committed: no lag"
        assert group["total_lag"] == 20 + 10
        assert {parts[p]["client_id"] for p in range(3)} == {"grp-client"}
        table = shared_cloud.run("describe-group", "--cluster", CLUSTER, "grp-cg").stdout
        assert "total lag:    30" in table

        refused = shared_cloud.run(
            "reset-offsets", "--cluster", CLUSTER, "grp-cg", "--topic", TOPIC, "--to-earliest"
        )
        assert refused.returncode == 1
        assert (
            "assignments can only be reset if the group 'grp-cg' is inactive, but the current "
            "state is Stable"
        ) in refused.stderr
        not_deleted = shared_cloud.run("delete-group", "--cluster", CLUSTER, "grp-cg")
        assert not_deleted.returncode == 1
        assert "has active members" in not_deleted.stderr
    finally:
        member.close()

    wait_until(lambda: describe(shared_cloud, "grp-cg")["state"] == "Empty", 30, "an empty group")
    reset = cli(
        shared_cloud, "reset-offsets", "--cluster", CLUSTER, "grp-cg", "--topic", TOPIC,
        "--to-offset", "5",
    )  # fmt: skip
    assert [(o["partition"], o["previous_offset"], o["new_offset"]) for o in reset["offsets"]] == [
        (0, 10, 5),
        (1, 20, 5),
        (2, -1, 5),
    ]
    after = by_partition(describe(shared_cloud, "grp-cg"))
    assert [after[p]["lag"] for p in range(3)] == [RECORDS - 5] * 3

    nxt = consumer(bootstrap, "grp-cg", reset="latest")  # only the committed offsets count
    nxt.subscribe([TOPIC])
    first: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while len(first) < 3 and time.monotonic() < deadline:
            msg = nxt.poll(0.5)
            if msg is not None and msg.error() is None:
                first.setdefault(int(msg.partition() or 0), int(msg.offset() or 0))
    finally:
        nxt.close()
    assert first == {0: 5, 1: 5, 2: 5}, "the next consumer starts where the reset put it"

    listed = cli(shared_cloud, "list-groups", "--cluster", CLUSTER)
    assert {"group_id": "grp-cg", "state": "Empty", "protocol_type": "consumer"}.items() <= next(
        g for g in listed["groups"] if g["group_id"] == "grp-cg"
    ).items()


def java_consume(bootstrap: str, group: str, count: int) -> list[dict[str, Any]]:
    """The Java client consumes ``count`` records of the group's topic and commits."""
    return run_java_client(
        [
            "consume", "--bootstrap", bootstrap, "--topic", JAVA_TOPIC, "--group", group,
            "--count", str(count), "--config", f"max.poll.records={count}",
        ]
    )  # fmt: skip


def test_the_java_client_sees_every_reset(shared_cloud: Cloud, bootstrap: str) -> None:
    reason = java_available()
    if reason:
        pytest.skip(reason)
    group = "grp-java"
    read = java_consume(bootstrap, group, 7)
    assert [r["offset"] for r in read] == list(range(7))
    (part,) = describe(shared_cloud, group)["partitions"]
    assert (part["committed_offset"], part["end_offset"], part["lag"]) == (7, RECORDS, RECORDS - 7)

    def reset(*how: str) -> int:
        done = cli(
            shared_cloud, "reset-offsets", "--cluster", CLUSTER, group, "--topic", JAVA_TOPIC, *how
        )
        (offset,) = done["offsets"]
        return int(offset["new_offset"])

    assert reset("--to-offset", "20") == 20
    assert java_consume(bootstrap, group, 1)[0]["offset"] == 20
    assert reset("--shift-by", "-5") == 16, "the Java client committed 21"
    assert java_consume(bootstrap, group, 1)[0]["offset"] == 16
    at = datetime.datetime.fromtimestamp((BASE_MS + 10_000) / 1000, tz=datetime.UTC)
    assert reset("--to-datetime", at.isoformat().replace("+00:00", "Z")) == 10
    assert java_consume(bootstrap, group, 1)[0]["offset"] == 10
    assert reset("--to-offset", "1000") == RECORDS, "clamped to the end"
    assert reset("--to-earliest", "--dry-run") == 0
    (unchanged,) = describe(shared_cloud, group)["partitions"]
    assert unchanged["committed_offset"] == RECORDS, "--dry-run commits nothing"
    assert reset("--to-latest") == RECORDS

    deleted = cli(shared_cloud, "delete-group", "--cluster", CLUSTER, group)
    assert deleted == {"cluster": CLUSTER, "group_id": group, "existed": True, "deleted": True}
    gone = shared_cloud.run("describe-group", "--cluster", CLUSTER, group)
    assert gone.returncode == 1
    assert "not found" in gone.stderr
    again = shared_cloud.run("delete-group", "--cluster", CLUSTER, group, "--if-exists")
    assert again.returncode == 0
