"""Batch reads and writes of format("sluice") with real local Spark against one broker
with tiered storage: a 3-partition topic mostly in the object store (read from it by the
executors) and partly hot (read from the broker) gives Spark exactly the rows a plain Kafka
consumer reads, offsets in order, for every codec, with headers."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import functions as F

import spark
from pyspark_sluice import DefaultSource
from spark.options import read_options, store_settings
from spark.planning import TieredSplit, plan
from spark.reading import read_tiered, start_position
from tests.conftest import unique
from tests.spark.conftest import (
    PARTITIONS,
    Row,
    consume_all,
    create_topic,
    local_first_offsets,
    produce,
    s3_options,
    spark_rows,
    wait_tiered,
)
from tests.support.broker import BrokerProcess
from tiered.embedded_s3 import EmbeddedS3
from tiered.object_store import S3ObjectStore

RECORDS = 4500


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    name = unique("spark-tiered")
    create_topic(broker, name)
    produce(broker, name, 0, RECORDS)
    wait_tiered(broker, name)
    produce(broker, name, RECORDS, 300)  # a hot tail on top of what is tiered
    return name


def options(broker: BrokerProcess, s3: EmbeddedS3, topic: str, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": topic,
        **s3_options(s3),
        **extra,
    }


def without_headers(row: Row) -> Row:
    return dataclasses.replace(row, headers=())


def load(session: Any, opts: dict[str, str | None]) -> Any:
    """A batch read; options set to None are left out."""
    given = {k: v for k, v in opts.items() if v is not None}
    return session.read.format("sluice").options(**given).load()


def test_plan_reads_most_data_from_the_object_store(
    broker: BrokerProcess, s3: EmbeddedS3, topic: str
) -> None:
    planned = plan(read_options(options(broker, s3, topic), streaming=False))
    tiered = [s for s in planned.splits if isinstance(s, TieredSplit)]
    hot = [s for s in planned.splits if not isinstance(s, TieredSplit)]
    assert {s.partition for s in tiered} == set(range(PARTITIONS))
    assert len(hot) == PARTITIONS  # one hot tail per partition
    in_tiered = sum(s.end - s.start for s in tiered)
    assert in_tiered > 0.5 * (RECORDS + 300)
    # remote and local overlap (uploaded segments not yet deleted locally); the plan
    # takes the remote copy and starts the hot tail after it
    firsts = local_first_offsets(broker, topic)
    for p in range(PARTITIONS):
        ends = [s.end for s in tiered if s.partition == p]
        assert max(ends) >= firsts[p] > 0


def test_rows_equal_a_kafka_consumer(
    session: Any, broker: BrokerProcess, s3: EmbeddedS3, topic: str
) -> None:
    truth = consume_all(broker, topic)
    total = RECORDS + 300
    assert sum(len(rows) for rows in truth.values()) == total

    df = load(session, options(broker, s3, topic, includeHeaders="true"))
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    numbers = F.split(F.col("value").cast("string"), r"\|").getItem(0).cast("long")
    count, total_sum = df.agg(F.count("*"), F.sum(numbers)).first()
    assert count == total
    assert total_sum == total * (total - 1) // 2

    collected = df.collect()
    got = spark_rows(collected)
    for p in range(PARTITIONS):
        assert [r.offset for r in got[p]] == [r.offset for r in truth[p]], f"partition {p}"
        assert got[p] == truth[p], f"partition {p}"
    assert {r["topic"] for r in collected} == {topic}
    assert {r["timestampType"] for r in collected} == {0}
    with_headers = [r for rows in got.values() for r in rows if r.headers]
    assert len(with_headers) == (total + 2) // 3

    # without includeHeaders: Spark's schema without the column
    plain = load(session, options(broker, s3, topic))
    assert "headers" not in plain.columns
    assert plain.count() == total


def test_offset_and_timestamp_ranges(
    session: Any, broker: BrokerProcess, s3: EmbeddedS3, topic: str
) -> None:
    truth = consume_all(broker, topic)
    starting = {topic: {"0": 10, "1": -2, "2": 1000}}
    ending = {topic: {"0": 1400, "1": 20, "2": -1}}
    df = load(
        session,
        options(
            broker,
            s3,
            topic,
            startingOffsets=json.dumps(starting),
            endingOffsets=json.dumps(ending),
        ),
    )
    got = spark_rows(df.collect())
    assert [r.offset for r in got[0]] == list(range(10, 1400))
    assert [r.offset for r in got[1]] == list(range(20))
    assert [r.offset for r in got[2]] == list(range(1000, len(truth[2])))
    assert got[0] == [without_headers(r) for r in truth[0][10:1400]]

    # assign and startingTimestamp: from the first record at or after a record's time
    middle = truth[1][700]
    df = load(
        session,
        {
            **options(broker, s3, topic),
            "subscribe": None,
            "assign": json.dumps({topic: [1]}),
            "startingTimestamp": str(middle.timestamp_ms),
        },
    )
    first = min(r.offset for r in truth[1] if r.timestamp_ms >= middle.timestamp_ms)
    assert df.agg({"offset": "min"}).first()[0] == first
    assert df.count() == len(truth[1]) - first


def test_brokers_alone_give_the_same_rows(session: Any, broker: BrokerProcess, topic: str) -> None:
    """Without object store options every offset is fetched through the broker."""
    truth = consume_all(broker, topic)
    df = load(session, {"kafka.bootstrap.servers": broker.bootstrap, "subscribePattern": topic})
    got = spark_rows(df.collect())
    for p in range(PARTITIONS):
        assert got[p] == [without_headers(r) for r in truth[p]]


def test_write_round_trip(session: Any, broker: BrokerProcess, s3: EmbeddedS3, topic: str) -> None:
    """Rows written with format("sluice") (key, value, headers, partition; the topic as an
    option, then as a column with string values) read back as they were."""
    target = unique("spark-written")
    create_topic(broker, target)
    source = load(session, options(broker, s3, topic, includeHeaders="true"))
    out = source.select(
        "key", "value", "headers", (F.col("offset") % PARTITIONS).cast("int").alias("partition")
    )
    out.write.format("sluice").mode("append").option(
        "kafka.bootstrap.servers", broker.bootstrap
    ).option("topic", target).save()
    extra = session.createDataFrame(
        [(target, f"extra-{i}", f"{i}|") for i in range(10)],
        "topic string, key string, value string",
    )
    extra.write.format("sluice").mode("append").option(
        "kafka.bootstrap.servers", broker.bootstrap
    ).save()

    def content(r: Any) -> tuple[Any, ...]:
        return (r["key"], r["value"], tuple((h["key"], h["value"]) for h in r["headers"] or ()))

    expected = {(content(r), r["partition"]) for r in out.collect()}
    back = load(session, options(broker, s3, target, includeHeaders="true")).collect()
    assert len(back) == RECORDS + 300 + 10
    copied = {(content(r), r["partition"]) for r in back if not r["key"].startswith(b"extra-")}
    assert copied == expected
    extras = {(r["key"], r["value"]) for r in back if r["key"].startswith(b"extra-")}
    assert extras == {(b"extra-%d" % i, b"%d|" % i) for i in range(10)}


def test_register_and_discovery(session: Any, broker: BrokerProcess, topic: str) -> None:
    """The session never called ``spark.register`` before: format("sluice") came from
    Spark's discovery of ``pyspark_sluice``. Registering explicitly works as well."""
    assert DefaultSource.name() == spark.FORMAT == "sluice"
    spark.register(session)
    df = load(session, {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    assert df.count() == RECORDS + 300


def test_fail_on_data_loss(session: Any, broker: BrokerProcess, s3: EmbeddedS3) -> None:
    """Offsets asked for below the log start (DeleteRecords moved it, into the tiered part):
    failOnDataLoss=true (the default) fails the query saying why; false reads from the log
    start, as Spark's Kafka source does."""
    name = unique("spark-deleted")
    create_topic(broker, name)
    produce(broker, name, 0, RECORDS)
    wait_tiered(broker, name)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition(name, 0, 100)])
    for future in futures.values():
        future.result(30)
    starting = json.dumps({name: {"0": 0, "1": -2, "2": -2}})
    opts = options(broker, s3, name, startingOffsets=starting)
    with pytest.raises(Exception, match="below the log start 100"):
        load(session, opts).count()
    rows = load(session, {**opts, "failOnDataLoss": "false"}).where("partition = 0").collect()
    assert min(r["offset"] for r in rows) == 100
    assert len(rows) == RECORDS // PARTITIONS - 100


def test_a_split_starting_inside_a_segment_uses_its_index(
    broker: BrokerProcess, s3: EmbeddedS3, topic: str
) -> None:
    """Starting in the middle of a tiered segment, the read begins at the batch the
    segment's uploaded index names, not at the segment's first byte."""
    whole = plan(read_options(options(broker, s3, topic), streaming=False))
    segment = next(s for s in whole.splits if isinstance(s, TieredSplit) and s.partition == 0)
    middle = (segment.segment_base + segment.segment_end) // 2
    starting = json.dumps({topic: {"0": middle, "1": -2, "2": -2}})
    from_middle = options(broker, s3, topic, startingOffsets=starting)
    planned = plan(read_options(from_middle, streaming=False))
    (split,) = [s for s in planned.splits if isinstance(s, TieredSplit) and s.key == segment.key]
    assert split.start == middle
    settings = store_settings(s3_options(s3))
    assert settings is not None
    position = start_position(S3ObjectStore(settings), split)
    assert 0 < position < split.size_bytes
    batches = read_tiered(
        [split],
        settings,
        include_headers=False,
        rows_per_batch=100_000,
        chunk_bytes=1 << 20,
        fail_on_data_loss=True,
    )
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(middle, segment.segment_end + 1))


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_segments_read_in_one_queue_give_the_same_rows(
    broker: BrokerProcess, s3: EmbeddedS3, topic: str, prefetch: int
) -> None:
    """A partition's tiered splits read as one input partition in small chunks, with 0, 1
    or 3 GETs queued ahead: every offset once, in order; a read left after its first batch
    (Spark stopping a task) leaves the next read whole."""
    planned = plan(read_options(options(broker, s3, topic), streaming=False))
    splits = [s for s in planned.splits if isinstance(s, TieredSplit) and s.partition == 0]
    assert len(splits) >= 2, "the partition should have several segments in the store"
    assert splits[0].size_bytes > 8 * 4096, "a segment should take several chunks"
    settings = store_settings(s3_options(s3))
    assert settings is not None

    def read() -> Any:
        return read_tiered(
            splits,
            settings,
            include_headers=False,
            rows_per_batch=50,
            chunk_bytes=4096,
            fail_on_data_loss=True,
            prefetch=prefetch,
        )

    left = read()
    assert next(left).num_rows > 0
    left.close()
    offsets = [o for b in read() for o in b.column("offset").to_pylist()]
    assert offsets == list(range(splits[0].start, splits[-1].end))
