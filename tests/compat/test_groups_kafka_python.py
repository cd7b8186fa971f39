"""Consumer groups with kafka-python: subscribe, commit, a second member joins.

kafka-python speaks JoinGroup v7 (member id required), SyncGroup v5, OffsetCommit v8 and
OffsetFetch v8 (the multi-group form).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.conftest import BrokerProcess, unique

PARTITIONS = 6
DEADLINE = 60.0


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("groups-kp") / "data",
        {"auto.create.topics.enable": "true", "num.partitions": str(PARTITIONS)},
    ).start()
    yield proc
    proc.stop()
    proc.kill()


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value.encode(), partition=i % PARTITIONS)
        producer.flush(30)
    finally:
        producer.close()


def consumer(bootstrap: str, group: str, topic: str) -> Any:
    """A member subscribed to ``topic`` once it knows the topic's partitions.

    kafka-python 3.0.12 can hang in a rebalance when its first join completes before its
    first metadata answer: the leader assigns nothing ("No partition metadata"), rejoins at
    once when the metadata arrives, and from then on neither heartbeats nor joins again
    (seen 1 in 9 runs; the coordinator expires the member 6 s later and the consumer never
    comes back). Fetching the topic's metadata before subscribing, as an application that
    checks its topic at start does, keeps the first assignment whole."""
    member = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
        metadata_max_age_ms=1000,
    )
    deadline = time.monotonic() + DEADLINE
    while len(member.partitions_for_topic(topic)) < PARTITIONS:
        assert time.monotonic() < deadline, f"{topic}: no metadata in {DEADLINE} s"
        time.sleep(0.1)
    member.subscribe([topic])
    return member


def poll(consumers: list[Any], received: dict[int, list[str]]) -> None:
    for i, c in enumerate(consumers):
        for records in c.poll(timeout_ms=100).values():
            received.setdefault(i, []).extend(r.value.decode() for r in records)


def poll_apart(members: list[Any], received: dict[int, list[str]]) -> list[set[int]]:
    """Poll each member in a thread of its own until the partitions are split between them
    (or the deadline); the partitions each member owns then."""
    deadline = time.monotonic() + DEADLINE
    lock = threading.Lock()

    def owned() -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for c in members]

    def split() -> bool:
        now = owned()
        return all(now) and sum(len(s) for s in now) == PARTITIONS

    def run(i: int) -> None:
        while time.monotonic() < deadline and not split():
            for records in members[i].poll(timeout_ms=100).values():
                with lock:
                    received.setdefault(i, []).extend(r.value.decode() for r in records)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(members))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return owned()


def distinct(received: dict[int, list[str]]) -> set[str]:
    return {v for values in received.values() for v in values}


def test_kafka_python_group_commit_and_second_member(group_broker: BrokerProcess) -> None:
    topic, group = unique("kp-topic"), unique("kp-group")
    first = [f"a{i}" for i in range(24)]
    produce(group_broker.bootstrap, topic, first)

    one = consumer(group_broker.bootstrap, group, topic)
    two: Any = None
    try:
        received: dict[int, list[str]] = {}
        deadline = time.monotonic() + DEADLINE
        while distinct(received) != set(first) and time.monotonic() < deadline:
            poll([one], received)
        assert sorted(received[0]) == sorted(first)
        one.commit()
        committed = {p: one.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
        assert committed == dict.fromkeys(range(PARTITIONS), 4)

        # A second member joins: the group rebalances and splits the partitions. Each member
        # polls in its own thread, as applications do: kafka-python 3.0.12 drops a join
        # that completes while its consumer is not inside poll() and joins again (its
        # join_group_async re-sends when the cached task is done), so polling two members
        # in turn from one thread can make the leader rejoin after every rebalance.
        two = consumer(group_broker.bootstrap, group, topic)
        members = [one, two]
        after: dict[int, list[str]] = {}
        owned = poll_apart(members, after)
        assert set().union(*owned) == set(range(PARTITIONS))
        assert not owned[0] & owned[1]
        assert after == {}, "committed records were delivered again"

        second = [f"b{i}" for i in range(12)]
        produce(group_broker.bootstrap, topic, second)
        deadline = time.monotonic() + DEADLINE
        while distinct(after) != set(second) and time.monotonic() < deadline:
            poll(members, after)
        assert sorted(v for values in after.values() for v in values) == sorted(second)
        assert set(after) == {0, 1}, "both members consume"
    finally:
        for c in (one, two):
            if c is not None:
                c.close()
