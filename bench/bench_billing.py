"""Billing pipeline throughput: usage entries per second on local[1] and local[2].

    python -m bench.bench_billing [--scale S] [--masters local[1],local[2]] [--ingest-records N]

The issue's workload is a month of hourly usage of 100 clusters x 1,000 partitions: one
usage entry per partition and hour, 100 x 1,000 x 720 = 72M entries (``--scale 1``). The
default ``--scale 0.02`` keeps 100 clusters and the month (3,000 cluster-days: the tables'
partitions) and takes 20 partitions per cluster (1.5M entries), so that a run takes about
six minutes on 2 cores. At this scale the cost is mostly per (cluster, day) partition
(a file read and a file written each, ~10-25 ms): entries/s grows with ``--scale``. Two
stages are timed apart, each in a fresh process per Spark master (a JVM keeps its master
for life):

1. **rollup + invoice** (the pipeline's Spark work after ingest): the month is generated
   by Spark itself (``spark.range``, not timed) straight into the events table layout
   (``events/cluster=<c>/day=<d>/``, the columns the ingest writes): each cluster-hour has
   its partitions' entries in events of 100 entries (bytes_in, bytes_out,
   hot_storage_byte_ms or partition_ms in turn; 10 partitions a topic, 5 principals), one
   control-plane broker_ms event (broker types in turn), and every 50th event re-sent
   once (so dedup has copies to remove). Then ``billing.job.rebuild`` (dedup, hourly of
   every cluster-day, daily, models) and ``billing.job.invoice_all`` (the month's invoice,
   checked to have a line per cluster) are timed; entries/s = entries read / that time.
2. **ingest** (through the topic, smaller): one broker, its ``__sluice_usage`` topic with
   ``--ingest-records`` records of 100 entries each, written with confluent-kafka; then
   ``python -m billing.job --spec`` as the control plane runs it. Ingest time is the
   time between the job's first and last ``ingest`` progress lines (read, decode, the
   file sink); the whole job's wall time (JVM start, rollup and invoice included) is
   printed beside it.

Prints a table; writes nothing to bench/RESULTS.md (the figures are recorded by hand).
Every process it starts is stopped; its temporary directory is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.common import REPO
from billing import ratecard
from billing.job import SPARK_DEFAULTS, Changes, Progress, invoice_all, rebuild
from billing.output import Output
from tests.support.broker import BrokerProcess
from wire.usage import HOUR_MS, USAGE_TOPIC, Dimension, Usage, UsageEvent

T0 = 1_793_491_200_000
"""2026-11-01T00:00:00Z: the month is November 2026 (720 hours)."""
HOURS = 720
CLUSTERS = 100
PARTITIONS = 1_000
ENTRIES_PER_EVENT = 100
RESEND_EVERY = 50
TYPES = ("kafka.m5.large", "kafka.m7g.xlarge", "express.m7g.large")
DIMENSIONS = ("bytes_in", "bytes_out", "hot_storage_byte_ms", "partition_ms")


# ------------------------------------------------------------------ stage 1 (in a worker)


def session_for(master: str, scratch: Path) -> Any:
    """A SparkSession on ``master`` with the job's own settings."""

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master(master).appName("bench-billing")
    for key, value in SPARK_DEFAULTS.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.local.dir", str(scratch / "spark-local"))
    builder = builder.config("spark.driver.memory", "4g")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def generate(session: Any, events: Path, partitions: int) -> int:
    """The month's events of every cluster into ``events/cluster=<c>/day=<d>/``; returns
    the number of entries (rows) written."""

    per_cluster = HOURS * partitions
    ids = session.range(CLUSTERS * per_cluster)
    c = (F.col("id") / per_cluster).cast("long")
    rest = F.col("id") % per_cluster
    h = (rest / partitions).cast("long")
    p = rest % partitions
    e = (p / ENTRIES_PER_EVENT).cast("long")
    events_per_hour = (partitions + ENTRIES_PER_EVENT - 1) // ENTRIES_PER_EVENT
    hour_ms = F.lit(T0) + h * HOUR_MS
    start = hour_ms + e * 1000
    source = F.concat(F.lit("broker-"), (e % 3 + 1).cast("string"))
    sequence = h * events_per_hour + e
    usage = ids.select(
        F.format_string("c%03d", c).alias("cluster"),
        source.alias("source"),
        F.lit(1).cast("long").alias("epoch"),
        sequence.alias("sequence"),
        F.concat_ws("/", source, F.lit("1"), sequence.cast("string")).alias("key"),
        start.alias("start_ms"),
        (start + 1000).alias("end_ms"),
        hour_ms.alias("hour_ms"),
        F.element_at(F.array(*map(F.lit, DIMENSIONS)), (p % 4 + 1).cast("int")).alias("dimension"),
        ((F.col("id") * 7919) % 1_000_000_000).alias("quantity"),
        F.concat(F.lit("t"), (p / 10).cast("long").cast("string")).alias("topic"),
        F.concat(F.lit("User:u"), (p % 5).cast("string")).alias("principal"),
        F.lit("").alias("resource"),
        F.lit(0).alias("kafka_partition"),
        sequence.alias("kafka_offset"),
        F.date_format(F.timestamp_millis(hour_ms), "yyyy-MM-dd").alias("day"),
    )
    resent = usage.where(F.col("sequence") % RESEND_EVERY == 0).withColumn(
        "kafka_offset", F.col("kafka_offset") + 10**9
    )
    brokers = session.range(CLUSTERS * HOURS).select(
        F.format_string("c%03d", (F.col("id") / HOURS).cast("long")).alias("cluster"),
        F.lit("controlplane").alias("source"),
        F.lit(0).cast("long").alias("epoch"),
        (F.lit(T0) + (F.col("id") % HOURS) * HOUR_MS).alias("sequence"),
        F.concat(
            F.lit("controlplane/0/"), (F.lit(T0) + (F.col("id") % HOURS) * HOUR_MS).cast("string")
        ).alias("key"),
        (F.lit(T0) + (F.col("id") % HOURS) * HOUR_MS).alias("start_ms"),
        (F.lit(T0) + (F.col("id") % HOURS) * HOUR_MS + 60_000).alias("end_ms"),
        (F.lit(T0) + (F.col("id") % HOURS) * HOUR_MS).alias("hour_ms"),
        F.lit("broker_ms").alias("dimension"),
        F.lit(3 * HOUR_MS).cast("long").alias("quantity"),
        F.lit("").alias("topic"),
        F.lit("").alias("principal"),
        F.element_at(
            F.array(*map(F.lit, TYPES)), ((F.col("id") / HOURS).cast("long") % 3 + 1).cast("int")
        ).alias("resource"),
        F.lit(0).alias("kafka_partition"),
        (F.lit(2 * 10**9) + F.col("id") % HOURS).alias("kafka_offset"),
        F.date_format(
            F.timestamp_millis(F.lit(T0) + (F.col("id") % HOURS) * HOUR_MS), "yyyy-MM-dd"
        ).alias("day"),
    )
    rows = usage.unionByName(resent).unionByName(brokers)
    rows = rows.withColumn("kafka_partition", F.col("kafka_partition").cast("int"))
    rows = rows.repartition("cluster", "day")  # one file per cluster-day
    rows.write.mode("overwrite").partitionBy("cluster", "day").parquet(str(events))
    return int(session.read.parquet(str(events)).count())


def rollup_worker(args: argparse.Namespace) -> None:
    """Stage 1 in this process: generate (if asked) or time rollup + invoice."""

    scratch = Path(args.dir)
    session = session_for(args.master, scratch)
    try:
        events = scratch / "events"
        if args.generate:
            t = time.monotonic()
            entries = generate(session, events, args.partitions)
            print(json.dumps({"entries": entries, "seconds": time.monotonic() - t}))
            return
        out = scratch / f"out-{args.master.replace('[', '-').replace(']', '')}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        (out / "events").symlink_to(events)
        output = Output(out)
        days = [f"2026-11-{d:02d}" for d in range(1, 31)]
        clusters = {f"c{c:03d}": days for c in range(CLUSTERS)}
        card = ratecard.load_default()
        progress = Progress(lambda doc: None)
        busy = os.getloadavg()[0]
        t0 = time.monotonic()
        files = sorted((out / "events").glob("cluster=*/day=*/*.parquet"))
        rebuild(session, output, Changes(days=clusters, files=files), progress)
        t1 = time.monotonic()
        months = invoice_all(session, card, output, progress, clusters)
        t2 = time.monotonic()
        invoice = json.loads((out / "invoices" / "2026-11.json").read_text())
        billed = {line["cluster"] for line in invoice["lines"]}
        if months != ["2026-11"] or len(billed) != CLUSTERS:
            raise SystemExit(f"invoice has {len(billed)} clusters, months {months}")
        print(
            json.dumps(
                {
                    "rollup": t1 - t0,
                    "invoice": t2 - t1,
                    "lines": len(invoice["lines"]),
                    "busy": busy,
                }
            )
        )
    finally:
        session.stop()


def worker(master: str, scratch: Path, partitions: int, *, generate_only: bool) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "bench.bench_billing",
        "--worker",
        "--master",
        master,
        "--dir",
        str(scratch),
        "--partitions",
        str(partitions),
    ]
    if generate_only:
        cmd.append("--generate")
    with open(scratch / "worker.log", "ab") as log:
        done = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=log, check=False)
    if done.returncode != 0:
        tail = (scratch / "worker.log").read_text()[-2000:]
        raise SystemExit(f"worker {master} failed ({done.returncode}): {tail}")
    return dict(json.loads(done.stdout.decode().strip().splitlines()[-1]))


# ------------------------------------------------------------------ stage 2: ingest


def ingest_events(records: int) -> list[UsageEvent]:
    """``records`` broker events of 100 entries each, spread over November's hours."""
    out = []
    for n in range(records):
        start = T0 + (n % HOURS) * HOUR_MS + (n // HOURS) * 1000 % (HOUR_MS - 1000)
        usage = tuple(
            Usage(
                Dimension(DIMENSIONS[i % 4]),
                1000 + n + i,
                topic=f"t{i // 10}",
                principal=f"User:u{i % 5}",
            )
            for i in range(ENTRIES_PER_EVENT)
        )
        out.append(UsageEvent("broker-1", 1, n, start, start + 1000, usage))
    return out


@dataclass
class IngestFigures:
    master: str
    entries: int
    ingest_s: float
    job_s: float


def run_ingest(master: str, scratch: Path, bootstrap: str, entries: int) -> IngestFigures:
    run = scratch / f"ingest-{master.replace('[', '-').replace(']', '')}"
    spec = {
        "output": str(run / "out"),
        "checkpoints": str(run / "checkpoints"),
        "rate_card": "",
        "spark_master": master,
        "clusters": [{"name": "bench", "id": "bench", "bootstrap": bootstrap, "options": {}}],
    }
    run.mkdir(parents=True)
    path = run / "spec.json"
    path.write_text(json.dumps(spec))
    path.chmod(0o600)
    t0 = time.monotonic()
    stamps: list[tuple[float, dict[str, Any]]] = []
    with open(run / "job.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "billing.job", "--spec", str(path)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )
        assert proc.stdout is not None
        for raw in proc.stdout:
            stamps.append((time.monotonic(), json.loads(raw)))
        proc.stdout.close()
        rc = proc.wait()
    job_s = time.monotonic() - t0
    if rc != 0:
        raise SystemExit(f"billing job on {master} failed: {stamps[-1][1] if stamps else rc}")
    ingest = [t for t, doc in stamps if doc["stage"] == "ingest"]
    return IngestFigures(master, entries, ingest[-1] - ingest[0], job_s)


def ingest_stage(masters: list[str], scratch: Path, records: int) -> list[IngestFigures]:

    broker = BrokerProcess(scratch / "broker", {"usage.metering.enable": "false"})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(USAGE_TOPIC, 1, 1)])[USAGE_TOPIC].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for i, event in enumerate(ingest_events(records)):
            producer.produce(USAGE_TOPIC, key=event.key, value=event.encode())
            if i % 1000 == 0:
                producer.poll(0)
        producer.flush(60)
        entries = records * ENTRIES_PER_EVENT
        return [run_ingest(m, scratch, broker.bootstrap, entries) for m in masters]
    finally:
        broker.stop()
        broker.kill()


# ------------------------------------------------------------------ main


def rate(entries: float, seconds: float) -> str:
    return f"{entries / seconds:,.0f}" if seconds > 0 else "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--scale", type=float, default=0.02, help="share of the 1,000 partitions")
    parser.add_argument("--masters", default="local[1],local[2]", help="Spark masters to compare")
    parser.add_argument(
        "--ingest-records", type=int, default=2000, help="records of 100 entries (0: no ingest)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="parent of the temp dir")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--master", default="local[2]", help=argparse.SUPPRESS)
    parser.add_argument("--dir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--partitions", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        rollup_worker(args)
        return 0
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    partitions = max(1, round(PARTITIONS * args.scale))
    scratch = Path(tempfile.mkdtemp(prefix="bench-billing-", dir=args.workdir))
    try:
        print(
            f"workload: {CLUSTERS} clusters x {partitions} partitions x {HOURS} hours "
            f"(scale {args.scale}), every {RESEND_EVERY}th event re-sent; "
            f"ingest: {args.ingest_records} records x {ENTRIES_PER_EVENT} entries",
            flush=True,
        )
        made = worker("local[2]", scratch, partitions, generate_only=True)
        entries = int(made["entries"])
        print(f"generated {entries:,} entries in {made['seconds']:.1f} s", flush=True)
        rollups = {}
        for master in masters:
            rollups[master] = worker(master, scratch, partitions, generate_only=False)
            r = rollups[master]
            print(f"{master}: rollup {r['rollup']:.1f} s, invoice {r['invoice']:.1f} s", flush=True)
        ingests = ingest_stage(masters, scratch, args.ingest_records) if args.ingest_records else []
        print()
        print("| stage | master | entries | seconds | entries/s | x local[1] |")
        print("|---|---|---|---|---|---|")
        base = None
        for master in masters:
            r = rollups[master]
            seconds = r["rollup"] + r["invoice"]
            speed = entries / seconds
            base = base or speed
            print(
                f"| rollup + invoice | {master} | {entries:,} | {seconds:.1f} "
                f"(rollup {r['rollup']:.1f}, invoice {r['invoice']:.1f}) "
                f"| {rate(entries, seconds)} | {speed / base:.2f} |"
            )
        base = None
        for f in ingests:
            speed = f.entries / f.ingest_s
            base = base or speed
            print(
                f"| ingest (topic -> events) | {f.master} | {f.entries:,} | {f.ingest_s:.1f} "
                f"(whole job {f.job_s:.1f}) | {rate(f.entries, f.ingest_s)} | {speed / base:.2f} |"
            )
        full = CLUSTERS * PARTITIONS * HOURS
        if "local[2]" in rollups:
            r = rollups["local[2]"]
            per_s = entries / (r["rollup"] + r["invoice"])
            print(
                f"\nthe full month ({full:,} entries) at local[2]'s rate: "
                f"~{full / per_s / 60:.0f} min of rollup + invoice"
            )
        loads = ", ".join(f"{m} {r['busy']:.1f}" for m, r in rollups.items())
        print(f"machine: {os.cpu_count()} cores; load average before each rollup: {loads}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
