"""Fixtures of the Spark tests: the embedded S3 server, one broker with tiered storage and
one local[2] SparkSession for the run, and a 3-partition topic whose data is mostly in
the object store, written by producers of every codec, some records with headers.

Ground truth comes from a plain confluent-kafka consumer reading through the broker.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark.remote_log import describe_remote_log
from tests.conftest import unique
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tests.support.spark_session import session, spark_run  # noqa: F401 - fixtures
from tests.support.tiering import TOPIC_CONFIG, broker_settings, data_source_options
from tiered.embedded_s3 import EmbeddedS3

BUCKET = "spark-tiered"
PARTITIONS = 3
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def s3_options(s3: EmbeddedS3) -> dict[str, str]:
    return data_source_options(s3.endpoint, BUCKET)


@pytest.fixture(scope="module")
def broker(s3: EmbeddedS3, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("spark-broker") / "data", broker_settings(s3.endpoint, BUCKET)
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill()


def create_topic(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=TOPIC_CONFIG)])
    futures[topic].result(30)


def record(n: int) -> tuple[bytes, bytes, list[tuple[str, bytes]] | None]:
    """Record number ``n``: value starts with the number (Spark sums it), every third record
    has headers. The filler does not compress, so segments fill up whatever the codec."""
    filler = random.Random(n).randbytes(120)
    headers = [("n", b"%d" % n), ("codec", b"x")] if n % 3 == 0 else None
    return b"k%d" % n, b"%d|" % n + filler, headers


def produce(broker: BrokerProcess, topic: str, first: int, count: int) -> None:
    """``count`` records numbered from ``first``, spread over the codecs' producers and the
    partitions (record n goes to partition n % PARTITIONS)."""
    share = (count + len(CODECS) - 1) // len(CODECS)
    for i, codec in enumerate(CODECS):
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "compression.type": codec,
                "linger.ms": 5,
                "batch.size": 8000,
            }
        )
        for n in range(first + i * share, min(first + count, first + (i + 1) * share)):
            key, value, headers = record(n)
            producer.produce(topic, key=key, value=value, headers=headers, partition=n % PARTITIONS)
            if n % 500 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0


@dataclass(frozen=True)
class Row:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...]


def consume_all(broker: BrokerProcess, topic: str) -> dict[int, list[Row]]:
    """Every record up to the high watermarks, by partition, through the broker."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("truth"),
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    out: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
    try:
        highs = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            (out[p][-1].offset + 1 if out[p] else 0) < highs[p] for p in out
        ):
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    continue
                out[msg.partition()].append(
                    Row(
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        msg.timestamp()[1],
                        tuple((k, v) for k, v in msg.headers() or ()),
                    )
                )
    finally:
        consumer.close()
    return out


def spark_rows(rows: list[Any]) -> dict[int, list[Row]]:
    """Collected Spark rows by partition, in the order Spark returned them."""
    out: dict[int, list[Row]] = {p: [] for p in range(PARTITIONS)}
    for r in rows:
        raw = r["headers"] if "headers" in r.__fields__ else None
        headers = tuple((h["key"], h["value"]) for h in raw or ())
        out[r["partition"]].append(
            Row(
                r["partition"],
                r["offset"],
                r["key"],
                r["value"],
                int(r["timestamp"].timestamp() * 1000),
                headers,
            )
        )
    return out


def local_first_offsets(broker: BrokerProcess, topic: str) -> list[int]:
    firsts = []
    for p in range(PARTITIONS):
        logs = sorted((broker.data_dir / f"{topic}-{p}").glob("*.log"))
        firsts.append(int(logs[0].name.split(".")[0]) if logs else 0)
    return firsts


def wait_tiered(broker: BrokerProcess, topic: str, timeout: float = 90) -> None:
    """Until every partition has readable remote segments and its local log starts above 0."""

    def tiered() -> bool:
        remote = describe_remote_log(broker.bootstrap, [topic])
        for p in range(PARTITIONS):
            part = remote.of(topic, p)
            if part is None or not part.segments:
                return False
        return all(first > 0 for first in local_first_offsets(broker, topic))

    wait_for(tiered, timeout, "segments uploaded and deleted locally", interval=0.3)
