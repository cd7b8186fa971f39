"""Admin APIs through confluent-kafka's AdminClient (librdkafka), against Sluice and Kafka.

Every test runs against both systems (``target``) and asserts what both must answer:
topic creation with configs and its errors, config description and both ways of
altering configs, partition growth, record deletion, cluster description, topic
deletion and re-creation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from tests.compat.conftest import Target
from tests.conftest import unique

TIMEOUT = 30


def admin_for(target: Target) -> AdminClient:
    return AdminClient({"bootstrap.servers": target.bootstrap})


def error_of(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT)
    error: KafkaError = info.value.args[0]
    return error


def create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> None:
    for future in admin.create_topics(list(topics), validate_only=validate_only).values():
        future.result(timeout=TIMEOUT)


def topic_config(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs: dict[str, Any] = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)
    return configs


def wait_for(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def partition_count(admin: AdminClient, topic: str) -> int:
    found = admin.list_topics(topic=topic, timeout=TIMEOUT).topics[topic]
    if found.error is not None:
        return -1
    return len(found.partitions)


def test_create_topic_with_configs_and_describe_sources(target: Target) -> None:
    admin = admin_for(target)
    topic = unique("cfl-create")
    create(admin, NewTopic(topic, 3, 1, config={"retention.ms": "3600000"}))
    wait_for(lambda: partition_count(admin, topic) == 3, "three partitions in metadata")

    configs = topic_config(admin, topic)
    retention = configs["retention.ms"]
    assert retention.value == "3600000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_default
    segment = configs["segment.bytes"]
    assert segment.source == ConfigSource.DEFAULT_CONFIG.value
    assert segment.is_default
    assert not segment.is_read_only


def test_create_topic_errors(target: Target) -> None:
    admin = admin_for(target)
    topic = unique("cfl-dup")
    create(admin, NewTopic(topic, 1, 1))
    futures = admin.create_topics(
        [
            NewTopic(topic, 1, 1),
            NewTopic("bad name!", 1, 1),
            NewTopic(unique("cfl-zero"), 0, 1),
            NewTopic(unique("cfl-rf"), 1, 3),
            NewTopic(unique("cfl-key"), 1, 1, config={"no.such.key": "1"}),
            NewTopic(unique("cfl-val"), 1, 1, config={"retention.ms": "soon"}),
            NewTopic(unique("cfl-min"), 1, 1, config={"retention.ms": "-7"}),
        ]
    )
    errors = [error_of(f) for f in futures.values()]
    assert [e.code() for e in errors] == [
        KafkaError.TOPIC_ALREADY_EXISTS,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.INVALID_PARTITIONS,
        KafkaError.INVALID_REPLICATION_FACTOR,
        KafkaError.INVALID_CONFIG,
        KafkaError.INVALID_CONFIG,
        KafkaError.INVALID_CONFIG,
    ]
    assert errors[0].str() == f"Topic '{topic}' already exists."
    assert errors[4].str() == "Unknown topic config name: no.such.key"
    assert errors[5].str() == (
        "Invalid value soon for configuration retention.ms: Not a number of type LONG"
    )
    assert errors[6].str() == (
        "Invalid value -7 for configuration retention.ms: Value must be at least -1"
    )


def test_validate_only_creates_nothing(target: Target) -> None:
    admin = admin_for(target)
    topic = unique("cfl-validate")
    create(admin, NewTopic(topic, 2, 1), validate_only=True)
    assert partition_count(admin, topic) == -1
    create(admin, NewTopic(topic, 2, 1))
    wait_for(lambda: partition_count(admin, topic) == 2, "the topic after a real create")


def test_incremental_and_legacy_alter_configs(target: Target) -> None:
    admin = admin_for(target)
    topic = unique("cfl-alter")
    create(admin, NewTopic(topic, 1, 1, config={"retention.ms": "100000"}))
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("segment.ms", "200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT)
    # Kafka applies a change on each broker when its metadata catches up: read until it has
    wait_for(lambda: topic_config(admin, topic)["segment.ms"].value == "200000", "segment.ms")
    configs = topic_config(admin, topic)
    assert configs["segment.ms"].value == "200000"
    assert configs["retention.ms"].is_default
    assert set(configs["cleanup.policy"].value.split(",")) == {"delete", "compact"}

    bad = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("max.message.bytes", "huge", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    error = error_of(admin.incremental_alter_configs([bad])[bad])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "max.message.bytes" in error.str()

    # the legacy API replaces the whole set: keys left out return to their defaults
    legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "300000"})
    with pytest.warns(DeprecationWarning, match="incremental_alter_configs"):
        futures = admin.alter_configs([legacy])
    futures[legacy].result(timeout=TIMEOUT)
    wait_for(lambda: topic_config(admin, topic)["retention.ms"].value == "300000", "the set")
    configs = topic_config(admin, topic)
    assert configs["retention.ms"].value == "300000"
    assert configs["segment.ms"].is_default
    assert configs["cleanup.policy"].value == "delete"

    missing = ConfigResource(
        ResourceType.TOPIC,
        unique("cfl-missing"),
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    error = error_of(admin.incremental_alter_configs([missing])[missing])
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions(target: Target) -> None:
    admin = admin_for(target)
    topic = unique("cfl-grow")
    create(admin, NewTopic(topic, 1, 1))
    for future in admin.create_partitions([NewPartitions(topic, 3)], validate_only=True).values():
        future.result(timeout=TIMEOUT)
    assert partition_count(admin, topic) == 1
    for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
        future.result(timeout=TIMEOUT)
    wait_for(lambda: partition_count(admin, topic) == 3, "three partitions")
    producer = Producer({"bootstrap.servers": target.bootstrap})
    producer.produce(topic, b"to the new partition", partition=2)
    assert producer.flush(TIMEOUT) == 0

    futures = admin.create_partitions([NewPartitions(topic, 2)])
    error = error_of(futures[topic])
    assert error.code() == KafkaError.INVALID_PARTITIONS
    assert error.str() == (
        f"The topic {topic} currently has 3 partition(s); 2 would not be an increase."
    )
    futures = admin.create_partitions([NewPartitions(unique("cfl-nope"), 2)])
    assert error_of(next(iter(futures.values()))).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_records_moves_earliest_offset(target: Target) -> None:
    admin = admin_for(target)
    topic = unique("cfl-records")
    create(admin, NewTopic(topic, 1, 1))
    producer = Producer({"bootstrap.servers": target.bootstrap})
    for i in range(10):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0

    tp = TopicPartition(topic, 0, 4)
    deleted = admin.delete_records([tp])[tp].result(timeout=TIMEOUT)
    assert deleted.low_watermark == 4
    earliest = TopicPartition(topic, 0)
    listed = admin.list_offsets({earliest: OffsetSpec.earliest()})[earliest].result(TIMEOUT)
    assert listed.offset == 4

    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": unique("records"),
            "enable.auto.commit": False,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        assert (low, high) == (4, 10)
        consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        msg = None
        deadline = time.monotonic() + TIMEOUT
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        assert msg is not None
        assert msg.error() is None
        assert (msg.offset(), msg.value()) == (4, b"v4")
    finally:
        consumer.close()

    beyond = TopicPartition(topic, 0, 11)
    error = error_of(admin.delete_records([beyond])[beyond])
    assert error.code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_describe_cluster(target: Target) -> None:
    admin = admin_for(target)
    topic = unique("cfl-cluster")
    create(admin, NewTopic(topic, 1, 1))
    # librdkafka describes the cluster with Metadata, not DescribeCluster (tested raw in
    # tests/dataplane/test_admin_protocol.py)
    result = admin.describe_cluster().result(timeout=TIMEOUT)
    assert result.cluster_id == admin.list_topics(topic=topic, timeout=TIMEOUT).cluster_id
    assert len(result.nodes) == 1
    node = result.nodes[0]
    assert f"{node.host}:{node.port}" == target.bootstrap
    assert result.controller is not None
    assert result.controller.id == node.id


def test_delete_topic_then_recreate(target: Target) -> None:
    admin = admin_for(target)
    topic = unique("cfl-delete")
    create(admin, NewTopic(topic, 2, 1, config={"retention.ms": "60000"}))
    producer = Producer({"bootstrap.servers": target.bootstrap})
    producer.produce(topic, b"old", partition=0)
    assert producer.flush(TIMEOUT) == 0

    for future in admin.delete_topics([topic]).values():
        future.result(timeout=TIMEOUT)
    wait_for(lambda: partition_count(admin, topic) == -1, "the topic to disappear")
    error = error_of(admin.delete_topics([topic])[topic])
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # the same name again: a new, empty topic with default configs
    def recreate() -> bool:
        try:
            create(admin, NewTopic(topic, 1, 1))
        except KafkaException as exc:  # Kafka may still be finishing the deletion
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            return False
        return True

    wait_for(recreate, "the re-creation")
    wait_for(lambda: partition_count(admin, topic) == 1, "the new topic in metadata")
    assert topic_config(admin, topic)["retention.ms"].is_default
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": unique("gone")})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        assert (low, high) == (0, 0)
    finally:
        consumer.close()
