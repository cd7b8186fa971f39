"""OffsetDelete (API 47, KIP-496) on Sluice and on Apache Kafka: the same answers.

One scenario runs against each system and returns what it saw: an unknown group, an
empty group whose offsets are deleted (with partitions that had no offset and a topic
that does not exist), and a group with an active consumer subscribed to one topic, whose
offsets of that topic stay (GROUP_SUBSCRIBED_TO_TOPIC) while another topic's go. The
deletions go through raw requests and kafka-python's KafkaAdminClient.delete_group_offsets,
and OffsetFetch shows what is left.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.compat.conftest import create_topic
from tests.conftest import unique
from tests.support.raw_client import RawClient
from wire.framing import build

pytestmark = pytest.mark.oracle

OD = load_payload_module(47, 0, EntityType.request)
FC = load_payload_module(10, 4, EntityType.request)


def coordinator(bootstrap: str, group: str) -> str:
    with RawClient(bootstrap) as client:
        deadline = time.monotonic() + 30
        while True:
            answer = client.request(
                build(FC.FindCoordinatorRequest, key_type=0, coordinator_keys=(group,))
            )
            (c,) = answer.coordinators
            if c.error_code.name == "none":
                return f"{c.host}:{c.port}"
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)


def offset_delete(bootstrap: str, group: str, topics: dict[str, list[int]]) -> Any:
    request = build(
        OD.OffsetDeleteRequest,
        group_id=group,
        topics=tuple(
            build(
                OD.OffsetDeleteRequestTopic,
                name=name,
                partitions=tuple(
                    build(OD.OffsetDeleteRequestPartition, partition_index=p) for p in parts
                ),
            )
            for name, parts in topics.items()
        ),
    )
    deadline = time.monotonic() + 30
    while True:
        with RawClient(coordinator(bootstrap, group)) as client:
            answer = client.request(request)
        # retriable, as clients treat them: a coordinator still loading its partition, or
        # one that moved (Kafka's offsets topic settling its leaders on a loaded machine)
        if answer.error_code.name not in ("coordinator_load_in_progress", "not_coordinator"):
            break
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)
    return (
        answer.error_code.name,
        sorted(
            (
                t.name.split("-")[0],
                sorted((p.partition_index, p.error_code.name) for p in t.partitions),
            )
            for t in answer.topics
        ),
    )


def committed(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=30)
        return [tp.offset for tp in got]
    finally:
        consumer.close()


def scenario(bootstrap: str) -> dict[str, Any]:
    a, b = unique("odela"), unique("odelb")
    create_topic(bootstrap, a, 2)
    create_topic(bootstrap, b, 2)
    seen: dict[str, Any] = {}
    seen["unknown group"] = offset_delete(bootstrap, unique("nogroup"), {a: [0]})

    empty = unique("odel-empty")
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": empty})
    committer.commit(offsets=[TopicPartition(a, 0, 5), TopicPartition(b, 1, 7)], asynchronous=False)
    committer.close()
    seen["empty group"] = offset_delete(bootstrap, empty, {a: [0, 1, 9], "zz-missing-topic": [0]})
    seen["empty group after"] = committed(bootstrap, empty, [(a, 0), (b, 1)])

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.delete_group_offsets(empty, [KafkaTopicPartition(b, 1)])
    finally:
        admin.close()
    seen["admin client"] = sorted((tp.partition, err.__name__) for tp, err in result.items())
    seen["admin client after"] = committed(bootstrap, empty, [(b, 1)])

    active = unique("odel-active")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": active,
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
        }
    )
    try:
        consumer.subscribe([a])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.2)
        consumer.commit(
            offsets=[TopicPartition(a, 0, 3), TopicPartition(b, 0, 4)], asynchronous=False
        )
        seen["active group"] = offset_delete(bootstrap, active, {a: [0], b: [0]})
        seen["active group after"] = consumer.committed(
            [TopicPartition(a, 0), TopicPartition(b, 0)], timeout=30
        )
        seen["active group after"] = [tp.offset for tp in seen["active group after"]]
    finally:
        consumer.close()
    return seen


def test_offset_delete_matches_kafka(both: dict[str, str]) -> None:
    ours, kafkas = scenario(both["sluice"]), scenario(both["kafka"])
    assert ours == kafkas
    assert kafkas["empty group after"] == [-1001, 7]
    assert kafkas["active group after"] == [3, -1001]
