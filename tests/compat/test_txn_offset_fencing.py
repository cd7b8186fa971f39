"""TxnOffsetCommit checks the consumer's generation and member against the group (KIP-447),
on Sluice and on Apache Kafka 4.3: the same answers.

Exactly-once consumers (Kafka Streams with exactly_once_v2) send their offsets to the
transaction with the consumer's group metadata. Once a rebalance has moved on (a new
generation) or the member has left, a zombie's offsets must be refused so its transaction
aborts and the partition's new owner does not see the same records committed twice. Answers
measured on Kafka 4.3.1 with confluent-kafka: ILLEGAL_GENERATION for an old generation,
UNKNOWN_MEMBER_ID for a member that left (also once the group is empty); both abortable.
Sluice accepted all three before.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.compat.conftest import Target, create_topic
from tests.conftest import unique

pytestmark = pytest.mark.oracle


def consumer(target: Target, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "partition.assignment.strategy": "range",
            "log_level": 0,
        }
    )


def until_assigned(*consumers: Consumer) -> None:
    deadline = time.monotonic() + 60
    while not all(c.assignment() for c in consumers):
        assert time.monotonic() < deadline, "the group did not assign every member"
        for c in consumers:
            c.poll(0.1)


def send_offsets(target: Target, topic: str, metadata: object) -> str:
    """One transaction sends an offset with the consumer's group metadata, then aborts:
    "accepted", or the error's name (and "abortable" when the transaction can go on)."""
    producer = Producer(
        {"bootstrap.servers": target.bootstrap, "transactional.id": unique("tx"), "log_level": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    try:
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 3)], metadata, 30)
    except KafkaException as exc:
        error = exc.args[0]
        return error.name() + (" abortable" if error.txn_requires_abort() else "")
    finally:
        producer.abort_transaction(30)
    return "accepted"


def test_a_zombie_consumers_offsets_are_refused(target: Target) -> None:
    topic, group_id = unique("fence"), unique("g")
    create_topic(target.bootstrap, topic, 2)
    first = consumer(target, group_id)
    second = consumer(target, group_id)
    open_ = [first, second]
    try:
        first.subscribe([topic])
        until_assigned(first)
        zombie = first.consumer_group_metadata()  # generation 1
        assert send_offsets(target, topic, zombie) == "accepted"
        second.subscribe([topic])
        until_assigned(first, second)  # generation 2: the first member rejoined
        answers = {"old generation": send_offsets(target, topic, zombie)}
        assert send_offsets(target, topic, first.consumer_group_metadata()) == "accepted"
        open_.remove(first)
        first.close()
        until_assigned(second)
        answers["member left"] = send_offsets(target, topic, zombie)
        open_.remove(second)
        second.close()
        answers["group empty"] = send_offsets(target, topic, zombie)
    finally:
        for c in open_:
            c.close()
    assert answers == {
        "old generation": "ILLEGAL_GENERATION abortable",
        "member left": "UNKNOWN_MEMBER_ID abortable",
        "group empty": "UNKNOWN_MEMBER_ID abortable",
    }
