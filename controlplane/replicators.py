"""Replicators: cross-cluster replication run by the control plane, as MSK Replicator
(``Replicators`` service, proto/sluice/v1/replicators.proto; controlplane/README.md,
"Replicators").

A replicator is Apache Kafka's MirrorMaker 2 in dedicated mode, run as a supervised process
(``replicator_runner.py``, ``replicator_process.py``): it copies the topics matching a Java
regular expression, their configs and (with ``sync_group_offsets``) consumer groups'
committed offsets from a source (a cluster of this control plane, or any Kafka reached in
plaintext at ``source_bootstrap``) to a target cluster of this control plane. This module is
the frontend and the table: requests are checked here (names, clusters, expressions,
aliases, whether Java and the jars are there), recorded CREATING in ``state.db``'s
``replicators`` table (created on open, as ``billing_runs.py`` does its own), and the runner
is woken; it converges processes to the table.

States (:class:`ReplicatorState`): CREATING (recorded, its process starting or waiting for
a cluster to be ready) → RUNNING (MirrorMaker's source connector and its tasks run, read
from its status topic) ⇄ FAILED (the process died or a connector failed: restarted with
backoff, the state message says why; or a cluster was deleted: final) ; DELETING while
DeleteReplicator stops the process.
"""

from __future__ import annotations

import asyncio
import enum
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from controlplane import errors
from controlplane.config import Settings
from controlplane.replicator_process import missing
from controlplane.store import Store

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,63}$")
"""1-64 ASCII letters, digits and hyphens, starting with a letter."""
ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
"""A MirrorMaker cluster alias: it prefixes topic names (``ALIAS.topic``), so no dot."""
HOST_PORT = re.compile(r"^[A-Za-z0-9._\-\[\]:]+:\d{1,5}$")
EXTERNAL_ALIAS = "source"
"""The alias of an external source when none is given."""
DEFAULT_PATTERN = ".*"

SCHEMA = """
CREATE TABLE IF NOT EXISTS replicators (
    name               TEXT PRIMARY KEY,
    source_cluster     TEXT NOT NULL,
    source_bootstrap   TEXT NOT NULL,
    target_cluster     TEXT NOT NULL,
    source_alias       TEXT NOT NULL,
    topics             TEXT NOT NULL,
    groups_pattern     TEXT NOT NULL,
    sync_group_offsets INTEGER NOT NULL,
    topic_name_policy  TEXT NOT NULL,
    state              TEXT NOT NULL,
    state_message      TEXT NOT NULL DEFAULT '',
    restarts           INTEGER NOT NULL DEFAULT 0,
    pid                INTEGER NOT NULL DEFAULT 0,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL
);
"""


class ReplicatorState(enum.StrEnum):
    CREATING = "CREATING"
    """Recorded; its process is starting (or waits for a cluster to be ready)."""
    RUNNING = "RUNNING"
    """MirrorMaker's source connector and its tasks run."""
    FAILED = "FAILED"
    """The process died or a connector failed (restarted with backoff), or a cluster of it
    was deleted (final): the state message says which."""
    DELETING = "DELETING"


class TopicNamePolicy(enum.StrEnum):
    PREFIXED = "PREFIXED"
    """``SOURCE_ALIAS.topic`` (MirrorMaker's DefaultReplicationPolicy, MSK Replicator's
    default)."""
    IDENTICAL = "IDENTICAL"
    """The same name (IdentityReplicationPolicy)."""


@dataclass(frozen=True)
class Replicator:
    """One row of the ``replicators`` table."""

    name: str
    source_cluster: str
    """A cluster of this control plane; empty with ``source_bootstrap``."""
    source_bootstrap: str
    """host:port[,...] of an external source (plaintext); empty with ``source_cluster``."""
    target_cluster: str
    source_alias: str
    topics: str
    groups: str
    sync_group_offsets: bool
    topic_name_policy: TopicNamePolicy
    state: ReplicatorState = ReplicatorState.CREATING
    state_message: str = ""
    restarts: int = 0
    """Times its process was restarted after dying or failing."""
    pid: int = 0
    """Its MirrorMaker process (0: none runs)."""
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def target_alias(self) -> str:
        """The target's alias in MirrorMaker's configuration: the cluster's name."""
        return self.target_cluster

    @property
    def identical_names(self) -> bool:
        return self.topic_name_policy == TopicNamePolicy.IDENTICAL

    @property
    def source_label(self) -> str:
        """The source as people name it: the cluster, or ``external host:port``."""
        return self.source_cluster or f"external {self.source_bootstrap}"


@dataclass(frozen=True)
class ReplicatedPartition:
    source_topic: str
    target_topic: str
    partition: int
    lag: int
    """Source end offset minus the next source offset MirrorMaker will copy (its committed
    position); -1 when unknown yet."""


class Replicators:
    """The ``replicators`` table (on the store's one connection)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        db.executescript(SCHEMA)

    def insert(self, record: Replicator) -> None:
        try:
            self.db.execute(
                "INSERT INTO replicators (name, source_cluster, source_bootstrap, target_cluster,"
                " source_alias, topics, groups_pattern, sync_group_offsets, topic_name_policy,"
                " state, state_message, restarts, pid, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.name,
                    record.source_cluster,
                    record.source_bootstrap,
                    record.target_cluster,
                    record.source_alias,
                    record.topics,
                    record.groups,
                    int(record.sync_group_offsets),
                    record.topic_name_policy.value,
                    record.state.value,
                    record.state_message,
                    record.restarts,
                    record.pid,
                    record.created_at,
                    record.updated_at,
                ),
            )
        except sqlite3.IntegrityError:
            raise already_exists(record.name) from None

    def get(self, name: str) -> Replicator | None:
        row = self.db.execute("SELECT * FROM replicators WHERE name = ?", (name,)).fetchone()
        return None if row is None else _record(row)

    def existing(self, name: str) -> Replicator:
        found = self.get(name)
        if found is None:
            raise errors.ReplicatorNotFound(
                f"replicator {name!r} not found",
                replicator=name,
            )
        return found

    def list(self) -> list[Replicator]:
        rows = self.db.execute("SELECT * FROM replicators ORDER BY name").fetchall()
        return [_record(row) for row in rows]

    def update(self, name: str, **changes: Any) -> Replicator | None:
        """Change some fields; the new record (None when the row is gone)."""
        current = self.get(name)
        if current is None:
            return None
        updated = replace(current, **changes, updated_at=time.time())
        if updated == replace(current, updated_at=updated.updated_at):
            return current
        self.db.execute(
            "UPDATE replicators SET state = ?, state_message = ?, restarts = ?, pid = ?,"
            " updated_at = ? WHERE name = ?",
            (
                updated.state.value,
                updated.state_message,
                updated.restarts,
                updated.pid,
                updated.updated_at,
                name,
            ),
        )
        return updated

    def delete(self, name: str) -> None:
        self.db.execute("DELETE FROM replicators WHERE name = ?", (name,))


def already_exists(name: str) -> errors.ReplicatorAlreadyExists:
    return errors.ReplicatorAlreadyExists(
        f"replicator {name!r} already exists (`cloudctl describe-replicator {name}` shows it)",
        replicator=name,
    )


def _record(row: sqlite3.Row) -> Replicator:
    return Replicator(
        name=row["name"],
        source_cluster=row["source_cluster"],
        source_bootstrap=row["source_bootstrap"],
        target_cluster=row["target_cluster"],
        source_alias=row["source_alias"],
        topics=row["topics"],
        groups=row["groups_pattern"],
        sync_group_offsets=bool(row["sync_group_offsets"]),
        topic_name_policy=TopicNamePolicy(row["topic_name_policy"]),
        state=ReplicatorState(row["state"]),
        state_message=row["state_message"],
        restarts=row["restarts"],
        pid=row["pid"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class Runner(Protocol):
    """What the frontend needs of the backend (``replicator_runner.ReplicatorRunner``)."""

    def wake(self) -> None: ...

    async def remove(self, name: str) -> None:
        """Stop the replicator's process and forget it (its row is deleted after)."""

    async def partitions(self, record: Replicator) -> list[ReplicatedPartition]:
        """Its replicated partitions with their lag."""


@dataclass(frozen=True)
class CreateRequest:
    name: str
    target_cluster: str
    source_cluster: str = ""
    source_bootstrap: str = ""
    topics: str = ""
    groups: str = ""
    sync_group_offsets: bool = False
    topic_name_policy: TopicNamePolicy = TopicNamePolicy.PREFIXED
    source_alias: str = ""


class ReplicatorOps:
    """The frontend: checks, records, wakes the runner."""

    def __init__(self, store: Store, settings: Settings, table: Replicators, runner: Runner):
        self.store = store
        self.settings = settings
        self.table = table
        self.runner = runner

    async def create(self, request: CreateRequest) -> Replicator:
        name = request.name
        if not NAME.match(name):
            raise errors.InvalidName(
                f"invalid replicator name {name!r}: use 1-64 ASCII letters, digits and "
                "hyphens, starting with a letter",
                replicator=name,
            )
        if self.table.get(name) is not None:
            raise already_exists(name)
        record = self._checked(request)
        most = self.settings.replicator_max_count
        if len(self.table.list()) >= most:
            raise errors.PreconditionFailed(
                f"{most} replicators exist, the most this control plane runs "
                f"(replicator.max.count = {most}); delete one first",
                replicator=name,
            )
        reason = await asyncio.to_thread(
            missing, self.settings.replicator_java, self.settings.replicator_classpath
        )
        if reason:
            raise errors.PreconditionFailed(reason, replicator=name)
        now = time.time()
        record = replace(record, created_at=now, updated_at=now)
        self.table.insert(record)
        self.runner.wake()
        return record

    def _checked(self, request: CreateRequest) -> Replicator:
        name = request.name
        if not request.target_cluster:
            raise errors.BadRequest(
                f"replicator {name!r}: give the target cluster", replicator=name
            )
        errors.existing_cluster(self.store, request.target_cluster)
        source, bootstrap = request.source_cluster, request.source_bootstrap.strip()
        if bool(source) == bool(bootstrap):
            raise errors.BadRequest(
                f"replicator {name!r}: give either a source cluster of this control plane or "
                "the bootstrap servers of an external one (host:port[,host:port...]), not "
                + ("both" if source else "neither"),
                replicator=name,
            )
        if source:
            errors.existing_cluster(self.store, source)
            if source == request.target_cluster:
                raise errors.BadRequest(
                    f"replicator {name!r}: source and target are the same cluster {source!r}; "
                    "a replicator copies between two clusters",
                    replicator=name,
                )
        else:
            bootstrap = _check_bootstrap(name, bootstrap)
        topics = _check_pattern(name, "topics", request.topics or DEFAULT_PATTERN)
        groups = _check_pattern(name, "groups", request.groups or DEFAULT_PATTERN)
        alias = request.source_alias or source or EXTERNAL_ALIAS
        if not ALIAS.match(alias):
            raise errors.BadRequest(
                f"replicator {name!r}: invalid source alias {alias!r}: 1-64 letters, digits, "
                "hyphens and underscores (no dot: it prefixes the copied topics' names)",
                replicator=name,
            )
        if alias == request.target_cluster:
            raise errors.BadRequest(
                f"replicator {name!r}: the source alias {alias!r} is the target cluster's "
                "name (its alias in MirrorMaker); give another source alias",
                replicator=name,
            )
        for other in self.table.list():
            if other.target_cluster == request.target_cluster and other.source_alias == alias:
                raise errors.BadRequest(
                    f"replicator {other.name!r} already copies source alias {alias!r} into "
                    f"cluster {request.target_cluster!r} (their MirrorMaker topics would be "
                    "shared); give this one another source alias",
                    replicator=name,
                )
        return Replicator(
            name=name,
            source_cluster=source,
            source_bootstrap=bootstrap,
            target_cluster=request.target_cluster,
            source_alias=alias,
            topics=topics,
            groups=groups,
            sync_group_offsets=request.sync_group_offsets,
            topic_name_policy=request.topic_name_policy,
            state_message="starting MirrorMaker",
        )

    async def describe(self, name: str) -> tuple[Replicator, list[ReplicatedPartition]]:
        record = self.table.existing(name)
        return record, await self.runner.partitions(record)

    def list(self) -> list[Replicator]:
        return self.table.list()

    async def delete(self, name: str) -> Replicator:
        """Stop the process and forget the replicator; the record as it was (DELETING)."""
        record = self.table.existing(name)
        record = self.table.update(name, state=ReplicatorState.DELETING) or record
        await self.runner.remove(name)
        self.table.delete(name)
        return record


def _check_pattern(name: str, what: str, pattern: str) -> str:
    """A regular expression MirrorMaker takes (checked with Python's re, which reads the
    common Java syntax the same way)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise errors.BadRequest(
            f"replicator {name!r}: {what} {pattern!r} is not a regular expression: {exc}",
            replicator=name,
        ) from None
    return pattern


def _check_bootstrap(name: str, text: str) -> str:
    addresses: Sequence[str] = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in addresses if not HOST_PORT.match(a) or int(a.rpartition(":")[2]) > 65535]
    if not addresses or bad:
        raise errors.BadRequest(
            f"replicator {name!r}: source bootstrap {text!r} is not host:port[,host:port...]",
            replicator=name,
        )
    return ",".join(addresses)
