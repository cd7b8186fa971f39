"""Spark's own Kafka source and sink (``org.apache.spark:spark-sql-kafka-0-10_2.13``, the
version of the pinned pyspark, from Maven Central through ``make spark-kafka``) against a
Sluice broker: format("kafka") reads a mostly tiered topic through the broker and gets the
rows a plain consumer and format("sluice") get; format("kafka") writes, and both read it
back. Proof that the brokers serve Spark's stock connector (the Java client underneath)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import unique
from tests.spark.conftest import (
    PARTITIONS,
    consume_all,
    create_topic,
    local_first_offsets,
    produce,
    s3_options,
    spark_rows,
    wait_tiered,
)
from tests.support.broker import BrokerProcess
from tests.support.spark_session import stock_connector_jars
from tiered.embedded_s3 import EmbeddedS3

RECORDS = 3000

pytestmark = pytest.mark.skipif(
    not stock_connector_jars(),
    reason="Spark's Kafka connector was not fetched (`make spark-kafka` needs mvn, java and "
    "Maven Central)",
)


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    name = unique("stock")
    create_topic(broker, name)
    produce(broker, name, 0, RECORDS)
    wait_tiered(broker, name)
    produce(broker, name, RECORDS, 200)
    return name


def kafka_read(session: Any, broker: BrokerProcess, topic: str) -> Any:
    return (
        session.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )


def test_stock_connector_reads_tiered_and_hot_data(
    session: Any, broker: BrokerProcess, s3: EmbeddedS3, topic: str
) -> None:
    assert all(first > 0 for first in local_first_offsets(broker, topic)), "nothing tiered"
    truth = consume_all(broker, topic)
    stock = kafka_read(session, broker, topic)
    assert stock.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    got = spark_rows(stock.orderBy("partition", "offset").collect())
    for p in range(PARTITIONS):
        assert got[p] == truth[p], f"partition {p}"

    ours = (
        session.read.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .options(**s3_options(s3))
        .load()
    )
    assert ours.schema == stock.schema
    assert sorted(ours.collect()) == sorted(stock.collect())


def test_stock_connector_writes_and_both_read_back(
    session: Any, broker: BrokerProcess, s3: EmbeddedS3
) -> None:
    name = unique("stock-write")
    create_topic(broker, name)
    rows = [(f"k{i}", f"value {i}", i % PARTITIONS) for i in range(500)]
    df = session.createDataFrame(rows, "key string, value string, partition int")
    df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", name
    ).save()

    truth = consume_all(broker, name)
    assert sum(len(r) for r in truth.values()) == len(rows)
    written = {(r.key, r.value, r.partition) for p in truth.values() for r in p}
    assert written == {(k.encode(), v.encode(), p) for k, v, p in rows}

    stock = kafka_read(session, broker, name).select("key", "value", "partition", "offset")
    ours = (
        session.read.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", name)
        .options(**s3_options(s3))
        .load()
        .select("key", "value", "partition", "offset")
    )
    assert sorted(stock.collect()) == sorted(ours.collect())
    assert stock.count() == len(rows)
