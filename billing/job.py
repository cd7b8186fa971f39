"""``python -m billing.job --spec FILE``: one run of the billing pipeline.

1. ingest: each cluster's ``__sluice_usage`` into its incarnation's sink
   ``events/cluster=<name>/cluster_id=<id>/`` (``ingest.py``: ``readStream.format("sluice")``,
   Trigger.AvailableNow, checkpoint ``checkpoints/<name>-<id>``), then
   ``offsets/<name>.json``; each archive file of the spec into ``<sink>/archive/``
   (``archive.py``);
2. rollup: for the days of a cluster NAME whose files changed since the last complete run
   (the files each day has in the logs of every sink of that name, deleted clusters' too,
   and its archive files' contents, against ``checkpoints/_rolled_up/cluster=<name>.json``),
   dedup per (name, id, key) and ``hourly/``; ``daily/`` and ``models/`` of those names
   (``rollup.py``);
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
import hashlib
import json
import os
import shutil
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
from billing.archive import ArchiveResult, write_archive
from billing.ingest import (
    ClusterUnreachable,
    IngestResult,
    SinkOwnedByAnotherCluster,
    archive_files,
    committed_files,
    day_of_file,
    discover_sinks,
    has_usage_topic,
    ingest,
    sink_dir,
)
from billing.invoice import InvoiceError, compute_invoice
from billing.output import Output, OutputError
from billing.ratecard import RateCard, RateCardError
from billing.spec import ClusterSource, JobSpec, SpecError, load_spec
from spark.spark_home import use_installed_pyspark
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
SPARK_LOCAL = "_spark_local"
"""Spark's scratch directory, under the checkpoints."""
SPARK_HOME = "_spark_home"
"""The Spark home whose Python workers import the installed pyspark
(:mod:`spark.spark_home`), under the checkpoints."""


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
    archived: list[ArchiveResult] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    days: dict[str, list[str]] = field(default_factory=dict)
    """Days rolled up, per cluster."""
    months: list[str] = field(default_factory=list)


def start_session(spec: JobSpec) -> SparkSession:
    """The job's SparkSession on the spec's master (unchanged), with ``format("sluice")``.
    Spark's scratch files (``spark.local.dir``: block manager, shuffle, Python files) go to
    ``checkpoints/_spark_local``, emptied first: what a killed run left there goes with the
    next run, not into the machine's /tmp."""
    if spec.spark_master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    use_installed_pyspark(spec.checkpoints / SPARK_HOME)
    scratch = spec.checkpoints / SPARK_LOCAL
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.master(spec.spark_master).appName("sluice-billing")
    conf = {"spark.local.dir": str(scratch), **SPARK_DEFAULTS, **spec.spark_conf}
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    spark.register(session)
    return session


def load_card(spec: JobSpec) -> RateCard:
    if not spec.rate_card:
        return ratecard.load_default()
    return ratecard.load(Path(spec.rate_card))


def rolled_up_path(spec: JobSpec, name: str) -> Path:
    """The marks of cluster NAME (every incarnation). Marks of the layout before id-sinks
    (``<name>-<id>.json``, files per day) are not read: each day is rolled up once again."""
    return spec.checkpoints / "_rolled_up" / f"cluster={name}.json"


def read_rolled_up(path: Path) -> dict[str, str]:
    """Each day's digest already rolled up (the last complete run's view of the files)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        warn(f"{path} is unreadable ({exc}): rolling up every day of its cluster again")
        return {}
    return {str(d): str(h) for d, h in (doc.get("day_digests") or {}).items()}


def write_rolled_up(path: Path, per_day: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"day_digests": per_day}, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


WORKER_START_FAILURES = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
)
"""What Spark says when a Python worker it started did not connect back in its fixed 10 s."""


def worker_start_failed(exc: BaseException) -> bool:
    text = str(exc)
    return any(failure in text for failure in WORKER_START_FAILURES)


def ingest_retrying(spec: JobSpec, name: str, run: Callable[[], IngestResult]) -> IngestResult:
    """``run()`` (one cluster's ingest query), started again from its checkpoint while Spark
    fails to start a Python worker, up to ``limits.ingest_attempts`` times in all."""
    attempts = spec.limits.ingest_attempts
    for attempt in range(1, attempts):
        try:
            return run()
        except (PySparkException, Py4JError) as exc:
            if not worker_start_failed(exc):
                raise
            warn(
                f"cluster {name}: Spark could not start a Python worker (attempt {attempt} "
                f"of limits.ingest_attempts={attempts}); the query resumes from its checkpoint"
            )
    return run()


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

        def query(
            source: ClusterSource = source, on_batch: Callable[[int, int], None] = batch
        ) -> IngestResult:
            return ingest(
                session,
                source,
                sink_dir(output.events_root, source.name, source.id),
                spec.checkpoints / source.checkpoint_name,
                malformed_cap=spec.limits.malformed_reported,
                on_batch=on_batch,
            )

        done = ingest_retrying(spec, name, query)
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


def archive_all(spec: JobSpec, output: Output, progress: Progress, result: RunResult) -> None:
    """Each archive file of the spec into its incarnation's ``archive/`` rows."""
    total = len(spec.archives)
    for i, source in enumerate(spec.archives):
        where = f"archive {source.path} of {source.name} (id {source.id})"
        sink = sink_dir(output.events_root, source.name, source.id)
        done = write_archive(source, sink, spec.limits.malformed_reported)
        result.archived.append(done)
        if done.missing:
            warn(f"{where} is gone: the rows read from it before are kept")
            progress("ingest", source.name, i + 1, total, f"{where}: missing")
            continue
        for number, reason in done.samples:
            warn(f"{where}: malformed usage event at line {number} skipped: {reason}")
        if done.malformed > len(done.samples):
            warn(f"{where}: {done.malformed - len(done.samples)} more malformed skipped")
        progress(
            "ingest",
            source.name,
            i + 1,
            total,
            f"{where}: {done.events} events over {len(done.days)} days, "
            f"{done.written} day files rewritten",
        )


@dataclass
class Changes:
    """What the events tables hold that the last complete run did not roll up."""

    days: dict[str, list[str]] = field(default_factory=dict)
    """Per cluster NAME, the days whose files the last complete run did not see."""
    files: list[Path] = field(default_factory=list)
    """The committed and archive files of those days, of every sink of the name."""
    legacy_ids: dict[str, str] = field(default_factory=dict)
    """The id of each name's sink of the layout before id-sinks."""
    all_files: list[Path] = field(default_factory=list)
    """Every committed and archive file of every sink (what an s3:// output mirrors)."""
    marks: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per cluster NAME, each day's digest: recorded once this run is complete."""


def changed_days(session: SparkSession, output: Output, spec: JobSpec) -> Changes:
    """The days to roll up again: per cluster NAME, the files of each day in every sink of
    that name on disk (each sink's log read on its own; archive files by content) against
    ``checkpoints/_rolled_up/cluster=<name>.json``."""
    changes = Changes()
    per_name: dict[str, dict[str, list[tuple[str, Path]]]] = {}
    for sink in discover_sinks(output.events_root):
        if sink.legacy:
            changes.legacy_ids[sink.name] = sink.id
        days = per_name.setdefault(sink.name, {})
        for relative in committed_files(session, sink.directory) + archive_files(sink):
            day = day_of_file(relative)
            if day is None:
                continue
            path = sink.directory / relative
            changes.all_files.append(path)
            label = path.relative_to(output.events_root).as_posix()
            if relative.startswith("archive/"):  # rewritten in place: by content
                label += ":" + hashlib.sha256(path.read_bytes()).hexdigest()
            days.setdefault(day, []).append((label, path))
    for name, days in sorted(per_name.items()):
        digests = {
            day: hashlib.sha256("\n".join(sorted(label for label, _ in f)).encode()).hexdigest()
            for day, f in sorted(days.items())
        }
        before = read_rolled_up(rolled_up_path(spec, name))
        changed = sorted(d for d, h in digests.items() if before.get(d) != h)
        if changed:
            changes.days[name] = changed
            changes.files += [path for d in changed for _, path in days[d]]
        changes.marks[name] = digests
    return changes


def rebuild(
    session: SparkSession,
    output: Output,
    changes: Changes,
    progress: Progress,
) -> None:
    """Hourly usage of the changed days (per cluster NAME) from their committed event and
    archive files, then daily usage and pricing models of those clusters."""
    days = changes.days
    total = 3
    days_total = sum(len(d) for d in days.values())
    hourly_path, daily_path, models_path = (output.table(t) for t in ("hourly", "daily", "models"))
    if days:
        touched = sorted(days)
        progress("rollup", "", 0, total, f"hourly usage of {days_total} cluster-days")
        events = rollup.read_event_files(session, changes.files, changes.legacy_ids)
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
        archive_all(spec, output, progress, result)
        changes = changed_days(session, output, spec)
        result.days = changes.days
        rebuild(session, output, changes, progress)
        result.months = invoice_all(session, card, output, progress, changes.days)
        stats = output.publish(changes.all_files)
        if stats is not None:
            progress(
                "invoice",
                "",
                len(result.months),
                len(result.months),
                f"published to {spec.output}: {stats.uploaded} files uploaded, "
                f"{stats.deleted} deleted, {stats.unchanged} unchanged",
            )
        for name, per_day in changes.marks.items():
            write_rolled_up(rolled_up_path(spec, name), per_day)
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
                f"({malformed} malformed skipped), "
                f"{sum(a.events for a in result.archived)} events from "
                f"{len(spec.archives)} archives, {sum(len(d) for d in result.days.values())} "
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
