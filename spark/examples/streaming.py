"""Streaming: keep a parquet copy of a topic up to date, exactly once, with
``readStream.format("sluice")`` and Trigger.AvailableNow.

Against `make demo`'s cluster::

    .venv/bin/python spark/examples/streaming.py --dir /tmp/sluice-stream
    echo more | cloudctl produce --cluster sluice-demo demo-history
    .venv/bin/python spark/examples/streaming.py --dir /tmp/sluice-stream    # only the new rows

Each run reads what arrived since the last one (the offsets are in ``DIR/checkpoint``),
in micro-batches of at most --max-per-trigger offsets, appends it to ``DIR/table`` and
stops. The first run starts at the earliest offset, so it backfills the tiered history
first. A run that is killed leaves nothing half-written: the next one redoes the batch
that was not committed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

import spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", default="sluice-demo")
    parser.add_argument("--topic", default="demo-history")
    parser.add_argument("--dir", default="sluice-stream", help="checkpoint and table go here")
    parser.add_argument("--max-per-trigger", type=int, default=50_000)
    args = parser.parse_args()
    base = Path(args.dir).absolute()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sluice-streaming")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    spark.register(session)  # format("sluice"); Spark's discovery finds it as well
    try:
        source = {"sluice.cluster": args.cluster, "subscribe": args.topic}
        stream_once(session, source, base, args.max_per_trigger)
    finally:
        session.stop()


def stream_once(
    session: SparkSession, options: dict[str, str], base: Path, max_per_trigger: int
) -> int:
    """The job: what arrived since the last run, appended to ``base/table``; the count of
    new rows. ``options`` name the cluster and the topic (any option of format("sluice"))."""
    table = base / "table"
    before = session.read.parquet(str(table)).count() if table.exists() else 0
    stream = (
        session.readStream.format("sluice")
        .options(**options)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
        .load()
    )
    query = (
        stream.writeStream.format("parquet")
        .option("path", str(table))
        .option("checkpointLocation", str(base / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    batches = len(query.recentProgress)
    after = session.read.parquet(str(table)).count()
    topic = options["subscribe"]
    print(f"{topic}: {after - before:,} new rows in {batches} micro-batch(es), {after:,} in all")
    return after - before


if __name__ == "__main__":
    main()
