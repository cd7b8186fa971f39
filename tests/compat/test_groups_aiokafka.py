"""Consumer groups with aiokafka: consume, commit, and a new consumer resumes from the commit.

aiokafka speaks the older, non-flexible versions: FindCoordinator v1, JoinGroup v5 (member
id required), SyncGroup v3, OffsetCommit v3 (with retention time), OffsetFetch v3.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.conftest import BrokerProcess, unique

PARTITIONS = 3
DEADLINE = 60.0


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("groups-aio") / "data",
        {"auto.create.topics.enable": "true", "num.partitions": str(PARTITIONS)},
    ).start()
    yield proc
    proc.stop()
    proc.kill()


async def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i, value in enumerate(values):
            await producer.send_and_wait(topic, value.encode(), partition=i % PARTITIONS)
    finally:
        await producer.stop()


def make_consumer(bootstrap: str, group: str, topic: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    )


async def consume(consumer: AIOKafkaConsumer, count: int) -> list[str]:
    values: list[str] = []

    async def run() -> None:
        while len(values) < count:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                values.extend(r.value.decode() for r in records if r.value is not None)

    await asyncio.wait_for(run(), DEADLINE)
    return values


async def test_aiokafka_group_commit_and_resume(group_broker: BrokerProcess) -> None:
    bootstrap = group_broker.bootstrap
    topic, group = unique("aio-topic"), unique("aio-group")
    first = [f"a{i}" for i in range(15)]
    await produce(bootstrap, topic, first)

    consumer = make_consumer(bootstrap, group, topic)
    await consumer.start()
    try:
        assert sorted(await consume(consumer, len(first))) == sorted(first)
        await consumer.commit()
        committed = [await consumer.committed(TopicPartition(topic, p)) for p in range(3)]
        assert committed == [5, 5, 5]
    finally:
        await consumer.stop()

    second = [f"b{i}" for i in range(6)]
    await produce(bootstrap, topic, second)
    resumed = make_consumer(bootstrap, group, topic)
    await resumed.start()
    try:
        got = await consume(resumed, len(second))
        extra = await resumed.getmany(timeout_ms=300)
        got += [r.value.decode() for rs in extra.values() for r in rs if r.value is not None]
        assert sorted(got) == sorted(second)
    finally:
        await resumed.stop()
