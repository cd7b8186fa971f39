"""Admin APIs through kafka-python 3.0's KafkaAdminClient (flexible, newest versions).

kafka-python sends CreateTopics v7, DeleteTopics v6, DescribeConfigs v4,
IncrementalAlterConfigs v1 (AlterConfigs v2 with ``incremental=False``),
CreatePartitions v3, DeleteRecords v2 and DescribeCluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, errors
from kafka.admin import ConfigResource, KafkaAdminClient
from kafka.structs import TopicPartition

from tests.conftest import BrokerProcess, unique


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        yield client
    finally:
        client.close()


def topic_configs(admin: KafkaAdminClient, topic: str, **kwargs: Any) -> dict[str, Any]:
    found: dict[str, Any] = admin.describe_configs([ConfigResource("TOPIC", topic)], **kwargs)
    return dict(found["topic"][topic])


def test_create_topics(admin: KafkaAdminClient) -> None:
    topic = unique("kp-create")
    result = admin.create_topics(
        {topic: {"num_partitions": 3, "configs": {"max.message.bytes": "2048"}}}
    )
    (created,) = result["topics"]
    assert created["error_code"] == 0
    assert (created["num_partitions"], created["replication_factor"]) == (3, 1)
    assert created["configs"]["max.message.bytes"]["value"] == "2048"
    assert created["configs"]["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert created["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

    # -1 (kafka-python's default) means the broker's num.partitions and replication factor
    default = unique("kp-default")
    (made,) = admin.create_topics({default: {}})["topics"]
    assert (made["num_partitions"], made["replication_factor"]) == (1, 1)

    with pytest.raises(errors.TopicAlreadyExistsError):
        admin.create_topics({topic: {}})
    with pytest.raises(errors.InvalidTopicError):
        admin.create_topics({"." * 300: {}})
    with pytest.raises(errors.InvalidPartitionsError):
        admin.create_topics({unique("kp-neg"): {"num_partitions": -4}})
    with pytest.raises(errors.InvalidReplicationFactorError):
        admin.create_topics({unique("kp-rf"): {"replication_factor": 2}})
    with pytest.raises(errors.InvalidConfigurationError, match=r"cleanup\.policy"):
        admin.create_topics({unique("kp-cfg"): {"configs": {"cleanup.policy": "shred"}}})

    checked = admin.create_topics({unique("kp-check"): {}}, validate_only=True)
    assert checked["topics"][0]["error_code"] == 0
    assert checked["topics"][0]["name"] not in admin.list_topics()


def test_describe_and_alter_configs(admin: KafkaAdminClient, broker: BrokerProcess) -> None:
    topic = unique("kp-configs")
    admin.create_topics({topic: {"configs": {"retention.ms": "3600000"}}})
    assert topic_configs(admin, topic)["retention.ms"]["value"] == "3600000"
    everything = topic_configs(admin, topic, config_filter="all", include_synonyms=True)
    retention = everything["retention.ms"]
    assert retention["config_type"] == "LONG"
    assert [s["source"] for s in retention["synonyms"]] == [
        "DYNAMIC_TOPIC_CONFIG",
        "DEFAULT_CONFIG",
    ]
    assert everything["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

    # incremental (the default): SET, APPEND to a list, DELETE back to the default
    changes = {"segment.ms": "100000", "cleanup.policy": ("APPEND", "compact")}
    result = admin.alter_configs([ConfigResource("TOPIC", topic, changes)])
    assert result == {"topic": {topic: "OK"}}
    modified = topic_configs(admin, topic)
    assert modified["segment.ms"]["value"] == "100000"
    assert modified["cleanup.policy"]["value"] == "delete,compact"
    admin.reset_configs([ConfigResource("TOPIC", topic, ["retention.ms"])])
    assert "retention.ms" not in topic_configs(admin, topic)

    bad = admin.alter_configs([ConfigResource("TOPIC", topic, {"segment.ms": "0"})])
    assert "InvalidConfigurationError" in bad["topic"][topic]
    assert "segment.ms" in bad["topic"][topic]

    # legacy AlterConfigs: kafka-python re-sends the other modified keys itself
    legacy = admin.alter_configs(
        [ConfigResource("TOPIC", topic, {"segment.ms": "200000"})], incremental=False
    )
    assert legacy == {"topic": {topic: "OK"}}
    modified = topic_configs(admin, topic)
    assert modified["segment.ms"]["value"] == "200000"
    assert modified["cleanup.policy"]["value"] == "delete,compact"

    # a dynamic broker config changes the default every topic without an override sees
    broker_id = "1"
    admin.alter_configs([ConfigResource("BROKER", broker_id, {"log.retention.bytes": "5000000"})])
    try:
        described = admin.describe_configs([ConfigResource("BROKER", broker_id)])
        entry = described["broker"][broker_id]["log.retention.bytes"]
        assert (entry["value"], entry["config_source"]) == ("5000000", "DYNAMIC_BROKER_CONFIG")
        inherited = topic_configs(admin, topic, config_filter="all")["retention.bytes"]
        assert (inherited["value"], inherited["config_source"]) == (
            "5000000",
            "DYNAMIC_BROKER_CONFIG",
        )
        refused = admin.alter_configs(
            [ConfigResource("BROKER", broker_id, {"num.partitions": "3"})],
            raise_on_unknown=False,
        )
        assert "InvalidRequestError" in refused["broker"][broker_id]
    finally:
        admin.reset_configs([ConfigResource("BROKER", broker_id, ["log.retention.bytes"])])
    assert topic_configs(admin, topic, config_filter="all")["retention.bytes"]["value"] == "-1"


def test_partitions_records_cluster_and_delete(
    admin: KafkaAdminClient, broker: BrokerProcess
) -> None:
    topic = unique("kp-lifecycle")
    admin.create_topics({topic: {"num_partitions": 1}})
    admin.create_partitions({topic: 2})
    with pytest.raises(errors.InvalidPartitionsError):
        admin.create_partitions({topic: 2})

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(5):
        producer.send(topic, f"m{i}".encode(), partition=1)
    producer.flush(30)
    producer.close()

    tp = TopicPartition(topic, 1)
    deleted = admin.delete_records({tp: 3})
    assert deleted[tp]["low_watermark"] == 3
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 3}
        consumer.assign([tp])
        batch = consumer.poll(timeout_ms=10000, max_records=1)
        (message,) = batch[tp]
        assert (message.offset, message.value) == (3, b"m3")
    finally:
        consumer.close()

    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [b["broker_id"] for b in cluster["brokers"]] == [1]
    assert "DESCRIBE_CONFIGS" in cluster["authorized_operations"]

    result = admin.delete_topics([topic])
    assert result["topics"][0]["error_code"] == 0
    assert topic not in admin.list_topics()
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.delete_topics([topic])
    (again,) = admin.create_topics({topic: {}})["topics"]
    assert again["error_code"] == 0
    assert again["topic_id"] != result["topics"][0]["topic_id"]
