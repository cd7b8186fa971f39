"""Where the billing pipeline writes (``billing.output``), and the control plane's reads of it.

The output is a directory (default ``$SLUICE_HOME/billing``) or an ``s3://BUCKET/PREFIX``
URI in the control plane's object store (the embedded S3 server, or ``--s3-endpoint``'s).
Its layout is the pipeline's (billing/README.md): ``hourly/cluster=C/day=D/*.parquet``,
``events/cluster=C/cluster_id=I/day=D/*.parquet`` (one Structured Streaming file sink per
cluster id, whose committed files its ``_spark_metadata/`` lists; the control plane does not
read them), ``invoices/YYYY-MM.json``,
``offsets/C.json``. The control plane only reads it: :class:`OutputReader` lists files under
a path and reads one, the same way for both kinds (S3 calls run in threads, never on the
event loop: callers use ``asyncio.to_thread``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tiered.errors import ObjectNotFound
from tiered.object_store import S3ObjectStore

DEFAULT_DIR = "billing"
"""The default output, under ``$SLUICE_HOME``."""
_PARTITION = re.compile(r"^([a-z_]+)=(.*)$")


@dataclass(frozen=True)
class OutputLocation:
    uri: str
    """An absolute directory, or ``s3://BUCKET/PREFIX``."""

    @classmethod
    def of(cls, setting: str, home: Path) -> OutputLocation:
        """``billing.output`` (empty: ``$SLUICE_HOME/billing``); a relative directory is
        relative to the home."""
        text = setting.strip()
        if not text:
            return cls(str(home / DEFAULT_DIR))
        if text.startswith("s3://"):
            bucket = text.removeprefix("s3://").split("/")[0]
            if not bucket:
                raise ValueError(
                    f"billing.output {text!r} names no bucket: give s3://BUCKET[/PREFIX]"
                )
            return cls(text.rstrip("/"))
        path = Path(text).expanduser()
        return cls(str(path if path.is_absolute() else home / path))

    @property
    def is_s3(self) -> bool:
        return self.uri.startswith("s3://")

    @property
    def bucket(self) -> str:
        return self.uri.removeprefix("s3://").split("/")[0] if self.is_s3 else ""

    @property
    def prefix(self) -> str:
        """The key prefix under the bucket: "" or ending with "/"."""
        rest = self.uri.removeprefix("s3://").partition("/")[2].strip("/")
        return f"{rest}/" if rest else ""


class OutputReader(Protocol):
    def list(self, under: str) -> list[str]:
        """Paths (relative to the output, "/"-separated) of every file below ``under``."""

    def read(self, path: str) -> bytes | None:
        """A file's bytes; None when it does not exist."""


class LocalOutput:
    def __init__(self, root: Path) -> None:
        self.root = root

    def list(self, under: str) -> list[str]:
        base = self.root / under
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())

    def read(self, path: str) -> bytes | None:
        try:
            return (self.root / path).read_bytes()
        except FileNotFoundError:
            return None


class S3Output:
    def __init__(self, store: S3ObjectStore, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    def list(self, under: str) -> list[str]:
        start = f"{self.prefix}{under.strip('/')}/"
        try:
            return sorted(info.key.removeprefix(self.prefix) for info in self.store.list(start))
        except ObjectNotFound:
            return []  # no bucket yet: the pipeline has not written

    def read(self, path: str) -> bytes | None:
        try:
            return self.store.get(f"{self.prefix}{path}")
        except ObjectNotFound:
            return None


# ---------------------------------------------------------------------- the layout


def partitions(path: str) -> dict[str, str]:
    """The ``key=value`` directories of a path: ``hourly/cluster=a/day=b/x`` -> {cluster,
    day}."""
    out = {}
    for part in path.split("/")[:-1]:
        found = _PARTITION.match(part)
        if found is not None:
            out[found.group(1)] = found.group(2)
    return out


def parquet_files(
    reader: OutputReader, table: str, cluster: str | None, days: set[str] | None
) -> Iterator[tuple[str, str, str]]:
    """(cluster, day, path) of the Parquet files of ``table`` (``hourly``, ``events``) of
    ``cluster`` (every one when None) and ``days`` (every one when None)."""
    under = table if cluster is None else f"{table}/cluster={cluster}"
    for path in reader.list(under):
        if not path.endswith(".parquet") or "/_" in path or "/." in path:
            continue
        found = partitions(path)
        name, day = found.get("cluster", ""), found.get("day", "")
        if not name or (cluster is not None and name != cluster):
            continue
        if days is not None and day not in days:
            continue
        yield name, day, path


def clusters_with_usage(reader: OutputReader) -> set[str]:
    """The clusters the pipeline has hourly usage of (deleted ones included)."""
    return {partitions(p).get("cluster", "") for p in reader.list("hourly")} - {""}


def committed_sink_files(reader: OutputReader, sink: str) -> set[str] | None:
    """The files a Structured Streaming file sink (``sink``: a directory of the output) has
    committed, as paths relative to the output, from its ``_spark_metadata`` log; None when
    it has no log (then every file counts). A batch killed before its commit left files the
    log does not name: they are not the sink's."""
    names = reader.list(f"{sink}/_spark_metadata")
    if not names:
        return None
    added: set[str] = set()
    deleted: set[str] = set()
    anchor = f"/{sink.strip('/')}/"
    for name in names:
        data = reader.read(name)
        if data is None:
            continue
        for line in data.decode(errors="replace").splitlines()[1:]:  # first line: "v1"
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            where = str(entry.get("path", ""))
            cut = where.rfind(anchor)
            if cut < 0:
                continue
            relative = f"{sink.strip('/')}/{where[cut + len(anchor) :]}"
            (deleted if entry.get("action") == "delete" else added).add(relative)
    return added - deleted


def read_offsets(reader: OutputReader, cluster: str) -> dict[int, int] | None:
    """``offsets/<cluster>.json``: the next offset per partition the pipeline has ingested
    of the cluster's usage topic; None when it has not (or the file is not readable)."""
    data = reader.read(f"offsets/{cluster}.json")
    if data is None:
        return None
    try:
        doc = json.loads(data)
        return {int(p): int(o) for p, o in doc["offsets"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def invoice_months(reader: OutputReader) -> list[str]:
    """The months with an invoice (``invoices/YYYY-MM.json``), oldest first."""
    months = []
    for path in reader.list("invoices"):
        name = path.rsplit("/", 1)[-1]
        if re.fullmatch(r"\d{4}-\d{2}\.json", name):
            months.append(name.removesuffix(".json"))
    return sorted(months)
