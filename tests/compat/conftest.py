"""Compatibility fixtures: the same tests run against Sluice and against Apache Kafka.

``target`` is parametrized over ``sluice`` and ``kafka``. Apache Kafka (the oracle) is a
real 4.x KRaft node fetched from Maven Central by ``make java-deps``; where it cannot be
had the ``kafka`` half of each test skips with the reason.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerProcess
from tests.support.kafka_oracle import KafkaOracle, oracle_available

SHARED_SETTINGS = {
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    # timed-out transactions are aborted within a second on both (Kafka's default: 10 s)
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


@dataclass(frozen=True)
class Target:
    name: str
    bootstrap: str


@pytest.fixture(scope="session")
def kafka_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaOracle]:
    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    with KafkaOracle(tmp_path_factory.mktemp("oracle"), extra_config=SHARED_SETTINGS) as kafka:
        yield kafka


@pytest.fixture(scope="session")
def sluice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("compat") / "data", SHARED_SETTINGS).start()
    yield proc
    proc.stop()
    proc.kill()


@pytest.fixture(params=["sluice", "kafka"])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "kafka":
        oracle: KafkaOracle = request.getfixturevalue("kafka_oracle")
        return Target("kafka", oracle.bootstrap)
    proc: BrokerProcess = request.getfixturevalue("sluice")
    return Target("sluice", proc.bootstrap)


@pytest.fixture
def both(request: pytest.FixtureRequest) -> dict[str, str]:
    """Bootstrap addresses of both systems, for tests that compare answers directly."""
    proc: BrokerProcess = request.getfixturevalue("sluice")
    oracle: KafkaOracle = request.getfixturevalue("kafka_oracle")
    return {"sluice": proc.bootstrap, "kafka": oracle.bootstrap}


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    for future in futures.values():
        future.result(timeout=30)
    # Kafka answers CreateTopics once its controller committed the topic; the broker asked
    # next may not know it yet (UNKNOWN_TOPIC_OR_PART): until it is listed with leaders
    deadline = time.monotonic() + 30
    while True:
        found = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        assert time.monotonic() < deadline, f"topic {name} not in the metadata: {found}"
        time.sleep(0.1)


def kcat_binary() -> str:
    found = shutil.which("kcat") or shutil.which("kafkacat")
    if found is None:
        pytest.skip("kcat is not installed and could not be (tools/ensure-system-deps.sh)")
    return found
