"""The state store: desired state of every cluster and broker, in SQLite (WAL).

It is the "table" of frontend → table → backend: the gRPC servicers validate requests and
write here; the reconcilers read it and converge processes to it. Everything the control plane
needs to survive its own ``kill -9`` is here: clusters, their desired broker count, config and
Raft voters, each broker's ports (Kafka and Raft), data directory and last known pid (for
re-adoption).

One connection, used from the event loop's thread only; every write is its own transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from controlplane.states import ClusterState

SCHEMA_VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS clusters (
    name           TEXT PRIMARY KEY,
    cluster_id     TEXT NOT NULL UNIQUE,
    state          TEXT NOT NULL,
    state_message  TEXT NOT NULL DEFAULT '',
    operation      TEXT NOT NULL DEFAULT '',
    broker_count   INTEGER NOT NULL,
    config         TEXT NOT NULL DEFAULT '{}',
    config_version INTEGER NOT NULL DEFAULT 1,
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    s3_endpoint    TEXT NOT NULL DEFAULT '',
    s3_bucket      TEXT NOT NULL DEFAULT '',
    voters         TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS brokers (
    cluster        TEXT NOT NULL REFERENCES clusters(name) ON DELETE CASCADE,
    broker_id      INTEGER NOT NULL,
    host           TEXT NOT NULL,
    port           INTEGER NOT NULL UNIQUE,
    data_dir       TEXT NOT NULL UNIQUE,
    log_path       TEXT NOT NULL,
    pid            INTEGER NOT NULL DEFAULT 0,
    config_version INTEGER NOT NULL DEFAULT 0,
    restarts       INTEGER NOT NULL DEFAULT 0,
    raft_port      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster, broker_id)
);
CREATE TABLE IF NOT EXISTS settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

# Columns added after version 1: (table, column, definition). Added on open when missing.
# Version 3 (Raft): brokers.raft_port (0 until the reconciler allocates one, for brokers
# recorded before), clusters.voters (empty until recorded, ditto).
ADDED_COLUMNS = (
    ("clusters", "s3_endpoint", "TEXT NOT NULL DEFAULT ''"),
    ("clusters", "s3_bucket", "TEXT NOT NULL DEFAULT ''"),
    ("clusters", "voters", "TEXT NOT NULL DEFAULT ''"),
    ("brokers", "raft_port", "INTEGER NOT NULL DEFAULT 0"),
)

# Operations (a cluster's state is a states.ClusterState, stored as its name).
OP_CREATE = "CREATE"
OP_UPDATE_BROKER_COUNT = "UPDATE_BROKER_COUNT"
OP_UPDATE_CONFIG = "UPDATE_CONFIG"
OP_DELETE = "DELETE"


def choose_voters(broker_ids: Sequence[int]) -> tuple[int, ...]:
    """The Raft voters of a new cluster: the 3 lowest ids, or the lowest with fewer brokers.

    The broker computes the same set (``dataplane.raft.server.choose_voters``, not imported:
    the control plane only imports the broker's config and errors). Fixed for the cluster's
    life: a scale-out adds learners, a scale-in never removes a voter.
    """
    ordered = sorted(broker_ids)
    return tuple(ordered[:3] if len(ordered) >= 3 else ordered[:1])


@dataclass(frozen=True)
class ClusterRecord:
    name: str
    cluster_id: str
    state: ClusterState
    broker_count: int
    """Desired number of brokers."""
    config: dict[str, str] = field(default_factory=dict)
    """Broker settings the user gave (validated); the same for every broker."""
    config_version: int = 1
    """Bumped by every config change; a broker started with an older version needs a restart."""
    state_message: str = ""
    operation: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    s3_endpoint: str = ""
    """Object store of the cluster's remote tier (the embedded server's URL, or external)."""
    s3_bucket: str = ""
    """The cluster's own bucket there; empty for clusters recorded before version 2."""
    voters: tuple[int, ...] = ()
    """Broker ids of the Raft metadata quorum, fixed when the cluster is created (the 3 lowest
    ids, or just the lowest with fewer than 3 brokers); empty for clusters recorded before
    version 3 until the reconciler records them."""

    @property
    def min_broker_count(self) -> int:
        """Fewest brokers a scale-in may leave: every voter stays (ids 0..len(voters)-1)."""
        return max(self.voters, default=0) + 1

    @property
    def busy(self) -> bool:
        """An operation (create, update, delete) is in progress."""
        return bool(self.operation)


@dataclass(frozen=True)
class BrokerRecord:
    cluster: str
    broker_id: int
    host: str
    port: int
    data_dir: str
    log_path: str
    pid: int = 0
    """Last pid the control plane started or adopted; 0 when none runs."""
    config_version: int = 0
    """The cluster config version the running process was started with."""
    restarts: int = 0
    raft_port: int = 0
    """Port of the broker's Raft listener (metadata quorum); reserved with the broker and kept.
    0 for brokers recorded before version 3 until the reconciler allocates one."""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def raft_address(self) -> str:
        return f"{self.host}:{self.raft_port}"


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, timeout=10)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"{path} has schema version {version}; this control plane knows {SCHEMA_VERSION}"
            )
        self.db.executescript(SCHEMA)
        for table, column, definition in ADDED_COLUMNS:
            present = {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
        self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # ------------------------------------------------------------------ clusters

    def insert_cluster(self, cluster: ClusterRecord, brokers: Sequence[BrokerRecord]) -> None:
        now = time.time()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO clusters (name, cluster_id, state, state_message, operation,"
                " broker_count, config, config_version, created_at, updated_at, s3_endpoint,"
                " s3_bucket, voters) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    cluster.name,
                    cluster.cluster_id,
                    cluster.state.value,
                    cluster.state_message,
                    cluster.operation,
                    cluster.broker_count,
                    json.dumps(cluster.config, sort_keys=True),
                    cluster.config_version,
                    now,
                    now,
                    cluster.s3_endpoint,
                    cluster.s3_bucket,
                    _ids(cluster.voters),
                ),
            )
            self._insert_brokers(db, brokers)

    def get_cluster(self, name: str) -> ClusterRecord | None:
        row = self.db.execute("SELECT * FROM clusters WHERE name = ?", (name,)).fetchone()
        return None if row is None else _cluster(row)

    def list_clusters(self) -> list[ClusterRecord]:
        rows = self.db.execute("SELECT * FROM clusters ORDER BY created_at, name").fetchall()
        return [_cluster(row) for row in rows]

    def update_cluster(self, name: str, **changes: Any) -> ClusterRecord:
        """Change columns of one cluster; returns the new record."""
        current = self.get_cluster(name)
        if current is None:
            raise KeyError(name)
        updated = replace(current, **changes, updated_at=time.time())
        self.db.execute(
            "UPDATE clusters SET state = ?, state_message = ?, operation = ?, broker_count = ?,"
            " config = ?, config_version = ?, updated_at = ?, s3_endpoint = ?, s3_bucket = ?,"
            " voters = ? WHERE name = ?",
            (
                updated.state.value,
                updated.state_message,
                updated.operation,
                updated.broker_count,
                json.dumps(updated.config, sort_keys=True),
                updated.config_version,
                updated.updated_at,
                updated.s3_endpoint,
                updated.s3_bucket,
                _ids(updated.voters),
                name,
            ),
        )
        return updated

    def delete_cluster(self, name: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM brokers WHERE cluster = ?", (name,))
            db.execute("DELETE FROM clusters WHERE name = ?", (name,))

    # ------------------------------------------------------------------ brokers

    def brokers(self, cluster: str) -> list[BrokerRecord]:
        rows = self.db.execute(
            "SELECT * FROM brokers WHERE cluster = ? ORDER BY broker_id", (cluster,)
        ).fetchall()
        return [_broker(row) for row in rows]

    def broker(self, cluster: str, broker_id: int) -> BrokerRecord:
        row = self.db.execute(
            "SELECT * FROM brokers WHERE cluster = ? AND broker_id = ?", (cluster, broker_id)
        ).fetchone()
        if row is None:
            raise KeyError(f"{cluster}/{broker_id}")
        return _broker(row)

    def all_brokers(self) -> list[BrokerRecord]:
        rows = self.db.execute("SELECT * FROM brokers ORDER BY cluster, broker_id").fetchall()
        return [_broker(row) for row in rows]

    def add_brokers(self, cluster: str, brokers: Sequence[BrokerRecord], **changes: Any) -> None:
        """Add brokers and change the cluster's columns, in one transaction."""
        with self.transaction() as db:
            self._insert_brokers(db, brokers)
        self.update_cluster(cluster, **changes)

    def remove_brokers(self, cluster: str, broker_ids: Sequence[int], **changes: Any) -> None:
        """Delete brokers' rows (scale-in) and change the cluster's columns, in one transaction."""
        with self.transaction() as db:
            db.executemany(
                "DELETE FROM brokers WHERE cluster = ? AND broker_id = ?",
                [(cluster, broker_id) for broker_id in broker_ids],
            )
        self.update_cluster(cluster, **changes)

    def update_broker(self, cluster: str, broker_id: int, **changes: Any) -> None:
        allowed = {"pid", "config_version", "restarts", "port", "raft_port"}
        if not changes or set(changes) - allowed:
            raise ValueError(f"cannot update broker columns {sorted(set(changes) - allowed)}")
        columns = ", ".join(f"{key} = ?" for key in changes)
        self.db.execute(
            f"UPDATE brokers SET {columns} WHERE cluster = ? AND broker_id = ?",  # noqa: S608
            (*changes.values(), cluster, broker_id),
        )

    def used_ports(self) -> set[int]:
        """Every port recorded for a broker: Kafka listeners and Raft listeners."""
        rows = self.db.execute("SELECT port, raft_port FROM brokers").fetchall()
        return {port for row in rows for port in row if port}

    @staticmethod
    def _insert_brokers(db: sqlite3.Connection, brokers: Sequence[BrokerRecord]) -> None:
        db.executemany(
            "INSERT INTO brokers (cluster, broker_id, host, port, data_dir, log_path, pid,"
            " config_version, restarts, raft_port) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    b.cluster,
                    b.broker_id,
                    b.host,
                    b.port,
                    b.data_dir,
                    b.log_path,
                    b.pid,
                    b.config_version,
                    b.restarts,
                    b.raft_port,
                )
                for b in brokers
            ],
        )

    # ------------------------------------------------------------------ settings

    def get_setting(self, key: str, default: str = "") -> str:
        row = self.db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return default if row is None else str(row[0])

    def set_setting(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


def _cluster(row: sqlite3.Row) -> ClusterRecord:
    return ClusterRecord(
        name=row["name"],
        cluster_id=row["cluster_id"],
        state=ClusterState(row["state"]),
        broker_count=row["broker_count"],
        config=json.loads(row["config"]),
        config_version=row["config_version"],
        state_message=row["state_message"],
        operation=row["operation"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        s3_endpoint=row["s3_endpoint"],
        s3_bucket=row["s3_bucket"],
        voters=tuple(int(v) for v in row["voters"].split(",") if v),
    )


def _broker(row: sqlite3.Row) -> BrokerRecord:
    return BrokerRecord(
        cluster=row["cluster"],
        broker_id=row["broker_id"],
        host=row["host"],
        port=row["port"],
        data_dir=row["data_dir"],
        log_path=row["log_path"],
        pid=row["pid"],
        config_version=row["config_version"],
        restarts=row["restarts"],
        raft_port=row["raft_port"],
    )


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)
