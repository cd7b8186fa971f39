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

Parsed indexes are kept (``INDEXES`` of them, least recently used dropped first): segments
are immutable, and every fetch looks one up. The CRCs of a chunk's batches are checked in
the thread that fetched it, before any reader sees it (``ChunkCache.on_fetched``): from the
chunk's start for its first chunk, else from the first indexed batch in it, every batch
wholly inside it; a read from memory does not check those again (the broker's event loop
then only checks the header fields the CRC leaves out, and the CRCs of the batches that
cross a chunk boundary). Reads from disk check every CRC. ``read_resident`` is ``read`` for data the
chunk cache holds in memory: it never blocks (no file, no request), so the broker runs it
on its event loop and hands only the rest to its reader threads. It gives up (None) on
anything it cannot do without waiting, a damaged batch included: the blocking read then
reads it again and reports it.

``aborted`` reads a segment's ``.txnindex`` object (the aborted transactions overlapping
it, see ``tiered.layout``) the same way: through the chunk cache, so it is fetched once
while the cache keeps it, refetched once if it does not parse.
"""

from __future__ import annotations

import bisect
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable

import crc32c

from tiered.chunk_cache import ChunkCache
from tiered.errors import ObjectStoreError
from tiered.layout import segment_keys
from tiered.object_store import ObjectStore
from tiered.remote_segment import RemoteSegment
from wire.errors import CorruptRecord, RemoteStorageError
from wire.record_batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    decode_records,
    iter_headers,
    parse_header,
)
from wire.segment_index import IndexView, parse_index
from wire.transactions import TXN_INDEX_ENTRY_SIZE, AbortedTxn, parse_txn_index

MIN_WINDOW = 64 * 1024
INDEXES = 1024
"""Parsed segment indexes kept in memory."""
CHECKED_CHUNKS = 256
"""Fetched chunks whose checked batches are remembered (their positions only)."""
_LENGTH = struct.Struct(">i")  # batchLength, at byte 8 of a batch
_CRC = struct.Struct(">I")  # at byte 17

_Getter = Callable[[str, int, int, int], "bytes | memoryview"]
"""(object key, object size, start, end) -> bytes [start, end) of the object."""


class RemoteReader:
    def __init__(self, store: ObjectStore, cache: ChunkCache, cluster_id: str) -> None:
        self.store = store
        self.cache = cache
        self.cluster_id = cluster_id
        self._indexes: OrderedDict[str, IndexView] = OrderedDict()
        self._segments: OrderedDict[str, RemoteSegment] = OrderedDict()
        """Log object key -> its segment, for the chunks of it fetched ahead."""
        self._checked: OrderedDict[tuple[str, int], frozenset[int]] = OrderedDict()
        """(log key, chunk index) -> object positions of its batches whose CRC matched."""
        self._lock = threading.Lock()
        cache.on_fetched = self._check_fetched

    def _note(self, key: str, segment: RemoteSegment) -> None:
        with self._lock:
            self._segments[key] = segment
            self._segments.move_to_end(key)
            while len(self._segments) > INDEXES:
                self._segments.popitem(last=False)

    def _check_fetched(self, key: str, index: int, data: bytes) -> None:
        """The CRCs of the batches wholly inside a fetched chunk (``on_fetched``)."""
        with self._lock:
            segment = self._segments.get(key)
            self._checked.pop((key, index), None)
        if segment is None:
            return
        start = index * self.cache.chunk_bytes
        at = 0
        if index:
            view = self._known_index(segment_keys(self.cluster_id, segment).index)
            if view is None:
                return
            i = bisect.bisect_left(view.positions, start)
            if i == len(view.positions):
                return
            at = view.positions[i] - start
        good: list[int] = []
        whole = memoryview(data)
        while at + HEADER_SIZE <= len(data):
            (length,) = _LENGTH.unpack_from(data, at + 8)
            size = length + LOG_OVERHEAD
            if size < HEADER_SIZE or at + size > len(data):
                break
            (crc,) = _CRC.unpack_from(data, at + 17)
            if crc32c.crc32c(whole[at + CRC_START : at + size]) != crc:
                break  # damaged: a read meets it, reports it and reads it again
            good.append(start + at)
            at += size
        with self._lock:
            self._checked[(key, index)] = frozenset(good)
            while len(self._checked) > CHECKED_CHUNKS:
                self._checked.popitem(last=False)

    def _crc_checked(self, key: str) -> Callable[[int], bool]:
        """Whether the batch at an object position of ``key`` had its CRC checked when its
        chunk was fetched (for reads from memory only: those are the bytes checked)."""
        chunk_bytes = self.cache.chunk_bytes
        checked = self._checked

        def known(position: int) -> bool:
            return position in checked.get((key, position // chunk_bytes), ())

        return known

    def _invalidate(self, key: str) -> None:
        """Drop the cached chunks of an object found damaged, and what was checked of it."""
        self.cache.invalidate(key)
        with self._lock:
            for chunk in [c for c in self._checked if c[0] == key]:
                del self._checked[chunk]

    def index(self, segment: RemoteSegment) -> IndexView:
        key = segment_keys(self.cluster_id, segment).index
        known = self._known_index(key)
        if known is not None:
            return known
        for attempt in range(2):
            raw = self._get(key, segment.index_bytes, 0, segment.index_bytes)
            view = self._parsed(key, segment, raw)
            if view is not None:
                return view
            self._invalidate(key)
            if attempt:
                break
        raise RemoteStorageError(f"the index object {key} is damaged (CRC or format)")

    def _parsed(
        self, key: str, segment: RemoteSegment, raw: bytes | memoryview
    ) -> IndexView | None:
        """The index object ``raw`` of ``segment`` parsed and kept; None if damaged."""
        view = parse_index(bytes(raw))
        if view is None or view.base_offset != segment.base_offset:
            return None
        with self._lock:
            self._indexes[key] = view
            while len(self._indexes) > INDEXES:
                self._indexes.popitem(last=False)
        return view

    def _known_index(self, key: str) -> IndexView | None:
        with self._lock:
            view = self._indexes.get(key)
            if view is not None:
                self._indexes.move_to_end(key)
            return view

    def read_resident(
        self,
        segment: RemoteSegment,
        offset: int,
        max_bytes: int,
        following: RemoteSegment | None = None,
    ) -> bytes | memoryview | None:
        """``read`` from what is in memory, or None (then ``read`` must be called)."""
        keys = segment_keys(self.cluster_id, segment)
        index = self._known_index(keys.index)
        if index is None:  # its object read ahead into memory, but not parsed yet?
            size = segment.index_bytes
            raw = self.cache.read_resident(self.store, keys.index, size, 0, size)
            index = None if raw is None else self._parsed(keys.index, segment, raw)
            if index is None:
                return None
        self._note(keys.log, segment)
        position, base = index.entry_for(offset)
        try:
            data, end = self._whole_batches(
                segment,
                keys.log,
                position,
                base,
                max_bytes,
                offset,
                self._resident,
                self._crc_checked(keys.log),
            )
        except (_Damaged, _NotResident):
            return None
        if following is not None:
            self._prefetch_following(segment, end, following)
        return data

    def _resident(self, key: str, size: int, start: int, end: int) -> bytes | memoryview:
        data = self.cache.read_resident(self.store, key, size, start, end)
        if data is None:
            raise _NotResident
        return data

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
            self._invalidate(key)
            if attempt:
                break
        raise RemoteStorageError(f"the transaction index object {key} is damaged")

    def read(
        self,
        segment: RemoteSegment,
        offset: int,
        max_bytes: int,
        following: RemoteSegment | None = None,
    ) -> bytes | memoryview:
        """Whole batches of ``segment`` from the one holding ``offset``, up to ``max_bytes``
        (at least one batch). When the read ends within the cache's read-ahead window of the
        segment's end, the first chunks of ``following`` (the partition's next remote
        segment) and its index are fetched in the background: a consumer crossing from one
        segment to the next does not wait for them."""
        key = segment_keys(self.cluster_id, segment).log
        self._note(key, segment)
        for attempt in range(2):
            position, base = self.index(segment).entry_for(offset)
            try:
                data, end = self._whole_batches(segment, key, position, base, max_bytes, offset)
                if following is not None:
                    self._prefetch_following(segment, end, following)
                return data
            except _Damaged as exc:
                self._invalidate(key)
                if attempt:
                    raise RemoteStorageError(
                        f"{key}: {exc} (read twice); the object is corrupted"
                    ) from None
        raise AssertionError("unreachable")

    def _prefetch_following(
        self, segment: RemoteSegment, end: int, following: RemoteSegment
    ) -> None:
        """Read ahead into ``following`` (its index, and as many chunks as the cache reads
        ahead) when ``segment`` has fewer than the read-ahead window's bytes left after
        byte ``end``."""
        window = self.cache.readahead * self.cache.chunk_bytes
        if not window or segment.size_bytes - end >= window:
            return
        keys = segment_keys(self.cluster_id, following)
        self._note(keys.log, following)
        if self._known_index(keys.index) is None:
            self.cache.prefetch(self.store, keys.index, following.index_bytes, 0, 1)
        self.cache.prefetch(self.store, keys.log, following.size_bytes, 0, self.cache.readahead)

    def offset_for_timestamp(
        self, segment: RemoteSegment, timestamp: int, start: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record of ``segment`` at or after offset
        ``start`` with a timestamp >= ``timestamp``; None when it holds none. Reads from
        the time index's entry on, 1 MiB at a time, every batch of each read."""
        position, base = self.index(segment).entry_for_timestamp(timestamp)
        while position < segment.size_bytes:
            data = self.batches_from(segment, position, base, 1 << 20)
            if not data:
                return None
            view = memoryview(data)
            for header in iter_headers(data):
                base = header.last_offset + 1
                if header.max_timestamp < timestamp or header.last_offset < start:
                    continue
                for record in decode_records(view[header.position : header.position + header.size]):
                    if record.timestamp >= timestamp and record.offset >= start:
                        return record.offset, record.timestamp
            position += len(data)
        return None

    def batches_for_timestamp(
        self, segment: RemoteSegment, timestamp: int, max_bytes: int
    ) -> bytes | memoryview:
        """Whole batches from an indexed batch at or before the first one holding a timestamp
        >= ``timestamp``, checked as ``read``'s."""
        key = segment_keys(self.cluster_id, segment).log
        position, base = self.index(segment).entry_for_timestamp(timestamp)
        try:
            return self._whole_batches(segment, key, position, base, max_bytes, -1)[0]
        except _Damaged as exc:
            self._invalidate(key)
            raise RemoteStorageError(f"{key}: {exc}; the object is corrupted") from None

    def batches_from(
        self, segment: RemoteSegment, position: int, base: int, max_bytes: int
    ) -> bytes | memoryview:
        """Whole batches from byte ``position``, where the batch with base offset ``base``
        starts."""
        key = segment_keys(self.cluster_id, segment).log
        try:
            return self._whole_batches(segment, key, position, base, max_bytes, -1)[0]
        except _Damaged as exc:
            self._invalidate(key)
            raise RemoteStorageError(f"{key}: {exc}; the object is corrupted") from None

    def _whole_batches(  # noqa: PLR0917 - a read's coordinates
        self,
        segment: RemoteSegment,
        key: str,
        position: int,
        expected: int,
        max_bytes: int,
        offset: int,
        get: _Getter | None = None,
        crc_checked: Callable[[int], bool] | None = None,
    ) -> tuple[bytes | memoryview, int]:
        """Checked batches from ``position`` (where base offset ``expected`` starts),
        skipping those wholly below ``offset``, up to ``max_bytes`` (at least one); and the
        byte position in the object where they end. The batches taken from one window are
        one slice of it (no copy when they are all of it). ``get`` reads the object
        (default: through the chunk cache, waiting for what it lacks); ``crc_checked``
        tells the batches whose CRC was checked when their chunk was fetched."""
        get = get or self._get
        size = segment.size_bytes
        epochs = {epoch for epoch, _ in segment.epochs}
        window = max(MIN_WINDOW, max_bytes)
        out: list[bytes | memoryview] = []
        taken = 0
        while position < size:
            end = min(size, position + window)
            chunk = get(key, size, position, end)
            at = 0
            first = -1  # where this window's batches that are taken begin
            full = False  # max_bytes reached: the next batch is left out
            while at + HEADER_SIZE <= len(chunk):
                header = parse_header(chunk, at)
                length = header.size
                where = f"the batch at byte {position + at}"
                if length < HEADER_SIZE or position + at + length > size:
                    raise _Damaged(f"{where} has an impossible length {length}")
                if at + length > len(chunk):
                    break  # the batch continues past the window
                _check(header, expected, segment, epochs, where)
                if (crc_checked is None or not crc_checked(position + at)) and crc32c.crc32c(
                    memoryview(chunk)[at + CRC_START : at + length]
                ) != header.crc:
                    raise _Damaged(f"{where} (offset {header.base_offset}) fails its CRC")
                if header.last_offset >= offset:
                    if taken and taken + length > max_bytes:
                        full = True
                        break
                    if first < 0:
                        first = at
                    taken += length
                expected = header.last_offset + 1
                at += length
            if first >= 0:
                out.append(chunk if (first, at) == (0, len(chunk)) else chunk[first:at])
            if at == 0 and not full:
                if len(chunk) < HEADER_SIZE:
                    raise _Damaged(
                        f"the object ends {len(chunk)} bytes after byte {position}, inside a "
                        "batch header"
                    )
                # one batch larger than the window: widen the window to it
                head = get(key, size, position, min(size, position + HEADER_SIZE))
                window = max(window, parse_header(head, 0).size)
                continue
            position += at
            if full or taken >= max_bytes:
                break
        return (out[0] if len(out) == 1 else b"".join(out)), position

    def _get(self, key: str, size: int, start: int, end: int) -> bytes | memoryview:
        try:
            return self.cache.read(self.store, key, size, start, end)
        except ObjectStoreError as exc:
            raise RemoteStorageError(f"reading {key} from the object store failed: {exc}") from exc


class _Damaged(Exception):
    """What was read is not what was uploaded."""


class _NotResident(Exception):
    """A read from memory needs bytes the chunk cache does not hold there."""


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
