"""Apache Kafka's Java transactional producer against Sluice and against Apache Kafka 4.3
(the oracle), the same scenarios on both: commit, abort, a zombie fenced by its successor,
a transaction aborted by its timeout, offsets sent to a transaction. What read_committed
and read_uncommitted Java consumers then see, and the exceptions the producer gets, must
be the same."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.compat.conftest import Target, create_topic
from tests.conftest import unique
from tests.support.java_client import java_available, run_java_client


@pytest.fixture(autouse=True)
def _java() -> None:
    reason = java_available()
    if reason:
        pytest.skip(reason)


def txn(target: Target, mode: str, topic: str, tid: str, *extra: str) -> dict[str, Any]:
    head = ["txn", mode, "--bootstrap", target.bootstrap, "--topic", topic]
    lines = run_java_client([*head, "--transactional-id", tid, *extra])
    return lines[-1]


def values(target: Target, topic: str, isolation: str, count: int) -> list[str]:
    lines = run_java_client(
        [
            "consume",
            "--bootstrap",
            target.bootstrap,
            "--topic",
            topic,
            "--group",
            unique("reader"),
            "--count",
            str(count),
            "--timeout-ms",
            "15000",
            "--config",
            f"isolation.level={isolation}",
        ]
    )
    return sorted(str(r["value"]) for r in lines)


def test_commit_and_abort(target: Target) -> None:
    topic = unique("jtxn")
    create_topic(target.bootstrap, topic, 3)
    assert txn(target, "commit", topic, "kept", "--count", "30") == {"outcome": "commit"}
    assert txn(target, "abort", topic, "dropped", "--count", "20") == {"outcome": "abort"}
    assert txn(target, "commit", topic, "kept2", "--count", "5") == {"outcome": "commit"}
    committed = values(target, topic, "read_committed", 35)
    assert committed == sorted([f"kept-{i}" for i in range(30)] + [f"kept2-{i}" for i in range(5)])
    assert len(values(target, topic, "read_uncommitted", 55)) == 55


def test_a_zombie_is_fenced(target: Target) -> None:
    topic = unique("jzombie")
    create_topic(target.bootstrap, topic, 1)
    answer = txn(target, "zombie", topic, unique("tid"))
    # the zombie's late send is refused by the partition (its epoch is older), on both
    assert answer == {"successor": "committed", "zombie_error": "InvalidProducerEpochException"}
    assert values(target, topic, "read_committed", 1) == ["successor"]


def test_a_timed_out_transaction_is_aborted(target: Target) -> None:
    topic = unique("jtimeout")
    create_topic(target.bootstrap, topic, 1)
    answer = txn(
        target, "timeout", topic, unique("tid"), "--timeout-ms", "1500", "--wait-ms", "5000"
    )
    # both abort it and bump the epoch; the commit that comes too late fails on both
    assert answer == TIMEOUT_ANSWERS[target.name], answer
    assert txn(target, "commit", topic, "after", "--count", "1") == {"outcome": "commit"}
    assert values(target, topic, "read_committed", 1) == ["after-0"]


TIMEOUT_ANSWERS = {
    # transaction protocol version 1: EndTxn with the old epoch is PRODUCER_FENCED
    "sluice": {"commit_error": "ProducerFencedException"},
    # Kafka 4.3 runs version 2 (KIP-890), where the old epoch reads as a retry of the
    # abort and a commit after it is INVALID_TXN_STATE (measured)
    "kafka": {"commit_error": "InvalidTxnStateException"},
}


def test_offsets_sent_to_a_transaction(target: Target) -> None:
    topic = unique("joffsets")
    create_topic(target.bootstrap, topic, 1)
    group = unique("etl")
    txn(target, "offsets", topic, unique("tid"), "--group", group, "--offset", "5", "--abort")
    assert committed_offset(target, group, topic) < 0
    txn(target, "offsets", topic, unique("tid"), "--group", group, "--offset", "9")
    deadline = time.monotonic() + 15  # the marker reaches the offsets partition after EndTxn
    while committed_offset(target, group, topic) != 9:
        assert time.monotonic() < deadline, committed_offset(target, group, topic)
        time.sleep(0.2)
    assert values(target, topic, "read_committed", 1) == ["with-offsets"]


def committed_offset(target: Target, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group})
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], 15)[0].offset)
    finally:
        consumer.close()
