"""A group's coordinator killed mid-session moves, and committed offsets survive.

On a 3-broker cluster: a confluent-kafka consumer group reads a 3-partition RF=3 topic,
committing synchronously; its coordinator (the leader of the group's ``__consumer_offsets``
partition) is killed with SIGKILL while it reads. The consumer must go on (it finds the new
coordinator) and commit again; once everything is read, a new consumer of the group gets
nothing, and the committed offsets equal the end offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import unique
from tests.support.cluster_workload import admin_client, create_topic, end_offsets, wait_for
from tests.support.sluice_cluster import SluiceCluster

RECORDS = 3000
PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SluiceCluster]:
    sluice = SluiceCluster(tmp_path, brokers=3)
    sluice.start()
    try:
        yield sluice
    finally:
        sluice.stop()


def coordinator_of(bootstrap: str, group: str) -> int:
    admin = admin_client(bootstrap)
    (future,) = admin.describe_consumer_groups([group], request_timeout=10).values()
    return int(future.result(timeout=15).coordinator.id)


def test_coordinator_moves_and_offsets_survive(
    cluster: SluiceCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic, group = unique("coord"), unique("group")
    create_topic(cluster.bootstrap, topic, partitions=PARTITIONS, replication=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0

    config = {
        "bootstrap.servers": cluster.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "log_level": 0,
    }
    consumer = Consumer(config)
    consumer.subscribe([topic])
    seen: list[int] = []
    killed_at = 0.0
    commit_after_kill: float | None = None
    victim = -1
    deadline = time.monotonic() + 120
    while len(set(seen)) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error():
            continue
        seen.append(int(message.value()))
        if len(seen) % 100:
            continue
        try:
            consumer.commit(asynchronous=False)
        except Exception:
            continue
        if killed_at and commit_after_kill is None:
            commit_after_kill = time.monotonic() - killed_at
            cluster.start(victim, wait=False)
        if not killed_at and len(seen) >= RECORDS // 2:
            victim = coordinator_of(cluster.bootstrap, group)
            cluster.kill(victim)
            killed_at = time.monotonic()
    wait_for(lambda: _commit(consumer), 60, "a final commit")
    consumer.close()
    assert killed_at, "the coordinator was never killed"
    assert commit_after_kill is not None, "no commit succeeded after the coordinator died"
    assert set(seen) == set(range(RECORDS)), "records missing"
    with capsys.disabled():
        print(
            f"\ncoordinator {victim} killed; first commit after it {commit_after_kill:.2f} s "
            f"later; {len(seen) - RECORDS} record(s) redelivered"
        )

    ends = end_offsets(cluster.bootstrap, topic, PARTITIONS)
    fresh = Consumer({**config, "auto.offset.reset": "earliest"})
    committed = fresh.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
    assert {tp.partition: tp.offset for tp in committed} == ends
    fresh.subscribe([topic])
    leftover = [m for m in (fresh.poll(0.5) for _ in range(10)) if m and not m.error()]
    fresh.close()
    assert leftover == [], "a new member of the group re-read committed records"


def _commit(consumer: object) -> bool:
    try:
        consumer.commit(asynchronous=False)  # type: ignore[attr-defined]
    except Exception as exc:
        return "NO_OFFSET" in str(exc)  # nothing new to commit: the last commit holds
    return True
