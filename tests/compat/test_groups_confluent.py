"""Consumer groups with confluent-kafka (librdkafka): rebalances, commits, broker restart.

Three members share a six-partition topic; one leaves and the others take over; the
group's committed offsets survive a broker restart, so a new member resumes exactly
where the group stopped (nothing committed is delivered again).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from tests.conftest import BrokerProcess, unique

PARTITIONS = 6
SETTINGS = {"auto.create.topics.enable": "true", "num.partitions": str(PARTITIONS)}
DEADLINE = 60.0


def produce(bootstrap: str, topic: str, values: Iterable[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def consumer(bootstrap: str, group: str, topic: str) -> Any:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    c.subscribe([topic])
    return c


def poll_round(consumers: list[Any], received: dict[Any, list[str]]) -> None:
    for c in consumers:
        msg = c.poll(0.1)
        if msg is None:
            continue
        if msg.error() is not None:
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            continue
        received.setdefault(c, []).append(msg.value().decode())


def owned(c: Any) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def wait_until_balanced(consumers: list[Any], received: dict[Any, list[str]]) -> None:
    """Poll until every member owns partitions and together they own all of them."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        poll_round(consumers, received)
        sets = [owned(c) for c in consumers]
        if all(sets) and sum(len(s) for s in sets) == PARTITIONS:
            assert set().union(*sets) == set(range(PARTITIONS))
            return
    raise AssertionError(f"group never balanced: {[sorted(owned(c)) for c in consumers]}")


def distinct(received: dict[Any, list[str]]) -> set[str]:
    return {v for values in received.values() for v in values}


def consume_until(consumers: list[Any], received: dict[Any, list[str]], total: int) -> None:
    """Poll until ``total`` distinct values have arrived."""
    deadline = time.monotonic() + DEADLINE
    while len(distinct(received)) < total and time.monotonic() < deadline:
        poll_round(consumers, received)
    assert len(distinct(received)) >= total, f"received {len(distinct(received))} of {total}"


def test_confluent_group_rebalance_commit_and_restart(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker(SETTINGS)
    topic, group = unique("cg-topic"), unique("cg")
    first = [f"a{i}" for i in range(60)]
    produce(broker.bootstrap, topic, first)

    members = [consumer(broker.bootstrap, group, topic) for _ in range(3)]
    received: dict[Any, list[str]] = {}
    try:
        wait_until_balanced(members, received)
        consume_until(members, received, len(first))
        for c in members:
            c.commit(asynchronous=False)
        # Records read before the group settled may be read again by their new owner
        # (nothing was committed yet): at least once, so compare as sets here.
        assert distinct(received) == set(first)

        # One member leaves: the other two take over its partitions and keep consuming.
        leaver = members.pop()
        leaver.close()
        wait_until_balanced(members, received)
        second = [f"b{i}" for i in range(30)]
        produce(broker.bootstrap, topic, second)
        after: dict[Any, list[str]] = {}
        consume_until(members, after, len(second))
        assert sorted(v for vals in after.values() for v in vals) == sorted(second)
        for c in members:
            c.commit(asynchronous=False)
    finally:
        for c in members:
            c.close()

    broker.restart()
    third = [f"c{i}" for i in range(12)]
    produce(broker.bootstrap, topic, third)
    newcomer = consumer(broker.bootstrap, group, topic)
    try:
        resumed: dict[Any, list[str]] = {}
        consume_until([newcomer], resumed, len(third))
        # A little more polling: nothing already committed may come back.
        grace = time.monotonic() + 1.0
        while time.monotonic() < grace:
            poll_round([newcomer], resumed)
        assert sorted(resumed[newcomer]) == sorted(third)
    finally:
        newcomer.close()
