"""Admin APIs through aiokafka's AIOKafkaAdminClient (non-flexible request versions).

aiokafka answers with the raw responses: CreateTopics v3, DescribeConfigs v2, the
legacy AlterConfigs, CreatePartitions, DeleteRecords, DeleteTopics v3.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import InvalidPartitionsError, OffsetOutOfRangeError
from aiokafka.structs import TopicPartition

from tests.conftest import BrokerProcess, unique

NONE, UNKNOWN_TOPIC, INVALID_TOPIC, TOPIC_EXISTS = 0, 3, 17, 36
INVALID_PARTITIONS, INVALID_CONFIG = 37, 40
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5


@pytest.fixture
async def admin(broker: BrokerProcess) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def topic_results(response: Any) -> dict[str, tuple[int, str | None]]:
    return {
        t["topic"]: (t["error_code"], t["error_message"])
        for t in response.to_object()["topic_errors"]
    }


async def describe_topic(admin: AIOKafkaAdminClient, topic: str) -> dict[str, dict[str, Any]]:
    responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    (resource,) = responses[0].to_object()["resources"]
    assert resource["error_code"] == NONE, resource
    return {e["config_names"]: e for e in resource["config_entries"]}


async def test_create_describe_alter(admin: AIOKafkaAdminClient) -> None:
    topic = unique("aio-topic")
    response = await admin.create_topics(
        [
            NewTopic(topic, 2, 1, topic_configs={"retention.ms": "120000"}),
            NewTopic("bad/name", 1, 1),
            NewTopic(unique("aio-zero"), 0, 1),
            NewTopic(unique("aio-cfg"), 1, 1, topic_configs={"segment.bytes": "tiny"}),
        ]
    )
    results = topic_results(response)
    assert results[topic] == (NONE, None)
    assert results["bad/name"][0] == INVALID_TOPIC
    codes = sorted(code for code, _ in results.values())
    assert codes == [NONE, INVALID_TOPIC, INVALID_PARTITIONS, INVALID_CONFIG]
    assert any("segment.bytes" in (msg or "") for _, msg in results.values())

    again = topic_results(await admin.create_topics([NewTopic(topic, 2, 1)]))
    assert again[topic] == (TOPIC_EXISTS, f"Topic '{topic}' already exists.")

    configs = await describe_topic(admin, topic)
    assert configs["retention.ms"]["config_value"] == "120000"
    assert configs["retention.ms"]["config_source"] == DYNAMIC_TOPIC_CONFIG
    assert configs["segment.ms"]["config_source"] == DEFAULT_CONFIG

    # legacy AlterConfigs: the given set replaces every override
    responses = await admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, {"segment.ms": "100000"})]
    )
    (result,) = responses[0].to_object()["resources"]
    assert result["error_code"] == NONE
    configs = await describe_topic(admin, topic)
    assert configs["segment.ms"]["config_value"] == "100000"
    assert configs["retention.ms"]["config_source"] == DEFAULT_CONFIG

    responses = await admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, {"segment.ms": "-1"})]
    )
    (result,) = responses[0].to_object()["resources"]
    assert result["error_code"] == INVALID_CONFIG
    assert "segment.ms" in result["error_message"]


async def test_partitions_records_and_delete(
    admin: AIOKafkaAdminClient, broker: BrokerProcess
) -> None:
    topic = unique("aio-records")
    assert topic_results(await admin.create_topics([NewTopic(topic, 1, 1)]))[topic][0] == NONE
    await admin.create_partitions({topic: NewPartitions(2)})
    with pytest.raises(InvalidPartitionsError):
        await admin.create_partitions({topic: NewPartitions(1)})

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    try:
        for i in range(6):
            await producer.send_and_wait(topic, f"r{i}".encode(), partition=1)
    finally:
        await producer.stop()

    tp = TopicPartition(topic, 1)
    assert await admin.delete_records({tp: RecordsToDelete(2)}) == {tp: 2}
    with pytest.raises(OffsetOutOfRangeError):
        await admin.delete_records({tp: RecordsToDelete(99)})

    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([tp])
        assert (await consumer.beginning_offsets([tp]))[tp] == 2
        msg = await asyncio.wait_for(consumer.getone(), 30)
        assert (msg.offset, msg.value) == (2, b"r2")
    finally:
        await consumer.stop()

    cluster = await admin.describe_cluster()
    assert [b["node_id"] for b in cluster["brokers"]] == [1]

    response = await admin.delete_topics([topic, unique("aio-none")])
    codes = sorted(t["error_code"] for t in response.to_object()["topic_error_codes"])
    assert codes == [NONE, UNKNOWN_TOPIC]
    assert topic not in await admin.list_topics()
    assert topic_results(await admin.create_topics([NewTopic(topic, 1, 1)]))[topic][0] == NONE
