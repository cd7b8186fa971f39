"""Smoke test of the reference-implementation tooling: a real Apache Kafka (KafkaOracle), Kafka's
Java client (tools/java/ClientHarness.java) and kcat all work against each other."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.java_client import java_available, run_java_client
from tests.support.kafka_oracle import KafkaOracle, oracle_available

pytestmark = pytest.mark.oracle

TOPIC = "smoke"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaOracle]:
    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    with KafkaOracle(tmp_path_factory.mktemp("kafka-oracle")) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
            future.result(timeout=30)
        yield kafka


@pytest.fixture
def java() -> None:
    reason = java_available()
    if reason:
        pytest.skip(reason)


def test_topic_created_with_confluent_admin(oracle: KafkaOracle) -> None:
    md = AdminClient({"bootstrap.servers": oracle.bootstrap}).list_topics(timeout=10)
    assert TOPIC in md.topics
    assert len(md.topics[TOPIC].partitions) == 3


@pytest.mark.usefixtures("java")
def test_java_produce_then_consume(oracle: KafkaOracle) -> None:
    base = ["--bootstrap", oracle.bootstrap, "--topic", TOPIC]
    acks = run_java_client(["produce", *base, "--count", "10", "--headers", "--compression", "lz4"])
    assert [a["key"] for a in acks] == [f"k{i}" for i in range(10)]
    assert all(a["offset"] >= 0 and 0 <= a["partition"] < 3 for a in acks)

    records = run_java_client(["consume", *base, "--group", "smoke-g", "--count", "10"])
    assert sorted(r["key"] for r in records) == sorted(f"k{i}" for i in range(10))
    for r in records:
        i = r["key"][1:]
        assert r["value"] == f"v{i}"
        assert r["headers"] == [["h", i]]
    assert {(a["partition"], a["offset"]) for a in acks} == {
        (r["partition"], r["offset"]) for r in records
    }


@pytest.mark.usefixtures("java")
def test_java_admin_describe_topic(oracle: KafkaOracle) -> None:
    [desc] = run_java_client(["admin", "--bootstrap", oracle.bootstrap, "describe-topic", TOPIC])
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["isr"] == [1] for p in desc["partitions"])


def test_kcat_metadata(oracle: KafkaOracle) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat/kafkacat not installed (tools/ensure-system-deps.sh installs it)")
    out = subprocess.run(
        [kcat, "-b", oracle.bootstrap, "-L", "-J", "-t", TOPIC],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    md = json.loads(out.stdout)
    assert [b["id"] for b in md["brokers"]] == [1]
    [topic] = md["topics"]
    assert topic["topic"] == TOPIC
    assert len(topic["partitions"]) == 3
