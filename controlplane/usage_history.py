"""The history of every cluster's provisioned capacity, from which the control plane meters
``broker_ms`` and ``endpoint_ms`` exactly (``metering.py``; controlplane/README.md,
"Metering").

Two tables of ``state.db``, appended to and never rewritten:

- ``capacity_history``: one row per change of a cluster's provisioned brokers: cluster id
  and name, ``at_ms`` (wall clock, ms), ``broker_count`` (the brokers the cluster has: its
  rows in ``brokers``, whether their processes run or not), ``broker_type`` and ``state``
  (its ``states.ClusterState`` then; ``DELETED`` on the last row, whose count is 0). The
  store records a row in the same transaction as the change (``record_cluster``): a new
  cluster (its CREATE), brokers added by a scale-out, removed by a scale-in, every state
  change, and the end (``end_cluster``: when the reconciler starts stopping the brokers of a
  deleted cluster, and again, a no-op then, when its row goes).
- ``endpoint_history``: one row per private endpoint created (``active`` 1: when the
  request is recorded) or gone (0: when its listeners are closed on every broker and its
  row goes, or when its cluster ends).

Billing: a cluster's brokers are billed from the CREATE until its end, in every state,
FAILED and HEALING included (MSK bills provisioned capacity whatever its health: the
brokers of a FAILED cluster are kept and retried). The quantity of a bucket
``[start, end)`` is the integral of ``broker_count`` over it (:func:`broker_ms`), exact to
the millisecond; an endpoint's is the time it was active (:func:`endpoint_ms`).

Rows are dated ``max(now, the cluster's last row, its metering cursor)``: a bucket the
meter has sent (``metering_cursors``: the next bucket to send, per cluster id) never
changes afterwards, even if the wall clock steps back, so a bucket computed again gives the
same event. Rows of deleted clusters are kept (like ``operations``).

Here: the tables' SQL and the pure functions over their rows. Nothing here imports the
store (the store imports this module); every function takes the SQLite connection.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from wire.usage import BUCKET_MS, Dimension, Usage, UsageEvent

SOURCE = "controlplane"
"""The usage events' source (``wire.usage``): epoch 0, sequence = the bucket's start (ms)."""
DELETED = "DELETED"
"""``state`` of a cluster's last row (broker_count 0): it is gone."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS capacity_history (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id     TEXT NOT NULL,
    cluster        TEXT NOT NULL,
    at_ms          INTEGER NOT NULL,
    broker_count   INTEGER NOT NULL,
    broker_type    TEXT NOT NULL,
    state          TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS capacity_history_by_cluster
    ON capacity_history (cluster_id, at_ms, seq);
CREATE TABLE IF NOT EXISTS endpoint_history (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id     TEXT NOT NULL,
    cluster        TEXT NOT NULL,
    endpoint       TEXT NOT NULL,
    at_ms          INTEGER NOT NULL,
    active         INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS endpoint_history_by_cluster
    ON endpoint_history (cluster_id, endpoint, at_ms, seq);
CREATE TABLE IF NOT EXISTS metering_cursors (
    cluster_id     TEXT PRIMARY KEY,
    cluster        TEXT NOT NULL,
    next_bucket_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS read_metering_cursors (
    cluster_id     TEXT PRIMARY KEY,
    cluster        TEXT NOT NULL,
    next_bucket_ms INTEGER NOT NULL
);
"""
CURSORS = "metering_cursors"
"""The cursor of the capacity events (``broker_ms``, ``endpoint_ms``)."""
READ_CURSORS = "read_metering_cursors"
"""The cursor of the object store's read events (``spark_tiered_read_bytes``)."""

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Transition:
    """A cluster's provisioned capacity from ``at_ms`` on (a ``capacity_history`` row)."""

    at_ms: int
    broker_count: int
    broker_type: str
    state: str
    """A ``states.ClusterState`` name, or :data:`DELETED`."""


@dataclass(frozen=True, slots=True)
class EndpointTransition:
    """Private endpoint ``endpoint`` exists (``active``) or not from ``at_ms`` on."""

    at_ms: int
    endpoint: str
    active: bool


@dataclass(frozen=True)
class History:
    """What the meter needs of one cluster: its rows from the one in force at ``since_ms``
    on, oldest first."""

    cluster_id: str
    cluster: str
    transitions: tuple[Transition, ...]
    endpoints: Mapping[str, tuple[EndpointTransition, ...]] = field(default_factory=dict)

    @property
    def ended_at(self) -> int | None:
        """When the cluster ended (its last row is :data:`DELETED`), else None."""
        if self.transitions and self.transitions[-1].state == DELETED:
            return self.transitions[-1].at_ms
        return None


def create_tables(db: sqlite3.Connection) -> None:
    db.executescript(SCHEMA)


def now_ms(clock: Clock = time.time) -> int:
    return int(clock() * 1000)


# ---------------------------------------------------------------------- recording


def _at(db: sqlite3.Connection, cluster_id: str, last_ms: int, clock: Clock) -> int:
    """The time of a new row: now, never before the cluster's last row nor inside a bucket
    the meter has sent."""
    row = db.execute(
        "SELECT next_bucket_ms FROM metering_cursors WHERE cluster_id = ?", (cluster_id,)
    ).fetchone()
    return max(now_ms(clock), last_ms, row[0] if row is not None else 0)


def _last(db: sqlite3.Connection, cluster_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = db.execute(
        "SELECT at_ms, broker_count, broker_type, state FROM capacity_history"
        " WHERE cluster_id = ? ORDER BY seq DESC LIMIT 1",
        (cluster_id,),
    ).fetchone()
    return row


def record_cluster(db: sqlite3.Connection, name: str, clock: Clock = time.time) -> None:
    """Record cluster ``name``'s capacity (its broker rows, type, state) when it differs from
    its last row; nothing once the cluster has ended or when it has no row."""
    row = db.execute(
        "SELECT cluster_id, broker_type, state,"
        " (SELECT COUNT(*) FROM brokers WHERE brokers.cluster = clusters.name) AS brokers"
        " FROM clusters WHERE name = ?",
        (name,),
    ).fetchone()
    if row is None:
        return
    cluster_id, broker_type, state, count = row[0], row[1], row[2], row[3]
    last = _last(db, cluster_id)
    if last is not None:
        if last["state"] == DELETED:
            return
        if (last["broker_count"], last["broker_type"], last["state"]) == (
            count,
            broker_type,
            state,
        ):
            return
    at = _at(db, cluster_id, last["at_ms"] if last is not None else 0, clock)
    db.execute(
        "INSERT INTO capacity_history (cluster_id, cluster, at_ms, broker_count, broker_type,"
        " state) VALUES (?, ?, ?, ?, ?, ?)",
        (cluster_id, name, at, count, broker_type, state),
    )


def end_cluster(db: sqlite3.Connection, name: str, clock: Clock = time.time) -> int | None:
    """Record the end of cluster ``name`` (and of its endpoints): nothing is billed from now
    on. Returns when it ended (an earlier end is kept); None for a cluster with no row."""
    row = db.execute("SELECT cluster_id FROM clusters WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    cluster_id = row[0]
    last = _last(db, cluster_id)
    if last is not None and last["state"] == DELETED:
        return int(last["at_ms"])
    at = _at(db, cluster_id, last["at_ms"] if last is not None else 0, clock)
    for endpoint in _active_endpoints(db, cluster_id):
        _insert_endpoint(db, cluster_id, name, endpoint, at, active=False)
    db.execute(
        "INSERT INTO capacity_history (cluster_id, cluster, at_ms, broker_count, broker_type,"
        " state) VALUES (?, ?, ?, 0, ?, ?)",
        (cluster_id, name, at, last["broker_type"] if last is not None else "", DELETED),
    )
    return at


def record_endpoint(
    db: sqlite3.Connection, cluster: str, endpoint: str, *, active: bool, clock: Clock = time.time
) -> None:
    """Private endpoint ``endpoint`` of ``cluster`` starts (``active``) or stops being
    billed; nothing when that is already so, or once the cluster has ended."""
    row = db.execute("SELECT cluster_id FROM clusters WHERE name = ?", (cluster,)).fetchone()
    if row is None:
        return
    cluster_id = row[0]
    last = _last(db, cluster_id)
    if last is not None and last["state"] == DELETED:
        return
    previous = db.execute(
        "SELECT at_ms, active FROM endpoint_history WHERE cluster_id = ? AND endpoint = ?"
        " ORDER BY seq DESC LIMIT 1",
        (cluster_id, endpoint),
    ).fetchone()
    if (bool(previous["active"]) if previous is not None else False) == active:
        return
    at = _at(db, cluster_id, previous["at_ms"] if previous is not None else 0, clock)
    _insert_endpoint(db, cluster_id, cluster, endpoint, at, active=active)


def _active_endpoints(db: sqlite3.Connection, cluster_id: str) -> list[str]:
    rows = db.execute(
        "SELECT endpoint, active FROM endpoint_history WHERE cluster_id = ? ORDER BY seq",
        (cluster_id,),
    ).fetchall()
    state = {row["endpoint"]: bool(row["active"]) for row in rows}
    return sorted(name for name, active in state.items() if active)


def _insert_endpoint(
    db: sqlite3.Connection, cluster_id: str, cluster: str, endpoint: str, at: int, *, active: bool
) -> None:
    db.execute(
        "INSERT INTO endpoint_history (cluster_id, cluster, endpoint, at_ms, active)"
        " VALUES (?, ?, ?, ?, ?)",
        (cluster_id, cluster, endpoint, at, int(active)),
    )


# ---------------------------------------------------------------------- reading


def load(db: sqlite3.Connection, cluster_id: str, since_ms: int = 0) -> History:
    """The rows of cluster ``cluster_id`` in force at ``since_ms`` or later."""
    rows = db.execute(
        "SELECT * FROM capacity_history WHERE cluster_id = ? AND (at_ms >= ? OR seq >="
        " (SELECT COALESCE(MAX(seq), 0) FROM capacity_history WHERE cluster_id = ?"
        " AND at_ms < ?)) ORDER BY seq",
        (cluster_id, since_ms, cluster_id, since_ms),
    ).fetchall()
    endpoints: dict[str, list[EndpointTransition]] = {}
    for row in db.execute(
        "SELECT * FROM endpoint_history WHERE cluster_id = ? ORDER BY seq", (cluster_id,)
    ):
        endpoints.setdefault(row["endpoint"], []).append(
            EndpointTransition(row["at_ms"], row["endpoint"], bool(row["active"]))
        )
    return History(
        cluster_id=cluster_id,
        cluster=rows[-1]["cluster"] if rows else "",
        transitions=tuple(
            Transition(r["at_ms"], r["broker_count"], r["broker_type"], r["state"]) for r in rows
        ),
        endpoints={name: tuple(ts) for name, ts in endpoints.items()},
    )


def cursor(db: sqlite3.Connection, cluster_id: str, table: str = CURSORS) -> int | None:
    """The start of the next bucket to meter (every earlier one was sent), or None."""
    assert table in (CURSORS, READ_CURSORS)
    row = db.execute(
        f"SELECT next_bucket_ms FROM {table} WHERE cluster_id = ?",  # noqa: S608 - a constant
        (cluster_id,),
    ).fetchone()
    return None if row is None else int(row[0])


def advance(
    db: sqlite3.Connection,
    cluster_id: str,
    cluster: str,
    next_bucket_ms: int,
    table: str = CURSORS,
) -> None:
    """Every bucket before ``next_bucket_ms`` is sent (never moves back)."""
    assert table in (CURSORS, READ_CURSORS)
    db.execute(
        f"INSERT INTO {table} (cluster_id, cluster, next_bucket_ms) VALUES (?, ?, ?)"  # noqa: S608
        " ON CONFLICT(cluster_id) DO UPDATE SET next_bucket_ms ="
        " MAX(next_bucket_ms, excluded.next_bucket_ms)",
        (cluster_id, cluster, next_bucket_ms),
    )


# ---------------------------------------------------------------------- the integral


def integral(steps: Sequence[tuple[int, int]], start_ms: int, end_ms: int) -> int:
    """The integral over ``[start_ms, end_ms)`` of a step function: ``steps`` are
    (from_ms, value) in time order, each value holding until the next step (the last one
    forever); 0 before the first. Steps at the same ms: the last one holds."""
    total = 0
    for i, (at, value) in enumerate(steps):
        until = steps[i + 1][0] if i + 1 < len(steps) else end_ms
        lo, hi = max(at, start_ms), min(until, end_ms)
        if hi > lo and value:
            total += value * (hi - lo)
    return total


def broker_ms(transitions: Sequence[Transition], start_ms: int, end_ms: int) -> dict[str, int]:
    """Broker-milliseconds per broker type over ``[start_ms, end_ms)``."""
    out: dict[str, int] = {}
    for broker_type in dict.fromkeys(t.broker_type for t in transitions if t.broker_count):
        steps = [
            (t.at_ms, t.broker_count if t.broker_type == broker_type else 0) for t in transitions
        ]
        quantity = integral(steps, start_ms, end_ms)
        if quantity:
            out[broker_type] = quantity
    return out


def endpoint_ms(transitions: Sequence[EndpointTransition], start_ms: int, end_ms: int) -> int:
    """Milliseconds of ``[start_ms, end_ms)`` during which the endpoint existed."""
    return integral([(t.at_ms, int(t.active)) for t in transitions], start_ms, end_ms)


def bucket_event(history: History, start_ms: int) -> UsageEvent | None:
    """The control plane's usage event of the bucket starting at ``start_ms`` (None when
    nothing was provisioned in it)."""
    end = start_ms + BUCKET_MS
    usage = [
        Usage(Dimension.BROKER_MS, quantity, resource=broker_type)
        for broker_type, quantity in sorted(broker_ms(history.transitions, start_ms, end).items())
    ]
    for name, transitions in sorted(history.endpoints.items()):
        quantity = endpoint_ms(transitions, start_ms, end)
        if quantity:
            # lower case, as the brokers name it in endpoint_bytes (endpoint names are
            # case-insensitive: one listener)
            usage.append(Usage(Dimension.ENDPOINT_MS, quantity, resource=name.lower()))
    if not usage:
        return None
    return UsageEvent(SOURCE, 0, start_ms, start_ms, end, tuple(usage))


def first_bucket(history: History) -> int | None:
    """The bucket of the cluster's first row (where metering starts)."""
    if not history.transitions:
        return None
    first = history.transitions[0].at_ms
    return first - first % BUCKET_MS


def complete_until(history: History, now: int) -> int:
    """The end of the last bucket nothing can change any more: the last whole minute before
    ``now``, or, for a cluster that ended, the end of the bucket it ended in."""
    ended = history.ended_at
    if ended is not None:
        return -(-ended // BUCKET_MS) * BUCKET_MS
    return now - now % BUCKET_MS
