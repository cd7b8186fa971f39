"""Streaming reads of format("sluice") with real local Spark: Trigger.AvailableNow with
maxOffsetsPerTrigger over a growing, mostly tiered topic into a parquet sink, restarted
twice from its checkpoint, writes every record exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unique
from tests.spark.conftest import (
    PARTITIONS,
    consume_all,
    create_topic,
    produce,
    s3_options,
    wait_tiered,
)
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tiered.embedded_s3 import EmbeddedS3

pytestmark = pytest.mark.timeout(600)  # Spark streaming queries restarted

MAX_PER_TRIGGER = 700


def run(
    session: Any,
    broker: BrokerProcess,
    s3: EmbeddedS3,
    topic: str,
    out: Path,
    *,
    interrupt: bool = False,
) -> list[int]:
    """One run of the query, to its end with Trigger.AvailableNow, or (``interrupt``) with
    a processing-time trigger stopped right after its first non-empty micro-batch; returns
    the rows of each micro-batch."""
    stream = (
        session.readStream.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_PER_TRIGGER))
        .options(**s3_options(s3))
        .load()
    )
    writer = (
        stream.select("key", "value", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
    )
    if interrupt:
        query = writer.trigger(processingTime="500 milliseconds").start()
    else:
        query = writer.trigger(availableNow=True).start()
    try:
        if interrupt:
            wait_for(
                lambda: any(p["numInputRows"] for p in query.recentProgress),
                120,
                "a first micro-batch",
                interval=0.2,
            )
        else:
            query.awaitTermination(240)
        assert query.exception() is None, query.exception()
        return [int(p["numInputRows"]) for p in query.recentProgress]
    finally:
        query.stop()


def written(session: Any, out: Path) -> list[tuple[int, int, bytes]]:
    rows = session.read.parquet(str(out / "data")).collect()
    return sorted((r["partition"], r["offset"], r["value"]) for r in rows)


def test_available_now_restarts_exactly_once(
    session: Any, broker: BrokerProcess, s3: EmbeddedS3, tmp_path: Path
) -> None:
    topic = unique("spark-stream")
    create_topic(broker, topic)
    produce(broker, topic, 0, 3000)
    wait_tiered(broker, topic)

    total = 3000
    # run 0 reads the backlog in several batches; run 1 is stopped after one batch while
    # the topic grows; run 2 and 3 (availableNow) continue from the checkpoints
    for step, (more, interrupt) in enumerate(((0, False), (900, True), (600, False), (300, False))):
        if more:
            produce(broker, topic, total, more)
            total += more
        batches = run(session, broker, s3, topic, tmp_path, interrupt=interrupt)
        assert batches, f"run {step}: no micro-batch"
        assert max(batches) <= MAX_PER_TRIGGER + PARTITIONS, batches
        if step == 0:
            assert len([b for b in batches if b]) >= total // MAX_PER_TRIGGER, batches
        if interrupt:
            continue
        truth = consume_all(broker, topic)
        expected = sorted((p, r.offset, r.value) for p in truth for r in truth[p])
        assert len(expected) == total
        got = written(session, tmp_path)
        assert len(got) == len(set(got)), f"run {step}: duplicates"
        assert got == expected, f"run {step}: gaps or wrong rows"


def test_write_stream_copies_a_topic(
    session: Any, broker: BrokerProcess, s3: EmbeddedS3, tmp_path: Path
) -> None:
    """readStream.format("sluice") into writeStream.format("sluice"): a topic copied to
    another, key, value and headers, partition by partition (at-least-once, as Spark's
    Kafka sink; a clean run writes each record once). Order within a partition is not kept:
    Spark writes a partition's input splits in parallel tasks, as with its Kafka sink."""
    source, target = unique("spark-copy-from"), unique("spark-copy-to")
    create_topic(broker, source)
    create_topic(broker, target)
    produce(broker, source, 0, 1500)
    stream = (
        session.readStream.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .options(**s3_options(s3))
        .load()
    )
    query = (
        stream.select("key", "value", "headers", "partition")
        .writeStream.format("sluice")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(240)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    before, after = consume_all(broker, source), consume_all(broker, target)
    for p in range(PARTITIONS):
        assert sorted((r.key, r.value, r.headers) for r in after[p]) == sorted(
            (r.key, r.value, r.headers) for r in before[p]
        ), f"partition {p}"
