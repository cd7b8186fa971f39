"""The state store: desired state of every cluster and broker, in SQLite (WAL).

It is the "table" of frontend → table → backend: the gRPC servicers validate requests and
write here; the reconcilers read it and converge processes to it. Everything the control plane
needs to survive its own ``kill -9`` is here: clusters, their desired broker count, config and
Raft voters, how its clients authenticate (``client_auth``) and where its internal user's
credentials are (a 0600 file in the cluster's directory: never the password itself), each
broker's ports (Kafka, Raft, and one per client listener), data directory and last known pid
(for re-adoption), its private endpoints (``endpoints`` and the port of each on every broker,
``endpoint_ports``: ``endpoints.py``), the history of every operation (``operations``:
kept after a cluster is deleted) and of every cluster's provisioned capacity, which the
control plane meters (``usage_history.py``: recorded here, in the writes that change it).

One connection, used from the event loop's thread only; every write is its own transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from controlplane import usage_history
from controlplane.states import (
    ClientAuth,
    ClusterState,
    OperationState,
    OperationType,
    StorageMode,
)
from wire.sasl import SaslCredentials, load_credentials

SCHEMA_VERSION = 9

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
    voters         TEXT NOT NULL DEFAULT '',
    operation_id   TEXT NOT NULL DEFAULT '',
    client_auth    TEXT NOT NULL DEFAULT 'NONE',
    internal_credentials TEXT NOT NULL DEFAULT '',
    inter_broker_version INTEGER NOT NULL DEFAULT 0
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
    reboot_requested INTEGER NOT NULL DEFAULT 0,
    plaintext_port INTEGER NOT NULL DEFAULT 0,
    scram_port     INTEGER NOT NULL DEFAULT 0,
    tls_port       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster, broker_id)
);
CREATE TABLE IF NOT EXISTS operations (
    id             TEXT PRIMARY KEY,
    cluster        TEXT NOT NULL,
    cluster_id     TEXT NOT NULL,
    type           TEXT NOT NULL,
    state          TEXT NOT NULL,
    detail         TEXT NOT NULL DEFAULT '',
    state_message  TEXT NOT NULL DEFAULT '',
    error          TEXT NOT NULL DEFAULT '',
    started_at     REAL NOT NULL,
    ended_at       REAL
);
CREATE INDEX IF NOT EXISTS operations_by_cluster ON operations (cluster, started_at);
CREATE TABLE IF NOT EXISTS endpoints (
    cluster        TEXT NOT NULL REFERENCES clusters(name) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    address        TEXT NOT NULL UNIQUE,
    client_auth    TEXT NOT NULL,
    allowed        TEXT NOT NULL DEFAULT '',
    state          TEXT NOT NULL,
    config_version INTEGER NOT NULL,
    created_at     REAL NOT NULL,
    PRIMARY KEY (cluster, name)
);
CREATE TABLE IF NOT EXISTS endpoint_ports (
    cluster        TEXT NOT NULL,
    endpoint       TEXT NOT NULL,
    broker_id      INTEGER NOT NULL,
    port           INTEGER NOT NULL,
    PRIMARY KEY (cluster, endpoint, broker_id),
    FOREIGN KEY (cluster, endpoint) REFERENCES endpoints(cluster, name) ON DELETE CASCADE,
    FOREIGN KEY (cluster, broker_id) REFERENCES brokers(cluster, broker_id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

# Columns added after version 1: (table, column, definition). Added on open when missing.
# Version 3 (Raft): brokers.raft_port (0 until the reconciler allocates one, for brokers
# recorded before), clusters.voters (empty until recorded, ditto). Version 4 (operations):
# clusters.operation_id, brokers.reboot_requested, and the operations table. Version 5 (client
# authentication): clusters.client_auth ('NONE': every cluster recorded before),
# clusters.internal_credentials and inter_broker_version, brokers.plaintext_port, scram_port
# and tls_port (0: no such listener yet). Version 6 (private endpoints): the endpoints and
# endpoint_ports tables (``endpoints.py`` reads and writes them), created on open. Version 7
# (metering): clusters.broker_type, and usage_history's tables, created on open.
ADDED_COLUMNS = (
    ("clusters", "s3_endpoint", "TEXT NOT NULL DEFAULT ''"),
    ("clusters", "s3_bucket", "TEXT NOT NULL DEFAULT ''"),
    ("clusters", "voters", "TEXT NOT NULL DEFAULT ''"),
    ("clusters", "operation_id", "TEXT NOT NULL DEFAULT ''"),
    ("brokers", "raft_port", "INTEGER NOT NULL DEFAULT 0"),
    ("brokers", "reboot_requested", "INTEGER NOT NULL DEFAULT 0"),
    ("clusters", "client_auth", "TEXT NOT NULL DEFAULT 'NONE'"),
    ("clusters", "internal_credentials", "TEXT NOT NULL DEFAULT ''"),
    ("clusters", "inter_broker_version", "INTEGER NOT NULL DEFAULT 0"),
    ("brokers", "plaintext_port", "INTEGER NOT NULL DEFAULT 0"),
    ("brokers", "scram_port", "INTEGER NOT NULL DEFAULT 0"),
    ("brokers", "tls_port", "INTEGER NOT NULL DEFAULT 0"),
    ("clusters", "broker_type", "TEXT NOT NULL DEFAULT 'kafka.m5.large'"),
    ("clusters", "tags", "TEXT NOT NULL DEFAULT '{}'"),
    ("clusters", "storage_mode", "TEXT NOT NULL DEFAULT 'TIERED'"),
    ("clusters", "configuration_name", "TEXT NOT NULL DEFAULT ''"),
    ("clusters", "configuration_revision", "INTEGER NOT NULL DEFAULT 0"),
)

CONFIGURATION_TABLES = """
CREATE TABLE IF NOT EXISTS configurations (
    name           TEXT PRIMARY KEY,
    config_id      TEXT NOT NULL,
    created_at     REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS configuration_revisions (
    name           TEXT NOT NULL REFERENCES configurations (name) ON DELETE CASCADE,
    revision       INTEGER NOT NULL,
    description    TEXT NOT NULL,
    properties     TEXT NOT NULL,
    created_at     REAL NOT NULL,
    PRIMARY KEY (name, revision)
);
"""
"""Named, revisioned broker settings (``configurations.py`` reads and writes them)."""

BROKER_ROWS = (
    "SELECT brokers.*, clusters.internal_credentials AS credentials_file FROM brokers"
    " JOIN clusters ON clusters.name = brokers.cluster"
)
"""Brokers with the credentials file of their cluster (``BrokerRecord.credentials``)."""

# Operations (a cluster's state is a states.ClusterState, stored as its name; its operation
# in progress a states.OperationType, stored as its name too).
OP_CREATE = OperationType.CREATE
OP_UPDATE_BROKER_COUNT = OperationType.UPDATE_BROKER_COUNT
OP_UPDATE_CONFIG = OperationType.UPDATE_CONFIG
OP_REBOOT_BROKER = OperationType.REBOOT_BROKER
OP_HEAL = OperationType.HEAL
OP_DELETE = OperationType.DELETE
OP_UPDATE_SECURITY = OperationType.UPDATE_SECURITY


def new_operation_id() -> str:
    return f"op-{uuid.uuid4().hex[:12]}"


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
    operation_id: str = ""
    """Id of the operation in progress (the ``operations`` row); empty when none runs."""
    client_auth: tuple[ClientAuth, ...] = (ClientAuth.NONE,)
    """How clients authenticate, one listener per mode on every broker; the first is the
    default bootstrap string."""
    internal_credentials: str = ""
    """The credentials file (0600 JSON, ``wire.sasl``) of the cluster's internal user, with
    which brokers authenticate to each other and the control plane to them; empty while the
    cluster has never had a secured mode (its brokers' one listener is PLAINTEXT)."""
    inter_broker_version: int = 0
    """The config version from which brokers authenticate to each other (the internal user);
    a broker started before it cannot talk to one started after it (the Raft quorum admits
    only peers that prove the password), so such brokers restart together."""
    broker_type: str = "kafka.m5.large"
    """Instance type of its brokers (MSK's names, ``billing.catalog``): what broker_ms bills."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Labels (MSK's tags), sorted by key."""
    storage_mode: StorageMode = StorageMode.TIERED
    configuration_name: str = ""
    """The configuration (``configurations.py``) whose revision its settings come from."""
    configuration_revision: int = 0
    """That revision; 0 with no configuration."""
    """As asked: a TIERED cluster gets a bucket when the control plane has an object store
    (:attr:`effective_storage_mode`); a LOCAL one never does."""

    @property
    def effective_storage_mode(self) -> StorageMode:
        """TIERED when the cluster has a bucket (its remote tier), else LOCAL."""
        return StorageMode.TIERED if self.s3_bucket else StorageMode.LOCAL

    @property
    def secured(self) -> bool:
        """Its brokers have the internal SASL_PLAINTEXT listener at ``--listen`` (a secured
        mode was given once; the cluster keeps it)."""
        return bool(self.internal_credentials)

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
    reboot_requested: bool = False
    """RebootBroker asked for a restart of this broker that has not happened yet."""
    plaintext_port: int = 0
    """Port of the PLAINTEXT client listener (mode NONE) of a secured cluster, whose ``port``
    is the internal listener; 0 in a cluster that is not secured (``port`` is for clients)."""
    scram_port: int = 0
    """Port of the SASL_SSL client listener (mode SCRAM); 0 until the mode is first given."""
    tls_port: int = 0
    """Port of the SSL client listener (mode TLS); 0 until the mode is first given."""
    credentials_file: str = field(default="", compare=False)
    """The cluster's ``internal_credentials`` (not a column of the broker: joined in)."""

    @property
    def address(self) -> str:
        """Where the control plane and the other brokers reach it (``--listen``)."""
        return f"{self.host}:{self.port}"

    @property
    def credentials(self) -> SaslCredentials | None:
        """What a connection to ``address`` authenticates with: the cluster's internal user,
        read from its file (None: the listener is PLAINTEXT). OSError when the file cannot
        be used (a connection then fails as one that cannot be opened)."""
        if not self.credentials_file:
            return None
        try:
            return load_credentials(self.credentials_file)
        except ValueError as exc:
            raise OSError(str(exc)) from None

    @property
    def raft_address(self) -> str:
        return f"{self.host}:{self.raft_port}"


@dataclass(frozen=True)
class OperationRecord:
    """One operation in the history (``operations.proto``)."""

    id: str
    cluster: str
    cluster_id: str
    type: OperationType
    state: OperationState = OperationState.IN_PROGRESS
    detail: str = ""
    """What was asked ("3 -> 4 brokers", "broker 1", ...)."""
    state_message: str = ""
    """The cluster's last state message while it ran."""
    error: str = ""
    started_at: float = 0.0
    ended_at: float | None = None


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
        usage_history.create_tables(self.db)
        self.db.executescript(CONFIGURATION_TABLES)
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

    def insert_cluster(
        self,
        cluster: ClusterRecord,
        brokers: Sequence[BrokerRecord],
        operation: OperationRecord | None = None,
    ) -> None:
        """Record a new cluster, its brokers and (``operation``) its CREATE operation."""
        now = time.time()
        with self.transaction() as db:
            if operation is not None:
                _insert_operation(db, replace(operation, started_at=now))
            db.execute(
                "INSERT INTO clusters (name, cluster_id, state, state_message, operation,"
                " broker_count, config, config_version, created_at, updated_at, s3_endpoint,"
                " s3_bucket, voters, operation_id, client_auth, internal_credentials,"
                " inter_broker_version, broker_type, tags, storage_mode, configuration_name,"
                " configuration_revision)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    operation.id if operation is not None else cluster.operation_id,
                    _modes(cluster.client_auth),
                    cluster.internal_credentials,
                    cluster.inter_broker_version,
                    cluster.broker_type,
                    json.dumps(dict(cluster.tags), sort_keys=True),
                    cluster.storage_mode.value,
                    cluster.configuration_name,
                    cluster.configuration_revision,
                ),
            )
            self._insert_brokers(db, brokers)
            usage_history.record_cluster(db, cluster.name)

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
            " voters = ?, operation_id = ?, client_auth = ?, internal_credentials = ?,"
            " inter_broker_version = ?, tags = ?, configuration_name = ?,"
            " configuration_revision = ? WHERE name = ?",
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
                updated.operation_id,
                _modes(updated.client_auth),
                updated.internal_credentials,
                updated.inter_broker_version,
                json.dumps(dict(updated.tags), sort_keys=True),
                updated.configuration_name,
                updated.configuration_revision,
                name,
            ),
        )
        usage_history.record_cluster(self.db, name)  # brokers added or removed, a new state
        return updated

    def delete_cluster(self, name: str) -> None:
        """Forget a cluster and its brokers; its operations in progress (its DELETE) complete."""
        now = time.time()
        with self.transaction() as db:
            row = db.execute("SELECT cluster_id FROM clusters WHERE name = ?", (name,)).fetchone()
            if row is not None:
                db.execute(
                    "UPDATE operations SET state = ?, ended_at = ? WHERE cluster_id = ?"
                    " AND state = ?",
                    (
                        OperationState.COMPLETED.value,
                        now,
                        row[0],
                        OperationState.IN_PROGRESS.value,
                    ),
                )
            usage_history.end_cluster(db, name)  # Deletion recorded it already: kept
            db.execute("DELETE FROM brokers WHERE cluster = ?", (name,))
            db.execute("DELETE FROM clusters WHERE name = ?", (name,))

    # ------------------------------------------------------------------ operations

    def start_operation(
        self,
        name: str,
        kind: OperationType,
        detail: str,
        *,
        new_brokers: Sequence[BrokerRecord] = (),
        broker_changes: Mapping[int, Mapping[str, Any]] | None = None,
        also: Callable[[sqlite3.Connection], None] | None = None,
        **changes: Any,
    ) -> ClusterRecord:
        """Record a new operation of cluster ``name`` and make it the cluster's operation in
        progress (with ``new_brokers``, ``broker_changes`` — broker id -> columns, as
        :meth:`update_broker` — the writes of ``also`` and the other ``changes`` of its
        columns), in one transaction. An operation still in progress (one a delete
        interrupts) fails."""
        current = self.get_cluster(name)
        if current is None:
            raise KeyError(name)
        operation = OperationRecord(
            id=new_operation_id(),
            cluster=name,
            cluster_id=current.cluster_id,
            type=kind,
            detail=detail,
            state_message=str(changes.get("state_message", "")),
            started_at=time.time(),
        )
        with self.transaction() as db:
            _finish(
                db,
                current.cluster_id,
                OperationState.FAILED,
                f"interrupted by {kind.value} (operation {operation.id})",
            )
            _insert_operation(db, operation)
            self._insert_brokers(db, new_brokers)
            for broker_id, columns in (broker_changes or {}).items():
                self.update_broker(name, broker_id, **columns)
            if also is not None:
                also(db)
            return self.update_cluster(
                name, operation=kind.value, operation_id=operation.id, **changes
            )

    def finish_operations(self, cluster_id: str, state: OperationState, error: str = "") -> None:
        """End the operations of a cluster that are in progress (there is one at most)."""
        with self.transaction() as db:
            _finish(db, cluster_id, state, error)

    def note_operation(self, operation_id: str, **changes: str) -> None:
        """Record the progress (``state_message``) or last failure (``error``) of a running
        operation."""
        allowed = {"state_message", "error"}
        if not changes or set(changes) - allowed:
            raise ValueError(f"cannot update operation columns {sorted(set(changes) - allowed)}")
        columns = ", ".join(f"{key} = ?" for key in changes)
        self.db.execute(
            f"UPDATE operations SET {columns} WHERE id = ? AND state = ?",  # noqa: S608
            (*changes.values(), operation_id, OperationState.IN_PROGRESS.value),
        )

    def operation(self, operation_id: str) -> OperationRecord | None:
        row = self.db.execute("SELECT * FROM operations WHERE id = ?", (operation_id,)).fetchone()
        return None if row is None else _operation(row)

    def operations(self, cluster: str | None = None) -> list[OperationRecord]:
        """Operations of one cluster name (deleted clusters of that name included), or all;
        oldest first."""
        if cluster is None:
            rows = self.db.execute("SELECT * FROM operations ORDER BY started_at, id").fetchall()
        else:
            rows = self.db.execute(
                "SELECT * FROM operations WHERE cluster = ? ORDER BY started_at, id", (cluster,)
            ).fetchall()
        return [_operation(row) for row in rows]

    # ------------------------------------------------------------------ brokers

    def brokers(self, cluster: str) -> list[BrokerRecord]:
        rows = self.db.execute(
            f"{BROKER_ROWS} WHERE brokers.cluster = ? ORDER BY broker_id",
            (cluster,),
        ).fetchall()
        return [_broker(row) for row in rows]

    def broker(self, cluster: str, broker_id: int) -> BrokerRecord:
        row = self.db.execute(
            f"{BROKER_ROWS} WHERE brokers.cluster = ? AND broker_id = ?",
            (cluster, broker_id),
        ).fetchone()
        if row is None:
            raise KeyError(f"{cluster}/{broker_id}")
        return _broker(row)

    def all_brokers(self) -> list[BrokerRecord]:
        rows = self.db.execute(f"{BROKER_ROWS} ORDER BY cluster, broker_id").fetchall()
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
        allowed = {
            "pid",
            "config_version",
            "restarts",
            "port",
            "raft_port",
            "reboot_requested",
            "plaintext_port",
            "scram_port",
            "tls_port",
        }
        if not changes or set(changes) - allowed:
            raise ValueError(f"cannot update broker columns {sorted(set(changes) - allowed)}")
        columns = ", ".join(f"{key} = ?" for key in changes)
        self.db.execute(
            f"UPDATE brokers SET {columns} WHERE cluster = ? AND broker_id = ?",  # noqa: S608
            (*changes.values(), cluster, broker_id),
        )

    def used_ports(self) -> set[int]:
        """Every port recorded for a broker: Kafka listeners (internal, client and private
        endpoints') and Raft listeners."""
        rows = self.db.execute(
            "SELECT port, raft_port, plaintext_port, scram_port, tls_port FROM brokers"
        ).fetchall()
        rows += self.db.execute("SELECT port FROM endpoint_ports").fetchall()
        return {port for row in rows for port in row if port}

    @staticmethod
    def _insert_brokers(db: sqlite3.Connection, brokers: Sequence[BrokerRecord]) -> None:
        db.executemany(
            "INSERT INTO brokers (cluster, broker_id, host, port, data_dir, log_path, pid,"
            " config_version, restarts, raft_port, plaintext_port, scram_port, tls_port)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    b.plaintext_port,
                    b.scram_port,
                    b.tls_port,
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
        operation_id=row["operation_id"],
        client_auth=tuple(ClientAuth(m) for m in row["client_auth"].split(",") if m)
        or (ClientAuth.NONE,),
        internal_credentials=row["internal_credentials"],
        inter_broker_version=row["inter_broker_version"],
        broker_type=row["broker_type"],
        tags=json.loads(row["tags"]),
        storage_mode=StorageMode(row["storage_mode"]),
        configuration_name=row["configuration_name"],
        configuration_revision=row["configuration_revision"],
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
        reboot_requested=bool(row["reboot_requested"]),
        plaintext_port=row["plaintext_port"],
        scram_port=row["scram_port"],
        tls_port=row["tls_port"],
        credentials_file=row["credentials_file"],
    )


def _operation(row: sqlite3.Row) -> OperationRecord:
    return OperationRecord(
        id=row["id"],
        cluster=row["cluster"],
        cluster_id=row["cluster_id"],
        type=OperationType(row["type"]),
        state=OperationState(row["state"]),
        detail=row["detail"],
        state_message=row["state_message"],
        error=row["error"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
    )


def _insert_operation(db: sqlite3.Connection, op: OperationRecord) -> None:
    db.execute(
        "INSERT INTO operations (id, cluster, cluster_id, type, state, detail, state_message,"
        " error, started_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            op.id,
            op.cluster,
            op.cluster_id,
            op.type.value,
            op.state.value,
            op.detail,
            op.state_message,
            op.error,
            op.started_at,
            op.ended_at,
        ),
    )


def _finish(db: sqlite3.Connection, cluster_id: str, state: OperationState, error: str) -> None:
    """End the cluster's operations in progress: ``state``, now; ``error`` when given."""
    if error:
        db.execute(
            "UPDATE operations SET state = ?, ended_at = ?, error = ? WHERE cluster_id = ?"
            " AND state = ?",
            (state.value, time.time(), error, cluster_id, OperationState.IN_PROGRESS.value),
        )
    else:
        db.execute(
            "UPDATE operations SET state = ?, ended_at = ? WHERE cluster_id = ? AND state = ?",
            (state.value, time.time(), cluster_id, OperationState.IN_PROGRESS.value),
        )


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _modes(modes: Sequence[ClientAuth]) -> str:
    return ",".join(m.value for m in modes)
