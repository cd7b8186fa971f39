"""The record of every billing run: a table of its own in the state store (``state.db``).

One row per run of the billing pipeline (``billing.py`` starts them): its id (``run-`` and
12 hex digits), what started it (:class:`BillingTrigger`), its state
(:class:`BillingRunState`: QUEUED → RUNNING → SUCCEEDED | FAILED), when it was asked for,
started and finished, the job's process id, its last progress line (JSON, as the job
printed it), the error, the job's log file, where it wrote (the output) and the clusters
it read; for a run that SUCCEEDED, the pipeline's offsets right after it (``offsets``:
cluster name → ``{partition: next offset}``), from which the usage API reads what came
after (``billing_usage.py``). Rows are never deleted.

The table is created on open (``CREATE TABLE IF NOT EXISTS``) on the store's one
connection, used from the event loop's thread only, as the rest of the store.
"""

from __future__ import annotations

import enum
import json
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from controlplane.errors import BillingRunNotFound

SCHEMA = """
CREATE TABLE IF NOT EXISTS billing_runs (
    id           TEXT PRIMARY KEY,
    trigger      TEXT NOT NULL,
    state        TEXT NOT NULL,
    requested_at REAL NOT NULL,
    started_at   REAL,
    finished_at  REAL,
    pid          INTEGER NOT NULL DEFAULT 0,
    progress     TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    log_path     TEXT NOT NULL DEFAULT '',
    output       TEXT NOT NULL DEFAULT '',
    clusters     TEXT NOT NULL DEFAULT '[]',
    offsets      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS billing_runs_by_time ON billing_runs (requested_at, id);
"""


class BillingTrigger(enum.StrEnum):
    """What started a run."""

    SCHEDULED = "SCHEDULED"
    ON_DEMAND = "ON_DEMAND"


class BillingRunState(enum.StrEnum):
    QUEUED = "QUEUED"
    """Recorded; the job is being started."""
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def finished(self) -> bool:
        return self in (BillingRunState.SUCCEEDED, BillingRunState.FAILED)


@dataclass(frozen=True)
class Progress:
    """One progress line of the job: ``{"stage", "cluster", "done", "total", "message"}``."""

    stage: str = ""
    cluster: str = ""
    done: int = 0
    total: int = 0
    message: str = ""

    @classmethod
    def parse(cls, line: str) -> Progress | None:
        """The progress a line of the job's stdout holds; None when it holds none."""
        try:
            doc = json.loads(line)
        except ValueError:
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("stage"), str):
            return None
        return cls(
            stage=doc["stage"],
            cluster=str(doc.get("cluster") or ""),
            done=_int(doc.get("done")),
            total=_int(doc.get("total")),
            message=str(doc.get("message") or ""),
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "stage": self.stage,
                "cluster": self.cluster,
                "done": self.done,
                "total": self.total,
                "message": self.message,
            },
            sort_keys=True,
        )

    def text(self) -> str:
        """``ingest orders 1/2: message`` (what ``billing run --wait`` shows)."""
        parts = [self.stage]
        if self.cluster:
            parts.append(self.cluster)
        if self.total:
            parts.append(f"{self.done}/{self.total}")
        head = " ".join(parts)
        return f"{head}: {self.message}" if self.message else head


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class BillingRun:
    id: str
    trigger: BillingTrigger
    state: BillingRunState = BillingRunState.QUEUED
    requested_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    pid: int = 0
    progress: Progress | None = None
    error: str = ""
    log_path: str = ""
    output: str = ""
    clusters: tuple[str, ...] = ()
    offsets: dict[str, dict[int, int]] | None = field(default=None, compare=False)
    """After a SUCCEEDED run: the pipeline's offsets of each cluster it read."""


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


class BillingRuns:
    """The ``billing_runs`` table."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        db.executescript(SCHEMA)

    def insert(self, run: BillingRun) -> None:
        self.db.execute(
            "INSERT INTO billing_runs (id, trigger, state, requested_at, log_path, output,"
            " clusters) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                run.id,
                run.trigger.value,
                run.state.value,
                run.requested_at,
                run.log_path,
                run.output,
                json.dumps(list(run.clusters)),
            ),
        )

    def started(self, run_id: str, pid: int, clusters: tuple[str, ...]) -> None:
        self.db.execute(
            "UPDATE billing_runs SET state = ?, started_at = ?, pid = ?, clusters = ? WHERE id = ?",
            (BillingRunState.RUNNING.value, time.time(), pid, json.dumps(list(clusters)), run_id),
        )

    def note_progress(self, run_id: str, progress: Progress) -> None:
        self.db.execute(
            "UPDATE billing_runs SET progress = ? WHERE id = ?", (progress.to_json(), run_id)
        )

    def finish(
        self,
        run_id: str,
        state: BillingRunState,
        error: str = "",
        offsets: dict[str, dict[int, int]] | None = None,
    ) -> None:
        """End a run that has not ended (a finished run keeps its outcome)."""
        self.db.execute(
            "UPDATE billing_runs SET state = ?, finished_at = ?, error = ?, offsets = ?"
            " WHERE id = ? AND state IN (?, ?)",
            (
                state.value,
                time.time(),
                error,
                "" if offsets is None else json.dumps(offsets, sort_keys=True),
                run_id,
                BillingRunState.QUEUED.value,
                BillingRunState.RUNNING.value,
            ),
        )

    def get(self, run_id: str) -> BillingRun:
        row = self.db.execute("SELECT * FROM billing_runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise BillingRunNotFound(f"billing run {run_id!r} not found", billing_run=run_id)
        return _run(row)

    def all(self, limit: int = 0) -> list[BillingRun]:
        """Runs, oldest first; with ``limit``, the newest ``limit`` of them."""
        if limit > 0:
            rows = self.db.execute(
                "SELECT * FROM (SELECT * FROM billing_runs ORDER BY requested_at DESC, id DESC"
                " LIMIT ?) ORDER BY requested_at, id",
                (limit,),
            ).fetchall()
        else:
            rows = self.db.execute(
                "SELECT * FROM billing_runs ORDER BY requested_at, id"
            ).fetchall()
        return [_run(row) for row in rows]

    def unfinished(self) -> list[BillingRun]:
        """Runs QUEUED or RUNNING (after a restart: those the last control plane left)."""
        rows = self.db.execute(
            "SELECT * FROM billing_runs WHERE state IN (?, ?) ORDER BY requested_at",
            (BillingRunState.QUEUED.value, BillingRunState.RUNNING.value),
        ).fetchall()
        return [_run(row) for row in rows]

    def last_succeeded(self, output: str) -> BillingRun | None:
        """The newest run that SUCCEEDED writing to ``output``."""
        row = self.db.execute(
            "SELECT * FROM billing_runs WHERE state = ? AND output = ?"
            " ORDER BY finished_at DESC LIMIT 1",
            (BillingRunState.SUCCEEDED.value, output),
        ).fetchone()
        return None if row is None else _run(row)


def _run(row: sqlite3.Row) -> BillingRun:
    progress = Progress.parse(row["progress"]) if row["progress"] else None
    offsets = None
    if row["offsets"]:
        raw = json.loads(row["offsets"])
        offsets = {
            str(name): {int(p): int(o) for p, o in parts.items()} for name, parts in raw.items()
        }
    return BillingRun(
        id=row["id"],
        trigger=BillingTrigger(row["trigger"]),
        state=BillingRunState(row["state"]),
        requested_at=row["requested_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        pid=row["pid"],
        progress=progress,
        error=row["error"],
        log_path=row["log_path"],
        output=row["output"],
        clusters=tuple(json.loads(row["clusters"])),
        offsets=offsets,
    )
