"""Records, topics and consumer groups on two clusters, compared through confluent-kafka:
what the MirrorMaker and replicator tests (tests/ecosystem) check a copy with."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.controlplane.harness import wait_until
from tests.support.cluster_workload import high_watermark

LOADING = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
}
"""A just-started broker's group coordinator: asked again."""
TOPIC_CONFIG = {"retention.ms": "123456789", "max.message.bytes": "200000"}
"""Topic settings a copy must carry."""


def seed(bootstrap: str, topic: str, partitions: int, count: int, replicas: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, replicas, config=dict(TOPIC_CONFIG))
    admin.create_topics([new])[topic].result(timeout=30)
    produce(bootstrap, topic, partitions, 0, count)


def produce(bootstrap: str, topic: str, partitions: int, start: int, count: int) -> None:
    """Records ``start`` .. ``start + count - 1``, record i to partition i % ``partitions``.

    A record the client refused is sent again: a partition just added may not be in the
    metadata of the broker the client asked yet (librdkafka then fails the record with an
    unknown partition, in ``produce`` itself when it has the topic's metadata already), as
    with Kafka, whose CreatePartitions answers before every broker knows."""
    failed: list[int] = []
    pending = list(range(start, start + count))
    deadline = time.monotonic() + 60
    while pending:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        failed.clear()
        for i in pending:
            try:
                producer.produce(
                    topic,
                    key=f"key-{i}",
                    value=f"value-{i}".encode() * (1 + i % 7),
                    partition=i % partitions,
                    headers=[("n", str(i).encode())],
                    on_delivery=lambda err, _msg, i=i: failed.append(i) if err else None,
                )
            except KafkaException as exc:
                # refused before it was queued: the metadata the client has names fewer
                # partitions (it answers at once when it has the topic's)
                if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION:
                    raise
                failed.append(i)
        assert producer.flush(30) == 0
        assert time.monotonic() < deadline or not failed, f"records {failed} not delivered"
        pending = sorted(failed)
        if pending:
            time.sleep(0.5)


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` (asked again while a just-started broker's group
    coordinator loads: a retriable error)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                    asynchronous=False,
                )
                return
            except KafkaException as exc:
                if exc.args[0].code() not in LOADING or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def records(bootstrap: str, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    """Every record of ``topic`` per partition: (key, value, headers, timestamp)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "sluice-test-reader",
            "enable.auto.commit": False,
        }
    )
    out: dict[int, list[tuple[Any, ...]]] = {p: [] for p in partitions}
    try:
        ends = {p: high_watermark(consumer, topic, p) for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions if ends[p]])
        remaining = sum(ends.values())
        while remaining:
            message = consumer.poll(10)
            assert message is not None, f"{topic}: {remaining} records not read"
            if message.error():
                continue
            p, offset = message.partition(), message.offset()
            assert p is not None
            assert offset is not None
            if offset < ends[p]:
                out[p].append(
                    (message.key(), message.value(), message.headers(), message.timestamp()[1])
                )
                remaining -= 1
    finally:
        consumer.close()
    return out


def count(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.list_topics(timeout=10).topics.get(topic)
    if found is None or found.error is not None:
        return -1
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-test-reader"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in found.partitions
        )
    except KafkaException:
        return -1  # a partition just created: its leader does not serve it yet
    finally:
        consumer.close()


def wait_translated(
    bootstrap: str, group: str, topic: str, source: dict[tuple[str, int], int]
) -> dict[int, int]:
    """The group's offsets on the target once MirrorMaker has translated them.

    A partition consumed to its end translates exactly once its last offset sync is read
    (earlier checkpoints may be lower: they only move forward). One stopped in the middle
    translates to the offset after an earlier sync that MirrorMaker's OffsetSyncStore kept
    (at least 1, at most the source's offset: the group re-reads some records and skips
    none), or not at all when the syncs around it were already written when the checkpoint
    task first read the syncs topic (the store keeps only the latest of those: Kafka's
    ``OffsetSyncStore``). Both happen, depending on which task starts first."""
    ends = {p: o for (_, p), o in source.items()}
    # the copy has as many records per partition as the source
    full = {p for (_, p), o in source.items() if o == count_partition(bootstrap, topic, p)}
    last: list[dict[int, int]] = [{}]

    def translated() -> dict[int, int] | None:
        found = last[0] = committed(bootstrap, group, topic, len(ends))
        return found if all(found.get(p) == ends[p] for p in full) else None

    try:
        found = wait_until(translated, 60, f"group {group}'s offsets on {topic} of the target")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: last {last[0]}, source {ends}") from None
    for partition, offset in found.items():
        assert 1 <= offset <= ends[partition], (partition, found, ends)
    return dict(found)


def count_partition(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-test-reader"})
    try:
        return high_watermark(consumer, topic, partition)
    finally:
        consumer.close()


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    found = admin.describe_configs([resource])[resource].result(timeout=10)
    return {k: str(v.value) for k, v in found.items()}


def partitions_of(bootstrap: str, topic: str) -> int:
    found = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return len(found.topics[topic].partitions)
