"""Putting a segment's objects and deleting them (blocking: brokers call these in threads).

Objects: the .log (from its file, multipart when large), its index, its leader epochs and
the producer snapshot at its end (when the broker has one). Uploads are idempotent: a
retried upload overwrites. Errors are the store's typed errors (ObjectStoreUnavailable is
retriable).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from tiered.errors import ObjectNotFound
from tiered.layout import segment_keys
from tiered.object_store import ObjectStore
from tiered.remote_segment import RemoteSegment


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    log: Path
    index: bytes
    epochs: bytes
    snapshot: bytes | None


def upload_segment(
    store: ObjectStore, cluster_id: str, segment: RemoteSegment, files: SegmentFiles
) -> None:
    keys = segment_keys(cluster_id, segment)
    store.put(keys.index, files.index)
    store.put(keys.epochs, files.epochs)
    if files.snapshot is not None:
        store.put(keys.snapshot, files.snapshot)
    store.put(keys.log, files.log)


def delete_segment(store: ObjectStore, cluster_id: str, segment: RemoteSegment) -> None:
    with contextlib.suppress(ObjectNotFound):
        store.delete_many(list(segment_keys(cluster_id, segment).all()))


def delete_prefix(store: ObjectStore, prefix: str) -> int:
    """Delete every object under ``prefix``; how many there were."""
    keys = [info.key for info in store.list(prefix)]
    if keys:
        store.delete_many(keys)
    return len(keys)
