"""Reads of the remote tier: batches from an uploaded segment, through the chunk cache.

Blocking code (boto3); the remote log manager runs it in its reader threads. A read finds
the batch holding the wanted offset with the segment's uploaded index (one small object,
cached like the data), then returns whole batches from there up to ``max_bytes`` (at least
one batch, as local reads do). Every batch returned is CRC-checked: a mismatch drops the
cached chunks of the object and reads them again once; a second mismatch is reported as
RemoteStorageError, never returned.
"""

from __future__ import annotations

import crc32c

from dataplane.errors import RemoteStorageError
from dataplane.log.segment import IndexView, parse_index
from dataplane.protocol.record_batch import CRC_START, HEADER_SIZE, parse_header
from tiered.chunk_cache import ChunkCache
from tiered.errors import ObjectStoreError
from tiered.layout import segment_keys
from tiered.object_store import ObjectStore
from tiered.remote_segment import RemoteSegment

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

    def read(self, segment: RemoteSegment, offset: int, max_bytes: int) -> bytes:
        """Whole batches of ``segment`` from the one holding ``offset``, up to ``max_bytes``
        (at least one batch)."""
        key = segment_keys(self.cluster_id, segment).log
        for attempt in range(2):
            data = self._batches(segment, key, offset, max_bytes)
            if _crc_ok(data):
                return data
            self.cache.invalidate(key)
            if attempt:
                break
        raise RemoteStorageError(
            f"{key}: a batch at offset {offset} fails its CRC twice; the object is corrupted"
        )

    def position_for_timestamp(self, segment: RemoteSegment, timestamp: int) -> int:
        return self.index(segment).position_for_timestamp(timestamp)

    def batches_from(self, segment: RemoteSegment, position: int, max_bytes: int) -> bytes:
        """Whole batches from byte ``position`` (a batch boundary), CRC-checked."""
        key = segment_keys(self.cluster_id, segment).log
        data = self._whole_batches(key, segment.size_bytes, position, max_bytes, -1)
        if not _crc_ok(data):
            self.cache.invalidate(key)
            raise RemoteStorageError(f"{key}: a batch fails its CRC; the object is corrupted")
        return data

    def _batches(self, segment: RemoteSegment, key: str, offset: int, max_bytes: int) -> bytes:
        position = self.index(segment).position_for(offset)
        return self._whole_batches(key, segment.size_bytes, position, max_bytes, offset)

    def _whole_batches(
        self, key: str, size: int, position: int, max_bytes: int, offset: int
    ) -> bytes:
        """Batches from ``position``, skipping those wholly below ``offset``, up to
        ``max_bytes`` (at least one whole batch)."""
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
                if length < HEADER_SIZE:
                    raise RemoteStorageError(f"{key}: a batch length at {position + at} is corrupt")
                if at + length > len(chunk):
                    break  # the batch continues past the window
                if header.last_offset >= offset:
                    if taken and taken + length > max_bytes:
                        return b"".join(out)
                    out.append(bytes(chunk[at : at + length]))
                    taken += length
                at += length
            if at == 0:
                # one batch larger than the window: widen it to that batch
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


def _crc_ok(data: bytes) -> bool:
    at = 0
    view = memoryview(data)
    while at < len(view):
        header = parse_header(view, at)
        end = at + header.size
        if header.size < HEADER_SIZE or end > len(view):
            return False
        if crc32c.crc32c(view[at + CRC_START : end]) != header.crc:
            return False
        at = end
    return True
