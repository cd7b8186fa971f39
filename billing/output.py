"""Where the pipeline's tables go: a local directory, or an s3:// prefix of the object store.

Spark writes local files only: its S3 connector (``s3a://``) needs hadoop-aws and the AWS
SDK bundle (hundreds of MB of jars the pyspark wheel does not ship), so for an s3:// output
the job builds the tables in a local staging directory (``checkpoints/_staging``, beside
the streaming checkpoints it must keep anyway) and then mirrors them to the bucket with the
object-store client of ``tiered`` (boto3). The mirror:

- ``events/``: exactly the files each sink's log has committed (no ``_spark_metadata``: its
  entries name local paths; files of a batch killed before its commit never leave the
  machine), and the archives' Parquet files, so the bucket's copy is a plain Parquet dataset;
- ``hourly/``, ``daily/``, ``models/``, ``invoices/``, ``offsets/``: every file of the local
  table except hidden and ``_`` ones (Spark's staging and markers);
- uploads what the bucket lacks or holds differently (Parquet by size: Spark names every
  file anew; JSON by MD5 against the ETag) and deletes keys of those trees the local copy
  no longer has (partitions rewritten by dynamic overwrite). Each run mirrors everything,
  so a run killed half-way through an upload is completed by the next.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from billing.spec import JobSpec
from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectStoreError
from tiered.object_store import ObjectInfo, S3ObjectStore

TABLES = ("hourly", "daily", "models", "invoices", "offsets")
"""Trees mirrored file for file (``events`` goes by its sink log)."""
UPLOAD_THREADS = 8


class OutputError(RuntimeError):
    """The output location cannot be written; the message says which and why."""


@dataclass(frozen=True)
class MirrorStats:
    uploaded: int
    deleted: int
    unchanged: int


class Mirror:
    """An s3:// prefix kept equal to a local directory (see the module's docstring)."""

    def __init__(self, store: S3ObjectStore, prefix: str, uri: str) -> None:
        self.store = store
        self.prefix = prefix
        self.uri = uri

    def check(self) -> None:
        """Create the bucket if needed: fails early, naming the URI, if it cannot be."""
        try:
            self.store.ensure_bucket()
        except ObjectStoreError as exc:
            raise OutputError(
                f"output {self.uri}: {exc}: check the spec's s3 endpoint and keys (the "
                "control plane's object store must run)"
            ) from None

    def put(self, relative: str, data: bytes) -> None:
        try:
            self.store.put(self.prefix + relative, data)
        except ObjectStoreError as exc:
            raise OutputError(f"output {self.uri}: upload of {relative}: {exc}") from None

    def sync(self, desired: Mapping[str, Path], trees: list[str]) -> MirrorStats:
        """Make the keys under each of ``trees`` (relative prefixes ending in "/") those
        of ``desired`` (relative key -> local file)."""
        try:
            remote: dict[str, ObjectInfo] = {}
            for tree in trees:
                for info in self.store.list(self.prefix + tree):
                    remote[info.key.removeprefix(self.prefix)] = info
            uploads = [
                (key, path)
                for key, path in sorted(desired.items())
                if not _same(path, remote.get(key))
            ]
            with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
                for _ in pool.map(lambda kp: self.store.put(self.prefix + kp[0], kp[1]), uploads):
                    pass
            stale = sorted(set(remote) - set(desired))
            self.store.delete_many(self.prefix + key for key in stale)
        except ObjectStoreError as exc:
            raise OutputError(f"output {self.uri}: {exc}") from None
        return MirrorStats(len(uploads), len(stale), len(desired) - len(uploads))


def _same(path: Path, info: ObjectInfo | None) -> bool:
    if info is None or info.size != path.stat().st_size:
        return False
    if path.suffix != ".json":
        return True
    return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest() == info.etag


class Output:
    """The job's output: ``root`` is where Spark and the job write (the output directory
    itself, or the staging directory of an s3:// output, then ``mirror`` is set)."""

    def __init__(self, root: Path, mirror: Mirror | None = None) -> None:
        self.root = root
        self.mirror = mirror

    @classmethod
    def of(cls, spec: JobSpec) -> Output:
        if not spec.is_s3:
            return cls(Path(spec.output))
        assert spec.s3 is not None
        bucket, prefix = spec.bucket_and_prefix()
        settings = ObjectStoreSettings(
            endpoint=spec.s3.endpoint,
            bucket=bucket,
            region=spec.s3.region,
            access_key_id=spec.s3.access_key,
            secret_access_key=spec.s3.secret_key,
        )
        staging = spec.checkpoints / "_staging"
        return cls(staging, Mirror(S3ObjectStore(settings), prefix, spec.output))

    @property
    def events_root(self) -> Path:
        return self.root / "events"

    def events_dir(self, cluster: str) -> Path:
        """Every incarnation's events of the cluster NAME (``ingest.sink_dir`` within)."""
        return self.events_root / f"cluster={cluster}"

    def table(self, name: str) -> Path:
        return self.root / name

    def write_json(self, relative: str, doc: Any, *, publish_now: bool = False) -> Path:
        """Write ``doc`` to ``relative`` atomically (and to the bucket at once when
        ``publish_now``: the control plane reads offsets while the job goes on)."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        data = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
        if publish_now and self.mirror is not None:
            self.mirror.put(relative, data)
        return path

    def publish(self, event_files: Iterable[Path]) -> MirrorStats | None:
        """Mirror everything to the bucket (None for a local output). ``event_files``: every
        committed file of every sink and every archive Parquet file under ``events/``
        (the whole tree is mirrored: keys of other files there are deleted)."""
        if self.mirror is None:
            return None
        desired: dict[str, Path] = {}
        trees = [f"{name}/" for name in (*TABLES, "events")]
        for path in event_files:
            desired[path.relative_to(self.root).as_posix()] = path
        for name in TABLES:
            for path in _visible_files(self.root / name):
                desired[path.relative_to(self.root).as_posix()] = path
        return self.mirror.sync(desired, trees)


def _visible_files(directory: Path) -> Iterator[Path]:
    if not directory.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]
        for name in filenames:
            if not name.startswith((".", "_")):
                yield Path(dirpath) / name
