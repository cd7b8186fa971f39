"""Produce inputs and read outputs of transforms with a real Kafka client (confluent-kafka),
and the expected outputs: the guest's logic in Python (conftest.REFERENCE) over what the
input topic holds."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster_workload import high_watermark
from transforms.records import InputRecord, OutputRecord

Row = tuple[bytes | None, bytes | None, tuple[tuple[bytes, bytes | None], ...]]
"""(key, value, headers) of one record."""


def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics])
    for future in futures.values():
        future.result(30)


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[InputRecord],
    partitions: int,
    compression: str = "none",
) -> None:
    """Each record to partition index % partitions, idempotent, acks=all."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": compression,
            "linger.ms": 5,
        }
    )
    errors: list[str] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for i, r in enumerate(records):
        producer.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=i % partitions,
            headers=[(k.decode(), v) for k, v in r.headers] or None,
            on_delivery=report,
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 30) -> list[list[Row]]:
    """Every record of every partition, up to its end offset now."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        # retried while a leader that just moved does not know its high watermark yet
        ends = [high_watermark(consumer, topic, p) for p in range(partitions)]
        out: list[list[Row]] = [[] for _ in range(partitions)]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        deadline = time.monotonic() + timeout
        while any(len(out[p]) < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"read {[len(o) for o in out]} of {ends}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            if msg.offset() < ends[msg.partition()]:
                headers = tuple((k.encode(), v) for k, v in msg.headers() or ())
                out[msg.partition()].append((msg.key(), msg.value(), headers))
        return out
    finally:
        consumer.close()


def input_records(rows: list[Row]) -> list[InputRecord]:
    return [InputRecord(i, 0, k, v, h) for i, (k, v, h) in enumerate(rows)]


def expected(
    reference: Callable[[InputRecord, tuple[str, ...]], list[OutputRecord]],
    inputs: list[list[Row]],
    outputs: tuple[str, ...],
) -> dict[str, list[list[Row]]]:
    """topic -> per partition (input partition P -> output partition P) the rows the
    reference writes, in input order."""
    out: dict[str, list[list[Row]]] = {t: [[] for _ in inputs] for t in outputs}
    for p, rows in enumerate(inputs):
        for record in input_records(rows):
            for o in reference(record, outputs):
                out[o.topic][p].append((o.key, o.value, tuple(o.headers)))
    return out


def wait_rows(
    bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 60
) -> list[list[Row]]:
    """The partitions' records once they hold ``count`` in all."""
    deadline = time.monotonic() + timeout
    while True:
        rows = read_all(bootstrap, topic, partitions)
        if sum(map(len, rows)) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)
