"""The spec of one billing run: what ``python -m billing.job --spec FILE`` reads.

The control plane writes it as a 0600 JSON file (credentials never on a command line)::

    {"output": "/path/or/s3://bucket/prefix",
     "s3": {"endpoint": "http://127.0.0.1:9000", "access_key": "...", "secret_key": "...",
            "region": "us-east-1"},
     "checkpoints": "/path/billing/checkpoints",
     "rate_card": "",
     "spark_master": "local[*]",
     "clusters": [{"name": "orders", "id": "<cluster uuid>", "bootstrap": "127.0.0.1:9092",
                   "options": {"kafka.security.protocol": "SASL_PLAINTEXT"}}],
     "archives": [{"name": "orders", "id": "<cluster uuid>",
                   "path": "/home/billing-archive/orders.<cluster uuid>.jsonl"}],
     "limits": {"cluster_timeout_ms": 30000, "malformed_reported": 100,
                "ingest_attempts": 3},
     "spark_conf": {"spark.sql.shuffle.partitions": "8"}}

``s3`` only when ``output`` is an s3:// URI; ``rate_card`` "" is the default card;
``archives`` (the usage files of deleted clusters, one encoded ``UsageEvent`` a line),
``limits`` and ``spark_conf`` are optional (:class:`Limits` has the defaults).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

DEFAULT_MASTER = "local[*]"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""A cluster id is base64url (a UUID's 16 bytes, 22 characters): it may begin with - or _."""


class SpecError(ValueError):
    """A spec that is not valid JSON or lacks a field, or has one of the wrong type."""


@dataclass(frozen=True)
class Limits:
    """The job's limits, each with its key in the spec's ``limits`` object."""

    cluster_timeout_ms: int = 30_000
    """How long a cluster may take to answer its metadata request before the job reports it
    unreachable (and bills the others)."""
    malformed_reported: int = 100
    """Malformed usage records named one by one (cluster, partition, offset) per cluster
    and run; the rest are only counted."""
    ingest_attempts: int = 3
    """Times a cluster's ingest query is started when Spark fails to start one of its
    Python workers (a worker must connect back within Spark's fixed 10 s, which a
    saturated machine can miss). The query resumes from its checkpoint: a retry never
    counts an event twice."""


@dataclass(frozen=True)
class S3Target:
    """Where an s3:// output goes. ``secret_key`` never appears in a repr or a message."""

    endpoint: str | None
    access_key: str | None
    secret_key: str | None = field(repr=False)
    region: str = "us-east-1"


@dataclass(frozen=True)
class ClusterSource:
    """One cluster whose ``__sluice_usage`` topic the job reads."""

    name: str
    id: str
    bootstrap: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False)
    """``format("sluice")`` read options (``kafka.*``, ``sluice.*``; may hold credentials)."""

    @property
    def checkpoint_name(self) -> str:
        """The directory of its streaming checkpoint under ``checkpoints``."""
        return f"{self.name}-{self.id}"


@dataclass(frozen=True)
class ArchiveSource:
    """The archived usage of a deleted cluster (``controlplane/billing_archive.py``): a file
    of one ``UsageEvent.encode()`` a line, ingested beside the live topics."""

    name: str
    id: str
    path: Path


@dataclass(frozen=True)
class JobSpec:
    output: str
    checkpoints: Path
    clusters: tuple[ClusterSource, ...]
    s3: S3Target | None = None
    rate_card: str = ""
    spark_master: str = DEFAULT_MASTER
    limits: Limits = field(default_factory=Limits)
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    archives: tuple[ArchiveSource, ...] = ()

    @property
    def is_s3(self) -> bool:
        return self.output.startswith("s3://")

    def bucket_and_prefix(self) -> tuple[str, str]:
        """``s3://bucket/a/b`` -> ("bucket", "a/b/"); the prefix is "" or ends with "/"."""
        rest = self.output.removeprefix("s3://")
        bucket, _, prefix = rest.partition("/")
        prefix = prefix.strip("/")
        return bucket, f"{prefix}/" if prefix else ""


def load_spec(path: Path) -> JobSpec:
    """The spec in ``path``; :class:`SpecError` names the file and what is wrong."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise SpecError(f"cannot read the billing spec {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"billing spec {path} is not JSON: {exc}") from None
    try:
        return parse_spec(doc)
    except SpecError as exc:
        raise SpecError(f"billing spec {path}: {exc}") from None


def parse_spec(doc: Any) -> JobSpec:
    if not isinstance(doc, dict):
        raise SpecError("the spec is not a JSON object")
    output = _text(doc, "output")
    if not output:
        raise SpecError('"output" is empty: give a directory or an s3://bucket/prefix URI')
    s3_doc = doc.get("s3")
    s3: S3Target | None = None
    if output.startswith("s3://"):
        if not isinstance(s3_doc, dict):
            raise SpecError(f'"output" is {output}, but there is no "s3" object')
        if not output.removeprefix("s3://").split("/")[0]:
            raise SpecError(f'"output" {output} names no bucket (s3://BUCKET/PREFIX)')
        s3 = S3Target(
            endpoint=_text(s3_doc, "endpoint", "") or None,
            access_key=_text(s3_doc, "access_key", "") or None,
            secret_key=_text(s3_doc, "secret_key", "") or None,
            region=_text(s3_doc, "region", "us-east-1") or "us-east-1",
        )
    clusters_doc = doc.get("clusters")
    if not isinstance(clusters_doc, list):
        raise SpecError('"clusters" is not a list')
    clusters = tuple(_cluster(c, i) for i, c in enumerate(clusters_doc))
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        raise SpecError(f'"clusters" names a cluster twice: {sorted(names)}')
    archives_doc = doc.get("archives") or []
    if not isinstance(archives_doc, list):
        raise SpecError('"archives" is not a list')
    archives = tuple(_archive(a, i) for i, a in enumerate(archives_doc))
    return JobSpec(
        output=output,
        checkpoints=Path(_text(doc, "checkpoints")),
        clusters=clusters,
        s3=s3,
        rate_card=_text(doc, "rate_card", ""),
        spark_master=_text(doc, "spark_master", "") or DEFAULT_MASTER,
        limits=_limits(doc.get("limits") or {}),
        spark_conf=_strings(doc.get("spark_conf") or {}, "spark_conf"),
        archives=archives,
    )


def _cluster(doc: Any, index: int) -> ClusterSource:
    if not isinstance(doc, dict):
        raise SpecError(f"clusters[{index}] is not an object")
    name = _text(doc, "name")
    if not _NAME.match(name):
        raise SpecError(f"clusters[{index}].name {name!r} is not a cluster name")
    cluster_id = _text(doc, "id")
    if not _CLUSTER_ID.match(cluster_id):
        raise SpecError(f"clusters[{index}].id {cluster_id!r} is not a cluster id")
    return ClusterSource(
        name=name,
        id=cluster_id,
        bootstrap=_text(doc, "bootstrap"),
        options=_strings(doc.get("options") or {}, f"clusters[{index}].options"),
    )


def _archive(doc: Any, index: int) -> ArchiveSource:
    if not isinstance(doc, dict):
        raise SpecError(f"archives[{index}] is not an object")
    name, cluster_id = _text(doc, "name"), _text(doc, "id")
    for key, value, pattern in (("name", name, _NAME), ("id", cluster_id, _CLUSTER_ID)):
        if not pattern.match(value):
            raise SpecError(f"archives[{index}].{key} {value!r} is not a cluster {key}")
    path = _text(doc, "path")
    if not path:
        raise SpecError(f"archives[{index}].path is empty: give the archive file")
    return ArchiveSource(name=name, id=cluster_id, path=Path(path))


def _limits(doc: Any) -> Limits:
    if not isinstance(doc, dict):
        raise SpecError('"limits" is not an object')
    known = {f.name for f in fields(Limits)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise SpecError(f'"limits" has unknown keys {unknown}: known are {sorted(known)}')
    values: dict[str, int] = {}
    for key, value in doc.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise SpecError(f'"limits".{key} is not a positive integer: {value!r}')
        values[key] = value
    return Limits(**values)


def _text(doc: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = doc.get(key, default)
    if value is None:
        raise SpecError(f'no "{key}"')
    if not isinstance(value, str):
        raise SpecError(f'"{key}" is not a string: {type(value).__name__}')
    return value


def _strings(doc: Any, what: str) -> dict[str, str]:
    if not isinstance(doc, dict):
        raise SpecError(f'"{what}" is not an object')
    out: dict[str, str] = {}
    for key, value in doc.items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            out[key] = str(value)
        else:
            raise SpecError(f'"{what}".{key} is not a string or a number')
    return out
