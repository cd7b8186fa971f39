"""Access keys of the embedded S3 server: who may sign requests, and for which buckets.

One JSON file (``DATA_DIR/access-keys.json`` of the server, mode 0600), written whole and
atomically (temp file, fsync, rename) by its owner (the control plane, or ``EmbeddedS3`` for
its admin key) and read by the server, which re-reads it when it changes (a new cluster's
keys work at once, a deleted cluster's keys stop working at once)::

    {"keys": [{"access_key_id": "SLK…", "secret_access_key": "…", "name": "controlplane",
               "admin": true, "buckets": [], "read_only": false}, …]}

- ``admin``: every S3 request on every bucket (bucket creation and deletion, ListBuckets).
- otherwise: requests on the buckets named in ``buckets`` only; ``read_only`` keys may only
  GET and HEAD (objects and listings); read-write keys may also put, copy (from a bucket they
  may read), delete objects, and create one of their buckets, never delete a bucket.

Secrets never appear in ``repr`` (a key logged by mistake shows its id only).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import string
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEYS_FILE = "access-keys.json"
"""The key file's name in the embedded server's data directory."""

_ID_ALPHABET = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class AccessKey:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    name: str = ""
    """What the key is for (``controlplane``, ``BUCKET brokers``): for people reading the file."""
    admin: bool = False
    buckets: tuple[str, ...] = ()
    read_only: bool = False

    def may(self, bucket: str, *, write: bool, manage: bool = False) -> bool:
        """Whether this key may make a request on ``bucket`` ("" for ListBuckets).

        ``write``: the request changes something; ``manage``: it changes the bucket itself
        (deletes it, or its policy, versioning, lifecycle...): admin keys only."""
        if self.admin:
            return True
        if not bucket or bucket not in self.buckets or manage:
            return False
        return not (write and self.read_only)

    def to_dict(self) -> dict[str, Any]:
        return {
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "name": self.name,
            "admin": self.admin,
            "buckets": list(self.buckets),
            "read_only": self.read_only,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AccessKey:
        return cls(
            access_key_id=str(data["access_key_id"]),
            secret_access_key=str(data["secret_access_key"]),
            name=str(data.get("name", "")),
            admin=bool(data.get("admin", False)),
            buckets=tuple(str(b) for b in data.get("buckets", ())),
            read_only=bool(data.get("read_only", False)),
        )


def generate(
    name: str, *, admin: bool = False, buckets: Iterable[str] = (), read_only: bool = False
) -> AccessKey:
    """A new random key pair: a 20-character id (``SLK`` + 17 of A-Z0-9, AWS's shape) and a
    40-character secret (240 bits from ``secrets``)."""
    key_id = "SLK" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(17))
    return AccessKey(
        access_key_id=key_id,
        secret_access_key=secrets.token_urlsafe(30),
        name=name,
        admin=admin,
        buckets=tuple(buckets),
        read_only=read_only,
    )


class KeyFile:
    """The key file: ``load`` and ``save`` (whole, atomic, 0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[AccessKey]:
        """The keys; none when the file does not exist."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        data = json.loads(text)
        return [AccessKey.from_dict(entry) for entry in data.get("keys", [])]

    def save(self, keys: Iterable[AccessKey]) -> None:
        body = json.dumps({"keys": [k.to_dict() for k in keys]}, indent=1).encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def admin(self) -> AccessKey | None:
        """The first admin key, if any."""
        return next((k for k in self.load() if k.admin), None)

    def put(self, key: AccessKey) -> None:
        """Add ``key``, replacing a key with the same id."""
        others = [k for k in self.load() if k.access_key_id != key.access_key_id]
        self.save([*others, key])

    def remove(self, keep: Any) -> int:
        """Drop the keys for which ``keep(key)`` is false; how many were dropped."""
        keys = self.load()
        kept = [k for k in keys if keep(k)]
        if len(kept) != len(keys):
            self.save(kept)
        return len(keys) - len(kept)
