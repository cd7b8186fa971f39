"""Billing runs: the control plane runs the billing pipeline (``python -m billing.job``),
hourly and on demand, never two at once, and records each run (``billing_runs.py``).

A run (:meth:`BillingRunner.request`):

1. is recorded QUEUED (trigger SCHEDULED or ON_DEMAND); while a run is QUEUED or RUNNING a
   request answers with that run and starts nothing;
2. checks the rate card (``billing.rate.card``, default the packaged MSK us-east-1 card):
   one that does not load fails the run at once with the card's error (file and line);
3. writes the job's spec (billing/spec.py: the contract) to
   ``$SLUICE_HOME/billing/specs/RUN.json``, 0600 in a 0700 directory (it holds the
   secured clusters' internal credentials and the object store's key: never on a command
   line, never in a log), with every cluster that is neither CREATING nor DELETING (name,
   id, its brokers' ``--listen`` addresses and, for a secured cluster, the options that
   log in as its internal user on that SASL_PLAINTEXT listener, as the control plane
   itself does), the output (``billing.output``: ``$SLUICE_HOME/billing`` by default, or an
   ``s3://BUCKET/PREFIX`` of the object store, whose key goes in the spec's ``s3``), the
   checkpoints (``$SLUICE_HOME/billing/checkpoints``), the rate card, the Spark master
   (``spark.master``, default ``local[*]``) and the archive files of deleted clusters
   (``$SLUICE_HOME/billing-archive/NAME.ID.jsonl``, ``billing_archive.py``: the spec's
   ``archives``, ingested by every run, never removed);
4. starts ``sys.executable -m billing.job --spec FILE`` in its own session (RUNNING, with
   its pid), its stdout and stderr going to ``$SLUICE_HOME/logs/billing/RUN.log``; each
   JSON progress line of its stdout is recorded as the run's progress;
5. ends SUCCEEDED when the job exits 0 (with the pipeline's offsets of each cluster then,
   from which the usage API reads what comes after: ``billing_usage.py``), else FAILED with
   the job's own message (its ``{"stage": "failed"}`` line) or its exit code and the last
   line of its log; a job that runs longer than ``billing.run.timeout.ms`` is killed and
   the run FAILED. The spec is removed either way.

Schedule: every ``billing.schedule.interval.ms`` (one hour; 0 disables it), at
``billing.schedule.offset.ms`` (5 minutes) past each multiple of it (so hourly runs start at
:05, when the last hour's usage has been written). A scheduled run while one runs is
skipped.

Restarts: a control plane that starts with runs QUEUED or RUNNING (it was killed while they
ran) marks them FAILED ("control plane restarted") and kills the job's process group when
its leader still runs that job (``/proc/PID/cmdline`` names the run's spec). A control plane
that stops (``cloudctl down``) stops the job the same way and fails the run ("control plane
stopped").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

from billing.ratecard import RateCard, RateCardError, load, load_default
from controlplane.billing_output import (
    LocalOutput,
    OutputLocation,
    OutputReader,
    S3Output,
    read_offsets,
)
from controlplane.billing_runs import (
    BillingRun,
    BillingRuns,
    BillingRunState,
    BillingTrigger,
    Progress,
    new_run_id,
)
from controlplane.config import Settings
from controlplane.objectstore import ObjectStoreManager
from controlplane.process import is_zombie, read_cmdline
from controlplane.states import ClusterState
from controlplane.store import ClusterRecord, Store
from tiered.errors import ObjectStoreError
from tiered.object_store import S3ObjectStore
from wire.sasl import load_credentials

log = logging.getLogger("sluice.controlplane.billing")

JOB_MODULE = "billing.job"
STATE_DIR = "billing"
"""``$SLUICE_HOME/billing``: specs, checkpoints, the job's working directory (and the
output, by default)."""
LOG_DIR = Path("logs") / "billing"
KILL_GRACE_S = 10.0
"""Time a job gets after SIGTERM before SIGKILL (it has nothing to save: its progress is
in its checkpoints)."""
LINE_LIMIT = 1 << 20
"""Longest stdout line of the job read whole (longer ones are cut)."""
SKIPPED_STATES = (ClusterState.CREATING, ClusterState.DELETING)
"""Clusters a run leaves out: not started yet, or going."""
ARCHIVE_DIR = "billing-archive"
"""``$SLUICE_HOME/billing-archive``: deleted clusters' usage not billed yet
(``billing_archive.py``)."""
ARCHIVE_SUFFIX = ".jsonl"
INTERNAL_PROTOCOL = "SASL_PLAINTEXT"
"""The protocol of a secured cluster's internal listener (``cluster_security.py``)."""


def next_run_ms(now_ms: int, interval_ms: int, offset_ms: int) -> int:
    """The first scheduled time after ``now_ms``: ``offset_ms`` past a multiple of
    ``interval_ms``."""
    at = now_ms - now_ms % interval_ms + offset_ms % interval_ms
    while at <= now_ms:
        at += interval_ms
    return at


def cluster_source(cluster: ClusterRecord, addresses: list[str]) -> dict[str, Any]:
    """One cluster of the spec: the brokers' ``--listen`` addresses (the internal listener of
    a secured cluster, logged in as its internal user, as the control plane connects)."""
    options: dict[str, str] = {}
    if cluster.secured:
        credentials = load_credentials(cluster.internal_credentials)
        options = {
            "kafka.security.protocol": INTERNAL_PROTOCOL,
            "kafka.sasl.mechanism": credentials.mechanism.value,
            "kafka.sasl.username": credentials.username,
            "kafka.sasl.password": credentials.password,
        }
    return {
        "name": cluster.name,
        "id": cluster.cluster_id,
        "bootstrap": ",".join(addresses),
        "options": options,
    }


def archive_sources(home: Path) -> list[dict[str, str]]:
    """The spec's ``archives``: every ``NAME.ID.jsonl`` of ``$SLUICE_HOME/billing-archive``
    (a cluster id has no dot; temporary files end otherwise)."""
    directory = home / ARCHIVE_DIR
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob(f"*{ARCHIVE_SUFFIX}")):
        name, _, cluster_id = path.name.removesuffix(ARCHIVE_SUFFIX).rpartition(".")
        if name and cluster_id and path.is_file():
            out.append({"name": name, "id": cluster_id, "path": str(path)})
    return out


def runs_job(pid: int, spec: str) -> bool:
    """``pid`` is alive and runs the billing job of ``spec``."""
    cmdline = read_cmdline(pid) if pid > 0 else None
    return cmdline is not None and JOB_MODULE in cmdline and spec in cmdline and not is_zombie(pid)


def kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def rate_card_path(settings: Settings) -> Path | None:
    """``billing.rate.card`` as an absolute path; None: the packaged card."""
    text = settings.billing_rate_card.strip()
    return Path(text).expanduser().resolve() if text else None


def load_rate_card(path: Path | None) -> RateCard:
    """The card at ``path`` (None: the packaged one); RateCardError names the file and the
    line."""
    return load_default() if path is None else load(path)


def open_log(path: Path, work: Path) -> BinaryIO:
    """The job's log file, to append to (and its working directory, made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    return path.open("ab")


def write_private(path: Path, content: str | bytes) -> None:
    """A 0600 file (from the start), replaced atomically and durably (the file and its
    directory fsynced)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(content.encode() if isinstance(content, str) else content)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def last_line(path: Path, limit: int = 65536) -> str:
    """The last non-empty line of a file (its last ``limit`` bytes)."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - limit))
            tail = fh.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


class BillingRunner:
    """Starts, watches and records billing runs; the schedule."""

    def __init__(
        self, store: Store, settings: Settings, home: Path, object_store: ObjectStoreManager
    ) -> None:
        self.store = store
        self.settings = settings
        self.home = home
        self.object_store = object_store
        self.runs = BillingRuns(store.db)
        self.state_dir = home / STATE_DIR
        self.output: OutputLocation | None = None
        self.output_error = ""
        try:
            self.output = OutputLocation.of(settings.billing_output, home)
        except ValueError as exc:
            self.output_error = str(exc)
        self.current: BillingRun | None = None
        """The run QUEUED or RUNNING (one at most)."""
        self._task: asyncio.Task[None] | None = None
        self._scheduler: asyncio.Task[None] | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Fail what a previous control plane left running (killing its job), then start
        the schedule."""
        for run in self.runs.unfinished():
            spec = str(self.spec_path(run.id))
            if runs_job(run.pid, spec):
                log.warning(
                    "billing run %s: killing its job (pid %d), left by the last control plane",
                    run.id,
                    run.pid,
                )
                kill_group(run.pid, signal.SIGKILL)
            self.runs.finish(
                run.id,
                BillingRunState.FAILED,
                "control plane restarted while the run was "
                f"{run.state.value}; its job was stopped (run `cloudctl billing run` again)",
            )
            with contextlib.suppress(OSError):
                Path(spec).unlink()
        if self.settings.billing_schedule_interval_ms > 0:
            self._scheduler = asyncio.create_task(self._schedule(), name="billing-schedule")

    async def stop(self) -> None:
        """Stop the schedule and a running job (its run FAILED)."""
        self._stopping = True
        if self._scheduler is not None:
            self._scheduler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scheduler
        proc = self._proc
        if proc is not None and proc.returncode is None:
            await self._terminate(proc)
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _schedule(self) -> None:
        interval = self.settings.billing_schedule_interval_ms
        offset = self.settings.billing_schedule_offset_ms
        while True:
            now = int(time.time() * 1000)
            await asyncio.sleep((next_run_ms(now, interval, offset) - now) / 1000)
            try:
                run, running = self.request(BillingTrigger.SCHEDULED)
            except Exception:  # the schedule goes on (the store may be busy for a moment)
                log.exception("scheduled billing run not started")
                continue
            if running:
                log.info("scheduled billing run skipped: run %s is %s", run.id, run.state)

    # ------------------------------------------------------------------ runs

    def spec_path(self, run_id: str) -> Path:
        return self.state_dir / "specs" / f"{run_id}.json"

    def request(self, trigger: BillingTrigger) -> tuple[BillingRun, bool]:
        """Start a run, or (already_running=True) the run in progress."""
        if self.current is not None:
            return self.runs.get(self.current.id), True
        run_id = new_run_id()
        run = BillingRun(
            id=run_id,
            trigger=trigger,
            requested_at=time.time(),
            log_path=str(self.home / LOG_DIR / f"{run_id}.log"),
            output=self.output.uri if self.output is not None else "",
        )
        self.runs.insert(run)
        self.current = run
        self._task = asyncio.create_task(self._run(run), name=f"billing-{run.id}")
        return run, False

    async def _run(self, run: BillingRun) -> None:
        spec_path = self.spec_path(run.id)
        try:
            state, error, offsets = await self._execute(run, spec_path)
        except Exception as exc:  # a bug: the run must not stay RUNNING
            log.exception("billing run %s failed", run.id)
            state, error, offsets = BillingRunState.FAILED, f"internal error: {exc}", None
        finally:
            self._proc = None
            with contextlib.suppress(OSError):
                spec_path.unlink()
        self.runs.finish(run.id, state, error, offsets)
        self.current = None
        log.info("billing run %s %s%s", run.id, state.value, f": {error}" if error else "")

    async def _execute(
        self, run: BillingRun, spec_path: Path
    ) -> tuple[BillingRunState, str, dict[str, dict[int, int]] | None]:
        refused, names = await self._write_spec(spec_path)
        if refused:
            return BillingRunState.FAILED, refused, None
        returncode, failure = await self._watch(run, spec_path, names)
        if returncode == 0:
            return BillingRunState.SUCCEEDED, "", await self._offsets(names)
        if not failure:
            tail = last_line(Path(run.log_path))
            why = f"; its last line: {tail}" if tail else ""
            failure = f"the billing job exited with code {returncode}{why} (log: {run.log_path})"
        return BillingRunState.FAILED, failure, None

    async def _write_spec(self, spec_path: Path) -> tuple[str, tuple[str, ...]]:
        """Write the job's spec: ("", the clusters it reads), or (why the run cannot start,
        ())."""
        if self.output is None:
            return self.output_error, ()
        rate_card = rate_card_path(self.settings)
        try:
            await asyncio.to_thread(load_rate_card, rate_card)
        except RateCardError as exc:
            return f"{exc} (billing.rate.card)", ()
        clusters = [c for c in self.store.list_clusters() if c.state not in SKIPPED_STATES]
        spec: dict[str, Any] = {
            "output": self.output.uri,
            "checkpoints": str(self.state_dir / "checkpoints"),
            "rate_card": str(rate_card or ""),
            "spark_master": self.settings.spark_master,
            "clusters": [
                cluster_source(c, [b.address for b in self.store.brokers(c.name)]) for c in clusters
            ],
            "archives": await asyncio.to_thread(archive_sources, self.home),
        }
        if self.output.is_s3:
            try:
                spec["s3"] = await self._s3_target()
            except ObjectStoreError as exc:
                return f"the object store of {self.output.uri}: {exc}", ()
        if self._stopping:
            return "control plane stopped before the job started", ()
        write_private(spec_path, json.dumps(spec, indent=2))
        return "", tuple(c.name for c in clusters)

    async def _s3_target(self) -> dict[str, str]:
        assert self.output is not None
        endpoint = self.object_store.endpoint
        bucket = self.output.bucket
        await self.object_store.ensure_bucket(endpoint, bucket)
        if self.object_store.is_embedded(endpoint):
            key = self.object_store.cluster_key(bucket, read_only=False)
            access, secret = key.access_key_id, key.secret_access_key
        else:
            access = os.environ.get("AWS_ACCESS_KEY_ID", "")
            secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        return {
            "endpoint": endpoint,
            "access_key": access,
            "secret_key": secret,
            "region": os.environ.get("AWS_REGION", "us-east-1"),
        }

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if self.settings.spark_master.startswith("local"):
            env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        return env

    async def _watch(
        self, run: BillingRun, spec_path: Path, clusters: tuple[str, ...]
    ) -> tuple[int, str]:
        """Run the job to its end: (exit code, the message of its "failed" line or "")."""
        work = self.state_dir / "work"
        failure = ""
        with open_log(Path(run.log_path), work) as log_file:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                JOB_MODULE,
                "--spec",
                str(spec_path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
                cwd=work,
                env=self._environment(),
                start_new_session=True,
                limit=LINE_LIMIT,
            )
            self._proc = proc
            self.runs.started(run.id, proc.pid, clusters)
            log.info("billing run %s: job pid %d, log %s", run.id, proc.pid, run.log_path)
            try:
                failure = await asyncio.wait_for(
                    self._read_progress(run, proc, log_file),
                    self.settings.billing_run_timeout_ms / 1000,
                )
            except TimeoutError:
                await self._terminate(proc)
                return -1, (
                    f"the billing job ran longer than {self.settings.billing_run_timeout_ms} ms "
                    f"(billing.run.timeout.ms) and was stopped (log: {run.log_path})"
                )
            returncode = await proc.wait()
        if self._stopping and returncode != 0:
            return returncode, "control plane stopped while the run was RUNNING"
        return returncode, failure

    async def _read_progress(
        self, run: BillingRun, proc: asyncio.subprocess.Process, log_file: Any
    ) -> str:
        assert proc.stdout is not None
        failure = ""
        while True:
            try:
                raw = await proc.stdout.readline()
            except ValueError:  # a line above LINE_LIMIT: skip what is buffered
                raw = b"(a line too long to show)\n"
            if not raw:
                break
            log_file.write(raw if raw.endswith(b"\n") else raw + b"\n")
            log_file.flush()
            progress = Progress.parse(raw.decode(errors="replace"))
            if progress is None:
                continue
            self.runs.note_progress(run.id, progress)
            if progress.stage == "failed":
                failure = progress.message or "the billing job failed"
        await proc.wait()
        return failure

    async def _terminate(self, proc: asyncio.subprocess.Process) -> None:
        kill_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
        except TimeoutError:
            kill_group(proc.pid, signal.SIGKILL)
            await proc.wait()

    async def _offsets(self, clusters: tuple[str, ...]) -> dict[str, dict[int, int]]:
        """The pipeline's offsets of each cluster now (after a successful run)."""
        reader = self.reader()

        def read() -> dict[str, dict[int, int]]:
            found = {name: read_offsets(reader, name) for name in clusters}
            return {name: parts for name, parts in found.items() if parts is not None}

        try:
            return await asyncio.to_thread(read)
        except ObjectStoreError as exc:
            log.warning("billing: cannot read the pipeline's offsets: %s", exc)
            return {}

    # ------------------------------------------------------------------ the output

    def reader(self) -> OutputReader:
        """The pipeline's output, to read (ValueError when ``billing.output`` is unusable)."""
        if self.output is None:
            raise ValueError(self.output_error)
        if not self.output.is_s3:
            return LocalOutput(Path(self.output.uri))
        settings = self.object_store.settings_for(self.object_store.endpoint, self.output.bucket)
        return S3Output(S3ObjectStore(settings), self.output.prefix)

    def recorded_offsets(self) -> dict[str, dict[int, int]]:
        """The pipeline's offsets recorded by the last run that SUCCEEDED, per cluster: where
        the usage API reads each usage topic from (so a run in progress, which moves the
        offsets files before it rebuilds the tables, hides no usage). A cluster it did not
        record: the offsets file (``billing_output.read_offsets``)."""
        if self.output is None:
            return {}
        last = self.runs.last_succeeded(self.output.uri)
        return dict(last.offsets or {}) if last is not None else {}
