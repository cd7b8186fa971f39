"""Reads of the remote tier: batches from an uploaded segment, through the chunk cache.

Blocking code (boto3); the remote log manager runs it in its reader threads. A read finds
the batch holding the wanted offset with the segment's uploaded index (one small object,
cached like the data), then returns whole batches from there up to ``max_bytes`` (at least
one batch, as local reads do). Every batch returned is checked: its CRC (which covers the
records and most of the header), and the header fields the CRC leaves out — the base offset
must continue the previous batch (the first one: the index entry's), the magic must be 2,
the leader epoch one of the segment's, the length within the object. A failure drops the
cached chunks of the object and reads them again once; a second one is reported as
RemoteStorageError, never returned.

``aborted`` reads a segment's ``.txnindex`` object (the aborted transactions overlapping
it, see ``tiered.layout``) the same way: through the chunk cache, so it is fetched once
while the cache keeps it, refetched once if it does not parse.
"""

from __future__ import annotations

import crc32c

from tiered.chunk_cache import ChunkCache
from tiered.errors import ObjectStoreError
from tiered.layout import segment_keys
from tiered.object_store import ObjectStore
from tiered.remote_segment import RemoteSegment
from wire.errors import CorruptRecord, RemoteStorageError
from wire.record_batch import CRC_START, HEADER_SIZE, BatchHeader, parse_header
from wire.segment_index import IndexView, parse_index
from wire.transactions import TXN_INDEX_ENTRY_SIZE, AbortedTxn, parse_txn_index

MIN_WINDOW = 64 * 1024


class RemoteReader:
    def __init__(self, store: ObjectStore, cache: ChunkCache, cluster_id: str) -> None:
        self.store = store
        self.cache = cache
        self.cluster_id = cluster_id

    def index(self, segment: RemoteSegment) -> IndexView:
        key = segment_keys(self.cluster_id, segment).index
        for attempt in range(2):
            raw = self._get(key, segment.index_bytes, 0, segment.index_bytes)
            view = parse_index(raw)
            if view is not None and view.base_offset == segment.base_offset:
                return view
            self.cache.invalidate(key)
            if attempt:
                break
        raise RemoteStorageError(f"the index object {key} is damaged (CRC or format)")

    def aborted(self, segment: RemoteSegment) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``segment`` ([] when it has no
        ``.txnindex`` object)."""
        size = segment.txn_index_bytes
        if size == 0:
            return []
        key = segment_keys(self.cluster_id, segment).txn_index
        for attempt in range(2):
            raw = self._get(key, size, 0, size)
            if len(raw) == size and size % TXN_INDEX_ENTRY_SIZE == 0:
                try:
                    return parse_txn_index(raw)
                except CorruptRecord:
                    pass
            self.cache.invalidate(key)
            if attempt:
                break
        raise RemoteStorageError(f"the transaction index object {key} is damaged")

    def read(self, segment: RemoteSegment, offset: int, max_bytes: int) -> bytes:
        """Whole batches of ``segment`` from the one holding ``offset``, up to ``max_bytes``
        (at least one batch)."""
        key = segment_keys(self.cluster_id, segment).log
        for attempt in range(2):
            position, base = self.index(segment).entry_for(offset)
            try:
                return self._whole_batches(segment, key, position, base, max_bytes, offset)
            except _Damaged as exc:
                self.cache.invalidate(key)
                if attempt:
                    raise RemoteStorageError(
                        f"{key}: {exc} (read twice); the object is corrupted"
                    ) from None
        raise AssertionError("unreachable")

    def batches_for_timestamp(
        self, segment: RemoteSegment, timestamp: int, max_bytes: int
    ) -> bytes:
        """Whole batches from an indexed batch at or before the first one holding a timestamp
        >= ``timestamp``, checked as ``read``'s."""
        key = segment_keys(self.cluster_id, segment).log
        position, base = self.index(segment).entry_for_timestamp(timestamp)
        try:
            return self._whole_batches(segment, key, position, base, max_bytes, -1)
        except _Damaged as exc:
            self.cache.invalidate(key)
            raise RemoteStorageError(f"{key}: {exc}; the object is corrupted") from None

    def batches_from(
        self, segment: RemoteSegment, position: int, base: int, max_bytes: int
    ) -> bytes:
        """Whole batches from byte ``position``, where the batch with base offset ``base``
        starts."""
        key = segment_keys(self.cluster_id, segment).log
        try:
            return self._whole_batches(segment, key, position, base, max_bytes, -1)
        except _Damaged as exc:
            self.cache.invalidate(key)
            raise RemoteStorageError(f"{key}: {exc}; the object is corrupted") from None

    def _whole_batches(  # noqa: PLR0917 - a read's coordinates
        self,
        segment: RemoteSegment,
        key: str,
        position: int,
        expected: int,
        max_bytes: int,
        offset: int,
    ) -> bytes:
        """Checked batches from ``position`` (where base offset ``expected`` starts),
        skipping those wholly below ``offset``, up to ``max_bytes`` (at least one)."""
        size = segment.size_bytes
        epochs = {epoch for epoch, _ in segment.epochs}
        window = max(MIN_WINDOW, max_bytes)
        out: list[bytes] = []
        taken = 0
        while position < size:
            end = min(size, position + window)
            chunk = self._get(key, size, position, end)
            at = 0
            while at + HEADER_SIZE <= len(chunk):
                header = parse_header(chunk, at)
                length = header.size
                where = f"the batch at byte {position + at}"
                if length < HEADER_SIZE or position + at + length > size:
                    raise _Damaged(f"{where} has an impossible length {length}")
                if at + length > len(chunk):
                    break  # the batch continues past the window
                _check(header, expected, segment, epochs, where)
                if crc32c.crc32c(memoryview(chunk)[at + CRC_START : at + length]) != header.crc:
                    raise _Damaged(f"{where} (offset {header.base_offset}) fails its CRC")
                expected = header.last_offset + 1
                if header.last_offset >= offset:
                    if taken and taken + length > max_bytes:
                        return b"".join(out)
                    out.append(bytes(chunk[at : at + length]))
                    taken += length
                at += length
            if at == 0:
                if len(chunk) < HEADER_SIZE:
                    raise _Damaged(
                        f"the object ends {len(chunk)} bytes after byte {position}, inside a "
                        "batch header"
                    )
                # one batch larger than the window: widen the window to it
                head = self._get(key, size, position, min(size, position + HEADER_SIZE))
                window = max(window, parse_header(head, 0).size)
                continue
            position += at
            if taken >= max_bytes:
                break
        return b"".join(out)

    def _get(self, key: str, size: int, start: int, end: int) -> bytes:
        try:
            return self.cache.read(self.store, key, size, start, end)
        except ObjectStoreError as exc:
            raise RemoteStorageError(f"reading {key} from the object store failed: {exc}") from exc


class _Damaged(Exception):
    """What was read is not what was uploaded."""


def _check(
    header: BatchHeader, expected: int, segment: RemoteSegment, epochs: set[int], where: str
) -> None:
    """The header fields the batch CRC does not cover."""
    if header.magic != 2:
        raise _Damaged(f"{where} has magic {header.magic}")
    if header.base_offset != expected:
        raise _Damaged(f"{where} starts at offset {header.base_offset}, not {expected}")
    if header.last_offset > segment.end_offset:
        raise _Damaged(f"{where} ends at {header.last_offset}, past the segment")
    if epochs and header.leader_epoch not in epochs:
        raise _Damaged(f"{where} has leader epoch {header.leader_epoch}, not one of the segment's")
