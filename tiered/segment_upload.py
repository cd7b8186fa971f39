"""Putting a segment's objects and deleting them (blocking: brokers call these in threads).

Objects (keys from ``tiered.layout``): the index, the leader epochs, the producer snapshot at
the segment's end (when the broker has one), the aborted transactions overlapping the
segment (when there are any), and last the .log, streamed from its file (multipart when
large, see ``S3ObjectStore.put``). Uploads are idempotent: a retried upload
of the same attempt (same ``segment_id``) overwrites. Errors are the store's typed errors and
propagate: ``ObjectStoreUnavailable`` is retriable, the caller keeps its local data and tries
again later. Whether an upload counts is decided by the metadata record (``copy_finished``),
not by which objects exist.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from tiered.errors import ObjectNotFound
from tiered.layout import check_segment_keys, segment_keys
from tiered.object_store import ObjectStore
from tiered.remote_segment import RemoteSegment

DELETE_BATCH = 1_000
"""Keys ``delete_prefix`` deletes per call of ``delete_many`` (S3's DeleteObjects maximum)."""


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """What a broker uploads for one closed segment."""

    log: Path
    """The segment's .log file (streamed, never read whole into memory)."""
    index: bytes
    """The serialised offset/time index."""
    epochs: bytes
    """The serialised leader-epoch entries covering the segment."""
    snapshot: bytes | None
    """The producer-state snapshot at the segment's end; None: the broker has none."""
    txn_index: bytes = b""
    """The aborted transactions overlapping the segment (``wire.transactions`` entries);
    empty: none, and no object is put."""


def upload_segment(
    store: ObjectStore, cluster_id: str, segment: RemoteSegment, files: SegmentFiles
) -> None:
    """Put the segment's objects (snapshot only if ``files.snapshot`` is not None, the
    transaction index only if ``files.txn_index`` is not empty).

    Raises ValueError before any request if the keys would not parse back (see
    ``tiered.layout``) or if the sizes recorded in ``segment`` are not those of ``files``
    (readers take ``size_bytes``, ``index_bytes`` and ``txn_index_bytes`` as the objects'
    sizes).
    """
    keys = check_segment_keys(cluster_id, segment)
    if len(files.index) != segment.index_bytes:
        raise ValueError(
            f"{keys.index}: {len(files.index)} index bytes, the record says {segment.index_bytes}"
        )
    if len(files.txn_index) != segment.txn_index_bytes:
        raise ValueError(
            f"{keys.txn_index}: {len(files.txn_index)} transaction index bytes, the record "
            f"says {segment.txn_index_bytes}"
        )
    try:
        log_size = files.log.stat().st_size
    except OSError as exc:
        raise ValueError(f"{keys.log}: cannot stat {files.log}: {exc}") from exc
    if log_size != segment.size_bytes:
        raise ValueError(
            f"{keys.log}: {files.log} has {log_size} bytes, the record says {segment.size_bytes}"
        )
    store.put(keys.index, files.index)
    store.put(keys.epochs, files.epochs)
    if files.snapshot is not None:
        store.put(keys.snapshot, files.snapshot)
    if files.txn_index:
        store.put(keys.txn_index, files.txn_index)
    store.put(keys.log, files.log)


def delete_segment(store: ObjectStore, cluster_id: str, segment: RemoteSegment) -> None:
    """Delete all five possible objects of the segment; absent ones are fine."""
    with contextlib.suppress(ObjectNotFound):  # the bucket itself is gone
        store.delete_many(segment_keys(cluster_id, segment).every())


def delete_prefix(store: ObjectStore, prefix: str, batch: int = DELETE_BATCH) -> int:
    """Delete every object under ``prefix`` (a ``tiered.layout`` prefix, ending in '/'), a
    batch at a time while listing; how many were deleted.

    Listing continues past deleted keys (S3 continuation tokens are key positions), so memory
    stays at one batch whatever the number of objects.
    """
    if not prefix.endswith("/") or prefix == "/":
        raise ValueError(f"delete_prefix needs a directory prefix ending in '/', got {prefix!r}")
    if batch < 1:
        raise ValueError("batch must be positive")
    count = 0
    keys: list[str] = []
    try:
        for info in store.list(prefix):
            keys.append(info.key)
            if len(keys) >= batch:
                store.delete_many(keys)
                count += len(keys)
                keys = []
        if keys:
            store.delete_many(keys)
            count += len(keys)
    except ObjectNotFound:  # no bucket: nothing to delete
        return count
    return count
