"""``python -m billing.job --spec FILE``: one run of the billing pipeline.

1. ingest: each cluster's ``__sluice_usage`` into ``events/cluster=<name>/`` (``ingest.py``:
   ``readStream.format("sluice")``, Trigger.AvailableNow, checkpoint
   ``checkpoints/<name>-<id>``), then ``offsets/<name>.json``;
2. rollup: for the days that received events since the last complete run (by the files
   each day's partition has in the sink log, against ``checkpoints/_rolled_up/<name>-<id>.json``),
   dedup and ``hourly/``; ``daily/`` and ``models/`` of those clusters (``rollup.py``);
3. invoice: ``invoices/YYYY-MM.json`` for every month with such a day
   (``billing.invoice.compute_invoice`` over the month's usage of every cluster);
4. publish (s3:// outputs: ``output.py``), then the rolled-up marks.

A run killed anywhere is repeated by the next one: events are exactly once in the sink,
and the marks move only after the tables, invoices and uploads are done.

Progress: one JSON object per line on stdout, ``{"stage": "ingest"|"rollup"|"invoice"|"done",
"cluster": ..., "done": i, "total": n, "message": ...}``; on failure
``{"stage": "failed", "message": ...}`` and exit status 1. Warnings (malformed usage
records) go to stderr. A cluster that does not answer is reported and the others are billed;
the run then ends as failed, naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import spark
from billing import ratecard, rollup
from billing.ingest import (
    ClusterUnreachable,
    IngestResult,
    SinkOwnedByAnotherCluster,
    committed_files,
    files_per_day,
    has_usage_topic,
    ingest,
)
from billing.invoice import InvoiceError, compute_invoice
from billing.output import Output, OutputError
from billing.ratecard import RateCard, RateCardError
from billing.spec import ClusterSource, JobSpec, SpecError, load_spec
from wire.usage import USAGE_TOPIC

SPARK_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.streaming.stopGracefullyOnShutdown": "false",
}
"""Settings of the job's session; the spec's ``spark_conf`` wins."""


class JobFailed(RuntimeError):
    """The run failed; the message says what and what to do."""


Emit = Callable[[dict[str, Any]], None]


def print_progress(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def warn(message: str) -> None:
    sys.stderr.write(f"billing: warning: {message}\n")
    sys.stderr.flush()


@dataclass
class Progress:
    emit: Emit

    def __call__(self, stage: str, cluster: str, done: int, total: int, message: str) -> None:
        self.emit(
            {"stage": stage, "cluster": cluster, "done": done, "total": total, "message": message}
        )


@dataclass
class RunResult:
    ingested: list[IngestResult] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    days: dict[str, list[str]] = field(default_factory=dict)
    """Days rolled up, per cluster."""
    months: list[str] = field(default_factory=list)


def start_session(spec: JobSpec) -> SparkSession:
    """The job's SparkSession on the spec's master (unchanged), with ``format("sluice")``."""
    if spec.spark_master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(spec.spark_master).appName("sluice-billing")
    for key, value in {**SPARK_DEFAULTS, **spec.spark_conf}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    spark.register(session)
    return session


def load_card(spec: JobSpec) -> RateCard:
    if not spec.rate_card:
        return ratecard.load_default()
    return ratecard.load(Path(spec.rate_card))


def rolled_up_path(spec: JobSpec, source: ClusterSource) -> Path:
    return spec.checkpoints / "_rolled_up" / f"{source.checkpoint_name}.json"


def read_rolled_up(path: Path) -> dict[str, int]:
    """Files per day already rolled up (the last complete run's view of the sink log)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        warn(f"{path} is unreadable ({exc}): rolling up every day of its cluster again")
        return {}
    return {str(d): int(n) for d, n in (doc.get("files_per_day") or {}).items()}


def write_rolled_up(path: Path, per_day: dict[str, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"files_per_day": per_day}, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def ingest_all(
    session: SparkSession, spec: JobSpec, output: Output, progress: Progress, result: RunResult
) -> None:
    total = len(spec.clusters)
    for i, source in enumerate(spec.clusters):
        name = source.name
        progress("ingest", name, i, total, f"reading {USAGE_TOPIC} of {name}")
        try:
            exists = has_usage_topic(source, spec.limits.cluster_timeout_ms)
        except ClusterUnreachable as exc:
            result.unreachable.append(str(exc))
            progress("ingest", name, i + 1, total, f"skipped: {exc}")
            continue
        if not exists:
            result.ingested.append(IngestResult(name, topic_exists=False))
            progress("ingest", name, i + 1, total, f"{name} has no {USAGE_TOPIC} topic yet")
            continue

        def batch(batches: int, records: int, name: str = name, i: int = i) -> None:
            progress("ingest", name, i, total, f"{records} records in {batches} micro-batches")

        done = ingest(
            session,
            source,
            output.events_dir(name),
            spec.checkpoints / source.checkpoint_name,
            malformed_cap=spec.limits.malformed_reported,
            on_batch=batch,
        )
        for partition, offset, reason in done.samples:
            warn(
                f"cluster {name}: malformed usage record at {USAGE_TOPIC} partition "
                f"{partition} offset {offset} skipped: {reason}"
            )
        if done.malformed > len(done.samples):
            warn(f"cluster {name}: {done.malformed - len(done.samples)} more malformed skipped")
        offsets = {str(p): o for p, o in sorted(done.offsets.items())}
        output.write_json(
            f"offsets/{name}.json", {"topic": USAGE_TOPIC, "offsets": offsets}, publish_now=True
        )
        result.ingested.append(done)
        skipped = f", {done.malformed} malformed skipped" if done.malformed else ""
        progress(
            "ingest",
            name,
            i + 1,
            total,
            f"{done.records} records in {done.batches} micro-batches{skipped}; "
            f"next offsets {json.dumps(offsets)}",
        )


@dataclass
class Changes:
    """What the events tables hold that the last complete run did not roll up."""

    days: dict[str, list[str]] = field(default_factory=dict)
    """Per cluster, the days whose partition has files the last complete run did not see."""
    files: list[Path] = field(default_factory=list)
    """The committed files of those days."""
    committed: dict[str, list[str]] = field(default_factory=dict)
    """Per cluster, every committed file (relative to its events directory)."""
    marks: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per cluster, files per day: recorded once this run is complete."""


def changed_days(session: SparkSession, spec: JobSpec, output: Output) -> Changes:
    """The days to roll up again, from each cluster's sink log (its directory read on its
    own) against ``checkpoints/_rolled_up/<name>-<id>.json``."""
    changes = Changes()
    for source in spec.clusters:
        events_dir = output.events_dir(source.name)
        if not events_dir.is_dir():
            continue
        files = committed_files(session, events_dir)
        per_day = files_per_day(files)
        before = read_rolled_up(rolled_up_path(spec, source))
        changed = sorted(d for d, n in per_day.items() if before.get(d) != n)
        if changed:
            changes.days[source.name] = changed
            wanted = {f"day={d}" for d in changed}
            changes.files += [events_dir / f for f in files if f.split("/", 1)[0] in wanted]
        changes.committed[source.name] = files
        changes.marks[source.name] = per_day
    return changes


def rebuild(
    session: SparkSession,
    output: Output,
    days: dict[str, list[str]],
    files: list[Path],
    progress: Progress,
) -> None:
    """Hourly usage of ``days`` (per cluster) from ``files`` (their committed event files),
    then daily usage and pricing models of those clusters."""
    total = 3
    days_total = sum(len(d) for d in days.values())
    hourly_path, daily_path, models_path = (output.table(t) for t in ("hourly", "daily", "models"))
    if days:
        touched = sorted(days)
        progress("rollup", "", 0, total, f"hourly usage of {days_total} cluster-days")
        events = rollup.read_event_files(session, output.root / "events", files)
        rollup.write_partitions(
            rollup.hourly(rollup.dedup(rollup.by_cluster_day(events))),
            hourly_path,
            ["cluster", "day"],
        )
        progress("rollup", "", 1, total, f"daily usage of {len(touched)} clusters")
        hourly_rows = (
            rollup.read_table(session, hourly_path, rollup.HOURLY_SCHEMA)
            .where(F.col("cluster").isin(touched))
            .repartition("cluster")
            .persist()
        )
        try:
            type_models = rollup.broker_types(hourly_rows)
            rollup.write_partitions(rollup.daily(hourly_rows), daily_path, ["cluster"])
            progress("rollup", "", 2, total, f"pricing models of {len(touched)} clusters")
            rollup.write_partitions(
                rollup.models(hourly_rows, type_models), models_path, ["cluster"]
            )
        finally:
            hourly_rows.unpersist()
    progress("rollup", "", total, total, f"{days_total} cluster-days rolled up")


def invoice_all(
    session: SparkSession,
    card: RateCard,
    output: Output,
    progress: Progress,
    days: dict[str, list[str]],
) -> list[str]:
    """The invoice of every month that has one of ``days``; returns those months."""
    months = sorted({day[:7] for cluster_days in days.values() for day in cluster_days})
    if not months:
        return []
    progress("invoice", "", 0, len(months), f"usage of {', '.join(months)}")
    usage = rollup.month_usage(session, output.table("hourly"), output.table("models"), months)
    for i, month in enumerate(months):
        invoice = compute_invoice(month, usage[month], card)
        output.write_json(f"invoices/{month}.json", invoice.to_json())
        progress(
            "invoice",
            "",
            i + 1,
            len(months),
            f"invoice {month}: {len(invoice.lines)} lines, "
            f"total {invoice.total} {invoice.currency}",
        )
    return months


def run(spec: JobSpec, emit: Emit = print_progress) -> RunResult:
    """One run; raises :class:`JobFailed` (or the typed errors ``main`` reports)."""
    progress = Progress(emit)
    card = load_card(spec)
    output = Output.of(spec)
    if output.mirror is not None:
        output.mirror.check()
    spec.checkpoints.mkdir(parents=True, exist_ok=True)
    result = RunResult()
    session = start_session(spec)
    try:
        ingest_all(session, spec, output, progress, result)
        changes = changed_days(session, spec, output)
        result.days = changes.days
        rebuild(session, output, changes.days, changes.files, progress)
        result.months = invoice_all(session, card, output, progress, changes.days)
        stats = output.publish(changes.committed)
        if stats is not None:
            progress(
                "invoice",
                "",
                len(result.months),
                len(result.months),
                f"published to {spec.output}: {stats.uploaded} files uploaded, "
                f"{stats.deleted} deleted, {stats.unchanged} unchanged",
            )
        by_name = {s.name: s for s in spec.clusters}
        for name, per_day in changes.marks.items():
            write_rolled_up(rolled_up_path(spec, by_name[name]), per_day)
    finally:
        session.stop()
    if result.unreachable:
        raise JobFailed(
            f"{len(result.unreachable)} of {len(spec.clusters)} clusters could not be read: "
            + "; ".join(result.unreachable)
        )
    records = sum(r.records for r in result.ingested)
    malformed = sum(r.malformed for r in result.ingested)
    emit(
        {
            "stage": "done",
            "cluster": "",
            "done": len(spec.clusters),
            "total": len(spec.clusters),
            "message": (
                f"{records} usage records from {len(spec.clusters)} clusters "
                f"({malformed} malformed skipped), {sum(len(d) for d in result.days.values())} "
                f"cluster-days rolled up, invoices {', '.join(result.months) or 'unchanged'}"
            ),
        }
    )
    return result


def failure_message(exc: BaseException) -> str:
    """What a failure says: typed errors as they are, Spark's with their first lines."""
    if isinstance(
        exc,
        SpecError
        | RateCardError
        | InvoiceError
        | OutputError
        | JobFailed
        | SinkOwnedByAnotherCluster
        | rollup.UnknownBrokerTypeInUsage,
    ):
        prefix = "rate card: " if isinstance(exc, RateCardError) else ""
        return prefix + str(exc)
    if isinstance(exc, PySparkException | Py4JError):
        lines = [line for line in str(exc).splitlines() if line.strip()][:3]
        return (
            "Spark failed: "
            + " / ".join(lines)[:2000]
            + (" (the job's stderr has Spark's log; run billing again once the cause is fixed)")
        )
    return f"{type(exc).__name__}: {exc}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m billing.job", description="One run of Sluice's billing pipeline."
    )
    parser.add_argument("--spec", required=True, type=Path, help="the run's JSON spec (0600)")
    args = parser.parse_args(argv)
    try:
        if args.spec.exists() and args.spec.stat().st_mode & 0o077:
            warn(f"{args.spec} may hold credentials and is readable by others: chmod 600 it")
        run(load_spec(args.spec))
    except Exception as exc:  # every failure ends as one "failed" line
        print_progress({"stage": "failed", "message": failure_message(exc)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
