"""Configurations: named, revisioned broker settings, as MSK's (``Configurations`` service,
proto/sluice/v1/configurations.proto; controlplane/README.md, "Configurations").

A configuration is of the installation; its revisions (1, 2, ...) never change once made:
``update`` makes the next one with exactly the settings given. Settings are checked as a
cluster's are (``validate_broker_config``: the brokers' definitions, keys the control plane
owns refused). Clusters refer to a revision (``clusters.configuration_name`` and
``configuration_revision``); a configuration a cluster refers to cannot be deleted. Rows live
in ``state.db`` (``store.CONFIGURATION_TABLES``).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from controlplane import errors
from controlplane.config import CLUSTER_NAME, Settings, validate_broker_config
from controlplane.store import Store

DESCRIPTION_MAX = 1024
"""Longest description of a revision (MSK's limit)."""


@dataclass(frozen=True)
class Revision:
    """One revision of a configuration, with its settings."""

    name: str
    revision: int
    description: str
    properties: Mapping[str, str]
    created_at: float


@dataclass(frozen=True)
class Configuration:
    """A configuration at one revision (``current``), with the list of all of them."""

    name: str
    config_id: str
    created_at: float
    current: Revision
    revisions: tuple[Revision, ...]
    clusters: tuple[str, ...] = field(default_factory=tuple)

    @property
    def arn(self) -> str:
        return f"arn:sluice:kafka:local:configuration/{self.name}/{self.config_id}"

    @property
    def latest(self) -> int:
        return self.revisions[-1].revision


class ConfigurationOps:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    @property
    def db(self) -> sqlite3.Connection:
        return self.store.db

    def create(self, name: str, description: str, properties: Mapping[str, str]) -> Configuration:
        _check_name(name)
        checked = _check(name, description, properties)
        now = time.time()
        try:
            with self.store.transaction() as db:
                db.execute(
                    "INSERT INTO configurations (name, config_id, created_at) VALUES (?, ?, ?)",
                    (name, uuid.uuid4().hex, now),
                )
                _insert_revision(db, Revision(name, 1, description, checked, now))
        except sqlite3.IntegrityError:
            raise errors.ConfigurationAlreadyExists(
                f"configuration {name!r} already exists (a new revision: UpdateConfiguration)",
                configuration=name,
            ) from None
        return self.get(name)

    def update(self, name: str, description: str, properties: Mapping[str, str]) -> Configuration:
        """The next revision of ``name``, with exactly ``properties``."""
        current = self.get(name)
        checked = _check(name, description, properties)
        most = self.settings.configuration_max_revisions
        if current.latest >= most:
            raise errors.PreconditionFailed(
                f"configuration {name!r} has {current.latest} revisions, the most one may have "
                f"(configuration.max.revisions = {most}); make a new configuration",
                configuration=name,
            )
        with self.store.transaction() as db:
            next_one = Revision(name, current.latest + 1, description, checked, time.time())
            _insert_revision(db, next_one)
        return self.get(name)

    def get(self, name: str, revision: int = 0) -> Configuration:
        """``name`` at ``revision`` (0: the latest); CONFIGURATION_NOT_FOUND otherwise."""
        row = self.db.execute("SELECT * FROM configurations WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise errors.ConfigurationNotFound(
                f"no configuration {name!r} (`cloudctl list-configurations` lists them)",
                configuration=name,
            )
        revisions = tuple(
            _revision(r)
            for r in self.db.execute(
                "SELECT * FROM configuration_revisions WHERE name = ? ORDER BY revision", (name,)
            )
        )
        wanted = revision or revisions[-1].revision
        found = [r for r in revisions if r.revision == wanted]
        if not found:
            raise errors.ConfigurationNotFound(
                f"configuration {name!r} has no revision {revision} (it has 1 to "
                f"{revisions[-1].revision})",
                configuration=name,
                revision=revision,
            )
        clusters = tuple(
            r[0]
            for r in self.db.execute(
                "SELECT name FROM clusters WHERE configuration_name = ? ORDER BY name", (name,)
            )
        )
        return Configuration(
            name, row["config_id"], row["created_at"], found[0], revisions, clusters
        )

    def list(self) -> list[Configuration]:
        names = [r[0] for r in self.db.execute("SELECT name FROM configurations ORDER BY name")]
        return [self.get(name) for name in names]

    def delete(self, name: str) -> None:
        found = self.get(name)
        if found.clusters:
            raise errors.PreconditionFailed(
                f"configuration {name!r} is used by cluster(s) {', '.join(found.clusters)}: "
                "move them to another configuration or delete them first",
                configuration=name,
            )
        with self.store.transaction() as db:
            db.execute("DELETE FROM configuration_revisions WHERE name = ?", (name,))
            db.execute("DELETE FROM configurations WHERE name = ?", (name,))

    def properties(self, name: str, revision: int) -> dict[str, str]:
        """The settings of a revision a cluster refers to ({} for none, or one gone)."""
        if not name:
            return {}
        row = self.db.execute(
            "SELECT properties FROM configuration_revisions WHERE name = ? AND revision = ?",
            (name, revision),
        ).fetchone()
        return {} if row is None else dict(json.loads(row[0]))


def _check_name(name: str) -> None:
    if not CLUSTER_NAME.match(name):
        raise errors.InvalidName(
            f"invalid configuration name {name!r}: use 1-64 ASCII letters, digits and "
            "hyphens, not starting with a hyphen",
            configuration=name,
        )


def _check(name: str, description: str, properties: Mapping[str, str]) -> dict[str, str]:
    if len(description) > DESCRIPTION_MAX:
        raise errors.BadRequest(
            f"configuration {name!r}: a description of at most {DESCRIPTION_MAX} characters",
            configuration=name,
        )
    try:
        return validate_broker_config(properties)
    except errors.InvalidConfig as exc:
        exc.metadata["configuration"] = name
        raise


def _insert_revision(db: sqlite3.Connection, revision: Revision) -> None:
    db.execute(
        "INSERT INTO configuration_revisions (name, revision, description, properties,"
        " created_at) VALUES (?, ?, ?, ?, ?)",
        (
            revision.name,
            revision.revision,
            revision.description,
            json.dumps(dict(revision.properties), sort_keys=True),
            revision.created_at,
        ),
    )


def _revision(row: sqlite3.Row) -> Revision:
    return Revision(
        row["name"],
        row["revision"],
        row["description"],
        json.loads(row["properties"]),
        row["created_at"],
    )
