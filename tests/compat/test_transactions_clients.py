"""Transactional producers of three more clients against Sluice's transaction coordinator:
kafka-python and aiokafka commit one transaction and abort another, and a read_committed
consumer of the same client sees exactly the committed records."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from tests.conftest import BrokerProcess, unique


def make_topic(broker: BrokerProcess) -> str:
    name = unique("txn-client")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()
    return name


def test_kafka_python_commits_and_aborts(broker: BrokerProcess) -> None:
    topic = make_topic(broker)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=unique("tx-kp"), max_block_ms=30000
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"kept", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"dropped", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        consumer_timeout_ms=3000,
    )
    try:
        values = [m.value for m in consumer]
    finally:
        consumer.close()
    assert values == [b"kept"]


def test_aiokafka_commits_and_aborts(broker: BrokerProcess) -> None:
    topic = make_topic(broker)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id=unique("tx-aio")
        )
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"kept", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"dropped", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        values: list[bytes] = []
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=300)
                values += [m.value for records in batch.values() for m in records]
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(run()) == [b"kept"]
