"""Backfill: read a topic's whole history, tiered and hot, with format("sluice").

Against `make demo`'s cluster (the control plane keeps running after the demo)::

    .venv/bin/python spark/examples/backfill.py                       # sluice-demo, demo-history
    .venv/bin/python spark/examples/backfill.py --cluster C --topic T --out /tmp/history.parquet

The cluster is named, not addressed: its bootstrap servers and object store come from the
control plane (``$SLUICE_HOME``, as for cloudctl). Segments in the object store are read by
the executors straight from it; only the hot tail goes through a broker. The job prints how
the read was split, a per-partition summary, and writes the rows as parquet when --out is
given. The same job with ``format("kafka")`` and ``kafka.bootstrap.servers`` runs on Spark's
own Kafka source.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

import spark
from spark.options import read_options
from spark.planning import TieredSplit, plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", default="sluice-demo")
    parser.add_argument("--topic", default="demo-history")
    parser.add_argument("--out", help="write the rows here as parquet")
    args = parser.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sluice-backfill")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    spark.register(session)  # format("sluice"); Spark's discovery finds it as well
    try:
        backfill(session, {"sluice.cluster": args.cluster, "subscribe": args.topic}, args.out)
    finally:
        session.stop()


def backfill(session: SparkSession, options: dict[str, str], out: str | None = None) -> list[Row]:
    """The job: the topic from offset 0, summarised per partition (the rows printed).
    ``options`` name the cluster and the topic (any option of format("sluice"))."""
    show_plan(options)
    started = time.monotonic()
    history = (
        session.read.format("sluice")
        .options(**options)
        .option("startingOffsets", "earliest")
        .load()
    )
    summary = (
        history.groupBy("partition")
        .agg(
            F.count("*").alias("records"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.sum(F.length("value")).alias("value_bytes"),
            F.min("timestamp").alias("oldest"),
            F.max("timestamp").alias("newest"),
        )
        .orderBy("partition")
    )
    summary.show(truncate=False)
    rows = summary.collect()
    if out:
        history.write.mode("overwrite").parquet(out)
        print(f"rows written to {out}")
    print(f"backfill of {options['subscribe']} took {time.monotonic() - started:.1f} s")
    return rows


def show_plan(options: dict[str, str]) -> None:
    """How the read splits: one input partition per tiered segment, one hot tail per
    partition (the same planning Spark runs; printed for the curious)."""
    planned = plan(read_options(options, streaming=False))
    tiered = [s for s in planned.splits if isinstance(s, TieredSplit)]
    hot = [s for s in planned.splits if not isinstance(s, TieredSplit)]
    print(
        f"{len(planned.splits)} input partitions: {len(tiered)} tiered segments "
        f"({sum(s.end - s.start for s in tiered):,} offsets, read from the object store), "
        f"{len(hot)} hot ({sum(s.end - s.start for s in hot):,} offsets, read from brokers)"
    )


if __name__ == "__main__":
    main()
