"""OffsetFetch with ``require_stable`` (KIP-447) while a transaction holds offsets of the
group, on Sluice and on Apache Kafka 4.3: the same answers.

A transactional producer sends offsets of a group to its transaction (TxnOffsetCommit) and
leaves it open. A read_committed consumer or Kafka Streams (exactly_once_v2) taking over a
partition asks with ``require_stable``: where the transaction holds an offset Kafka answers
UNSTABLE_OFFSET_COMMIT (offset -1) until the marker lands, so the new owner never starts from
the offset before a transaction that may yet commit (it would process those records twice).
Without ``require_stable`` the last committed offset is answered. Answers measured on Kafka
4.3.1; Sluice answered the stale offset before (the flag had no effect).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.index import load_payload_module, load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from tests.compat.conftest import Target, create_topic
from tests.conftest import unique
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.oracle

OFFSET_FETCH, FIND_COORDINATOR = 9, 10
UNSTABLE = ErrorCode.unstable_offset_commit
NONE = ErrorCode.none

Answer = dict[int, tuple[int, ErrorCode]]
"""partition -> (committed offset, error)"""


def req(api: int, version: int, **fields: Any) -> Any:
    return load_request_schema(api, version)(**fields)


def ent(api: int, version: int, entity: str, **fields: Any) -> Any:
    return getattr(load_payload_module(api, version, EntityType.request), entity)(**fields)


class Coordinator:
    """A raw connection to the group's coordinator."""

    def __init__(self, bootstrap: str, group: str) -> None:
        with RawClient(bootstrap) as client:
            deadline = time.monotonic() + 30
            while True:
                found = client.request(
                    req(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,))
                ).coordinators[0]
                if found.error_code == NONE:
                    break
                assert time.monotonic() < deadline, found  # Kafka loads the partition lazily
                time.sleep(0.2)
        self.client = RawClient(f"{found.host}:{found.port}")
        self.group = group

    def close(self) -> None:
        self.client.close()

    def fetch(
        self, version: int, topic: str | None, partitions: tuple[int, ...], stable: bool
    ) -> Answer:
        if version >= 8:
            topics = (
                None
                if topic is None
                else (
                    ent(
                        9,
                        version,
                        "OffsetFetchRequestTopics",
                        name=topic,
                        partition_indexes=partitions,
                    ),
                )
            )
            group = ent(9, version, "OffsetFetchRequestGroup", group_id=self.group, topics=topics)
            response = self.client.request(
                req(OFFSET_FETCH, version, groups=(group,), require_stable=stable)
            )
            answer = response.groups[0]
        else:
            topics = (
                None
                if topic is None
                else (
                    ent(
                        9,
                        version,
                        "OffsetFetchRequestTopic",
                        name=topic,
                        partition_indexes=partitions,
                    ),
                )
            )
            fields: dict[str, Any] = {"group_id": self.group, "topics": topics}
            if version >= 7:
                fields["require_stable"] = stable
            answer = self.client.request(req(OFFSET_FETCH, version, **fields))
        assert answer.error_code == NONE, answer
        return {
            p.partition_index: (p.committed_offset, p.error_code)
            for t in answer.topics
            for p in t.partitions
        }


@pytest.fixture
def open_transaction(target: Target) -> Iterator[tuple[Target, str, str, Producer]]:
    """Group G has committed offset 7 on partition 1 of a 3-partition topic; an open
    transaction holds offsets 5 (partition 0) and 9 (partition 1) of G and a record on
    partition 2."""
    topic, group = unique("stable"), unique("g")
    create_topic(target.bootstrap, topic, 3)
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "log_level": 0})
    producer = Producer(
        {"bootstrap.servers": target.bootstrap, "transactional.id": unique("tx"), "log_level": 0}
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 1, 7)], asynchronous=False)
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"x", partition=2)
        offsets = [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 9)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        producer.flush(30)
        yield target, topic, group, producer
    finally:
        consumer.close()


def test_require_stable_sees_offsets_held_by_a_transaction(
    open_transaction: tuple[Target, str, str, Producer],
) -> None:
    target, topic, group, producer = open_transaction
    coordinator = Coordinator(target.bootstrap, group)
    try:
        held: Answer = {0: (-1, UNSTABLE), 1: (-1, UNSTABLE), 2: (-1, NONE)}
        last_committed: Answer = {0: (-1, NONE), 1: (7, NONE), 2: (-1, NONE)}
        for version in (7, 8, 9):
            assert coordinator.fetch(version, topic, (0, 1, 2), stable=True) == held, version
            assert coordinator.fetch(version, topic, (0, 1, 2), stable=False) == last_committed
        # before v7 there is no flag: the last committed offsets
        assert coordinator.fetch(6, topic, (0, 1, 2), stable=False) == last_committed
        # every committed partition (topics null): only partition 1 has a committed offset
        assert coordinator.fetch(7, None, (), stable=True) == {1: (-1, UNSTABLE)}
        producer.commit_transaction(30)
        deadline = time.monotonic() + 30  # until the marker reaches __consumer_offsets
        answer = coordinator.fetch(7, topic, (0, 1, 2), stable=True)
        while answer != {0: (5, NONE), 1: (9, NONE), 2: (-1, NONE)}:
            assert time.monotonic() < deadline, answer
            time.sleep(0.1)
            answer = coordinator.fetch(7, topic, (0, 1, 2), stable=True)
    finally:
        coordinator.close()


def test_an_aborted_transaction_leaves_the_offsets_stable(
    open_transaction: tuple[Target, str, str, Producer],
) -> None:
    target, topic, group, producer = open_transaction
    coordinator = Coordinator(target.bootstrap, group)
    try:
        producer.abort_transaction(30)
        deadline = time.monotonic() + 30
        answer = coordinator.fetch(8, topic, (0, 1, 2), stable=True)
        while answer != {0: (-1, NONE), 1: (7, NONE), 2: (-1, NONE)}:
            assert time.monotonic() < deadline, answer
            time.sleep(0.1)
            answer = coordinator.fetch(8, topic, (0, 1, 2), stable=True)
    finally:
        coordinator.close()
