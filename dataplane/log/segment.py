"""One log segment: a file of record batches and its sparse index.

Files of a segment whose first offset is B (B zero-padded to 20 digits)::

    B.log       record batches exactly as stored by append (base offsets patched)
    B.index     sparse index, written when the segment is sealed (format below)
    B.txnindex  aborted transactions whose ABORT marker is in this segment (Kafka's
                TransactionIndex, format ``wire.transactions``); only once there is one

The index lives in memory while the segment is active. When the segment rolls it is
*sealed* off the event loop: the .log is fsynced, then the index is written to a temporary
file, fsynced and renamed into place (and the directory fsynced). So an index file exists
only for data that is durable, and it describes exactly ``log size`` bytes of it. On load
an index is used only if its CRC, magic, base offset and recorded log size all match;
otherwise the segment is scanned (CRC of every batch) and the index rebuilt.

The index file format is ``wire.segment_index`` (clients read uploaded indexes too).
The ``.txnindex`` is appended to as markers are written (``append_aborted``), fsynced when
the segment is sealed before its index is written, and unlinked with the segment; its
entries are held in memory (``aborted``). Loading and rebuilding it is
``dataplane/log/transactions.py``'s business.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import os
import struct
import threading
from array import array
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import crc32c

from dataplane import clock
from dataplane.durable import write_all, write_atomically
from dataplane.log.region import FileRegion
from wire.record_batch import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
)
from wire.segment_index import encode_index, parse_index
from wire.transactions import AbortedTxn, encode_txn_index

_IOV_MAX = 512  # buffers per writev, well below every system's IOV_MAX
log = logging.getLogger(__name__)

_BATCH_LENGTH = struct.Struct(">i")  # at byte 8 of a batch
_BASE_AND_DELTA = struct.Struct(">q")  # base offset at byte 0; lastOffsetDelta below
_LAST_DELTA = struct.Struct(">i")  # at byte 23
SCAN_CHUNK = 1 << 20
LOOKUP_CHUNK = 1 << 16
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAX_RELATIVE_OFFSET = 2**31 - 1
"""A segment rolls before an offset would lie further than this from its base."""
MAX_OFFSET = 2**63 - 1
"""Offsets are signed 64-bit (Kafka's long): no base offset, nor next offset, above it."""
TXN_INDEX_SUFFIX = ".txnindex"


_executors: dict[str, ThreadPoolExecutor] = {}
_executors_lock = threading.Lock()


def background_executor(name: str, workers: int) -> ThreadPoolExecutor:
    """A small thread pool of its own for slow log work (sealing, cleaning).

    Kept apart from the event loop's default executor, which runs the fsync rounds that
    acknowledgements wait for: a burst of multi-second seals must not queue ahead of them.
    """
    with _executors_lock:
        executor = _executors.get(name)
        if executor is None:
            executor = ThreadPoolExecutor(workers, thread_name_prefix=f"sluice-{name}")
            _executors[name] = executor
        return executor


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_base(name: str, suffix: str) -> int | None:
    """The base offset in a file name such as ``00000000000000000042.log``."""
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    if len(stem) != 20 or not stem.isdigit() or int(stem) > MAX_OFFSET:
        return None
    return int(stem)


class Segment:
    """A segment file plus its in-memory sparse index.

    Lives on the event loop, except :meth:`seal` (thread-safe, run off the loop) and reads
    of a closed segment by the log cleaner (through its own duplicated descriptor).

    Lifecycle flags: ``closed`` (rolled: no more appends), ``sealed`` (closed, fsynced and
    index written), ``deleted`` (files unlinked; the descriptor stays open for a grace
    period so in-flight readers finish), ``cleaning`` (the log cleaner is rewriting it:
    retention must not delete it until the cleaner is done).
    """

    def __init__(
        self, directory: Path, base_offset: int, index_interval: int, *, path: Path | None = None
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval = index_interval
        self.path = path if path is not None else directory / segment_name(base_offset, ".log")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.first_batch_timestamp = -1
        self.created_ms = clock.now_ms()
        self.first_append_ms: int | None = None
        self._rel: array[int] = array("I")
        self._pos: array[int] = array("I")
        self._tsb: array[int] = array("q")
        self._bytes_since_entry = 0
        self.closed = False
        self.sealed = False
        self.deleted = False
        self.cleaning = False
        self._seal_lock = threading.Lock()
        self.aborted: list[AbortedTxn] = []
        """Aborted transactions whose ABORT marker is in this segment, in marker order."""
        self.aborted_unsynced = False
        """The ``.txnindex`` has appends not yet fsynced."""
        self._aborted_stale = False
        """An append to the ``.txnindex`` failed: it is rewritten from ``aborted`` at seal."""

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, size={self.size}, next={self.next_offset})"

    @property
    def index_path(self) -> Path:
        return self.directory / segment_name(self.base_offset, ".index")

    @property
    def txn_index_path(self) -> Path:
        return self.directory / segment_name(self.base_offset, TXN_INDEX_SUFFIX)

    @property
    def index_entries(self) -> int:
        return len(self._rel)

    # ------------------------------------------------------------------ append

    def append_pieces(
        self,
        pieces: list[bytes | bytearray | memoryview],
        size: int,
        headers: list[BatchHeader],
    ) -> int:
        """Append whole batches given as consecutive buffers (``size`` bytes in all) with
        as few ``writev`` calls as the system allows; returns their start position."""
        position = self.size
        written = 0
        try:
            for start in range(0, len(pieces), _IOV_MAX):
                written += os.writev(self.fd, pieces[start : start + _IOV_MAX])
            if written != size:  # a short write on a regular file: disk full
                raise OSError(errno.ENOSPC, "short write to segment (disk full?)")
        except OSError:
            # nothing of a failed append stays: the file ends where the last whole batch does
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, position)
            raise
        for header in headers:
            self._index(header, position + header.position)
        self.size = position + size
        if self.first_append_ms is None:
            self.first_append_ms = clock.now_ms()
        return position

    def append_aborted(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction whose ABORT marker was just written here: in
        memory and appended to the ``.txnindex`` (created on first use). If the file
        cannot be written the entry is still served and the file is rewritten at seal."""
        self.aborted.append(entry)
        self.aborted_unsynced = True
        try:
            fd = os.open(self.txn_index_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                write_all(fd, entry.encode())
            finally:
                os.close(fd)
        except OSError as exc:
            self._aborted_stale = True
            log.error(
                "%s: cannot append to its transaction index (%s); it is rewritten when the "
                "segment is sealed",
                self.path,
                exc,
            )

    def sync_aborted(self) -> None:
        """Make the ``.txnindex`` durable (before the index, which vouches for it)."""
        if not self.aborted_unsynced:
            return
        if self._aborted_stale:
            self.write_aborted(self.aborted)
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.txn_index_path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.aborted_unsynced = False

    def write_aborted(self, entries: list[AbortedTxn]) -> None:
        """Replace the entries and the ``.txnindex`` (atomically; no file when empty)."""
        self.aborted = list(entries)
        if entries:
            write_atomically(self.txn_index_path, encode_txn_index(self.aborted))
        else:
            with contextlib.suppress(FileNotFoundError):
                self.txn_index_path.unlink()
        self.aborted_unsynced = self._aborted_stale = False

    def _index(self, header: BatchHeader, position: int) -> None:
        if not self._rel or self._bytes_since_entry >= self.index_interval:
            self._rel.append(header.base_offset - self.base_offset)
            self._pos.append(position)
            self._tsb.append(self.max_timestamp)
            self._bytes_since_entry = 0
        self._bytes_since_entry += header.size
        timestamp = header.max_timestamp
        if position == 0:
            self.first_batch_timestamp = timestamp
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
            self.max_timestamp_offset = header.base_offset
        self.next_offset = header.next_offset

    def _reset_index(self) -> None:
        self._rel = array("I")
        self._pos = array("I")
        self._tsb = array("q")
        self._bytes_since_entry = 0
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.first_batch_timestamp = -1
        self.next_offset = self.base_offset

    # ------------------------------------------------------------------ read

    def read_at(self, position: int, size: int) -> bytes:
        fd = self.fd
        if fd < 0:
            raise OSError(errno.EBADF, f"segment {self.path.name} is closed")
        return os.pread(fd, size, position)

    def region(self, position: int, size: int, next_offset: int) -> FileRegion:
        """Bytes ``[position, position + size)``, whole batches ending with offset
        ``next_offset`` - 1, as a region (sent with sendfile)."""
        fd = self.fd
        if fd < 0:
            raise OSError(errno.EBADF, f"segment {self.path.name} is closed")
        return FileRegion.of(fd, position, size, next_offset)

    def whole_batches_end(self, start: int, limit: int) -> tuple[int, int]:
        """(end, next offset) of the last whole batch at or before byte ``limit``, walking
        from the batch at ``start``; (``start``, -1) when none ends by then. The walk
        starts at the nearest indexed batch before ``limit`` (``index.interval.bytes``
        back, or one batch), reading headers only."""
        position = max(start, self.floor_position(limit))
        while True:
            end, next_offset = start, -1
            for at, buf, rel in self._walk(position, self.index_interval + HEADER_SIZE):
                (length,) = _BATCH_LENGTH.unpack_from(buf, rel + 8)
                step = length + LOG_OVERHEAD
                if at + step > limit:
                    break
                (base,) = _BASE_AND_DELTA.unpack_from(buf, rel)
                (delta,) = _LAST_DELTA.unpack_from(buf, rel + 23)
                end, next_offset = at + step, base + delta + 1
            if next_offset >= 0 or position <= start:
                return end, next_offset
            # the batch at the index entry crosses limit: walk from the entry before it
            position = max(start, self.floor_position(position - 1))

    def header_at(self, position: int) -> BatchHeader | None:
        raw = self.read_at(position, HEADER_SIZE)
        if len(raw) < HEADER_SIZE:
            return None
        return BatchHeader(position, *HEADER.unpack_from(raw, 0))

    def _walk(self, start: int, chunk: int) -> Iterator[tuple[int, bytes, int]]:
        """(file position, buffer, position in buffer) of each batch from ``start``.

        The buffer holds at least the batch's 61-byte header. Reads ``chunk`` bytes at a
        time; stops at the end of the segment or at bytes that are not a batch.
        """
        end = self.size
        position = start
        buf = b""
        buf_start = start
        while position + HEADER_SIZE <= end:
            rel = position - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = self.read_at(position, min(max(chunk, HEADER_SIZE), end - position))
                buf_start = position
                rel = 0
                if len(buf) < HEADER_SIZE:
                    return
            (length,) = _BATCH_LENGTH.unpack_from(buf, rel + 8)
            if length < MIN_BATCH_LENGTH:
                return
            yield position, buf, rel
            position += length + LOG_OVERHEAD

    def iter_batches(
        self, start: int = 0, *, chunk: int = SCAN_CHUNK
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from position ``start`` (a batch start)."""
        for position, buf, rel in self._walk(start, chunk):
            yield position, BatchHeader(position, *HEADER.unpack_from(buf, rel))

    def position_for(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch holding ``offset``, or of the first after it."""
        rel = offset - self.base_offset
        i = bisect.bisect_right(self._rel, rel) - 1 if rel >= 0 else -1
        start = self._pos[i] if i >= 0 else 0
        chunk = min(max(self.index_interval * 2, 4096), LOOKUP_CHUNK) + HEADER_SIZE
        for position, buf, at in self._walk(start, chunk):
            (base,) = _BASE_AND_DELTA.unpack_from(buf, at)
            (delta,) = _LAST_DELTA.unpack_from(buf, at + 23)
            if base + delta >= offset:
                return position, BatchHeader(position, *HEADER.unpack_from(buf, at))
        return None

    def position_for_timestamp(self, timestamp: int) -> int:
        """A batch position at or before the first batch with maxTimestamp >= ``timestamp``."""
        k = bisect.bisect_left(self._tsb, timestamp)
        return self._pos[k - 1] if k > 0 else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 when none)."""
        i = bisect.bisect_right(self._pos, position) - 1
        return self._pos[i] if i >= 0 else 0

    # ------------------------------------------------------------------ recovery

    def recover(self) -> int:
        """Scan every batch, verify CRCs, truncate a torn or corrupt tail, rebuild the index.

        A batch is accepted when its magic is 2, its length fits the file, its CRC matches
        and its base offset is not below the segment's base nor below the end of the batch
        before it (offsets only grow; compaction may leave gaps). Returns bytes truncated.
        """
        self._reset_index()
        file_size = os.fstat(self.fd).st_size
        position = 0
        buf = b""
        buf_start = 0
        while position + HEADER_SIZE <= file_size:
            rel = position - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, SCAN_CHUNK, position)
                buf_start = position
                rel = 0
                if len(buf) < HEADER_SIZE:
                    break
            header = BatchHeader(position, *HEADER.unpack_from(buf, rel))
            if (
                header.magic != 2
                or header.batch_length < MIN_BATCH_LENGTH
                or position + header.size > file_size
                or header.last_offset_delta < 0
                or header.record_count < 0
                or header.base_offset < self.next_offset
                or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET
                or header.last_offset >= MAX_OFFSET
            ):
                break
            if rel + header.size > len(buf):
                buf = os.pread(self.fd, max(SCAN_CHUNK, header.size), position)
                buf_start = position
                rel = 0
                if len(buf) < header.size:
                    break
            if crc32c.crc32c(memoryview(buf)[rel + CRC_START : rel + header.size]) != header.crc:
                break
            self._index(header, position)
            position += header.size
        self.size = position
        truncated = file_size - position
        if truncated:
            log.warning("%s: truncating %d bytes of torn or corrupt tail", self.path, truncated)
            os.ftruncate(self.fd, position)
        return truncated

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int:
        """Cut the file at the batch holding ``offset`` (or the first batch after it), so
        no batch holding an offset >= ``offset`` remains; returns the bytes removed.

        The in-memory index keeps its entries before the cut; the stretch after the last
        kept entry (at most ``index.interval.bytes`` and a batch) is re-read to restore
        the next offset and the timestamps. Not fsynced: the caller does that. The index
        file, if any, no longer matches and must be dropped or rewritten by the caller.
        """
        found = self.position_for(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        keep = bisect.bisect_left(self._pos, position)
        if keep == 0:
            self._reset_index()
            return removed
        # Re-index from the last kept entry: drop it, restore the state it was taken in.
        restart = keep - 1
        start = self._pos[restart]
        before = self._tsb[restart]
        del self._rel[restart:]
        del self._pos[restart:]
        del self._tsb[restart:]
        self.max_timestamp = before
        self.max_timestamp_offset = self._first_with_timestamp(before) if before >= 0 else -1
        if start == 0:
            self.first_batch_timestamp = -1
        self._bytes_since_entry = self.index_interval
        self.next_offset = self.base_offset
        for pos, header in self.iter_batches(start, chunk=LOOKUP_CHUNK):
            if pos >= position:
                break
            self._index(header, pos)
        return removed

    def _first_with_timestamp(self, timestamp: int) -> int:
        """Base offset of the first batch whose maxTimestamp is ``timestamp`` (the largest
        timestamp before the last index entry; found between two index entries)."""
        k = bisect.bisect_left(self._tsb, timestamp)
        start = self._pos[k - 1] if k > 0 else 0
        for _, header in self.iter_batches(start, chunk=LOOKUP_CHUNK):
            if header.max_timestamp == timestamp:
                return header.base_offset
        return -1

    def reopen_truncated(self, offset: int) -> int:
        """Truncate (see :meth:`truncate_to`), fsync, drop the index file and make this the
        active segment again; waits for a seal in progress. Returns the bytes removed."""
        with self._seal_lock:
            removed = self.truncate_to(offset)
            os.fsync(self.fd)
            self.drop_index_file()
            self.closed = self.sealed = False
        return removed

    def index_positions(self) -> list[int]:
        """Byte positions of the indexed batches (the first batch is always one)."""
        return list(self._pos)

    # ------------------------------------------------------------------ index file

    def index_bytes(self) -> bytes:
        return encode_index(
            self.base_offset,
            self.next_offset,
            self.size,
            self.max_timestamp,
            self.max_timestamp_offset,
            self.first_batch_timestamp,
            self._rel,
            self._pos,
            self._tsb,
        )

    def write_index(self) -> None:
        """Persist the index atomically (temporary file, fsync, rename, directory fsync)."""
        write_atomically(self.index_path, self.index_bytes())

    def load_index(self) -> bool:
        """Adopt the index file if it is intact and describes the .log as it is now."""
        try:
            raw = self.index_path.read_bytes()
        except OSError:
            return False
        index = parse_index(raw)
        if index is None:
            log.warning("%s: unreadable or bad CRC, rebuilding", self.index_path)
            return False
        if index.base_offset != self.base_offset or index.log_size != self.size:
            log.info("%s does not match %s, rebuilding", self.index_path.name, self.path.name)
            return False
        rel, pos, tsb = index.relative_offsets, index.positions, index.timestamps_before
        next_offset = index.next_offset
        max_ts, max_ts_offset, first_ts = (
            index.max_timestamp,
            index.max_timestamp_offset,
            index.first_batch_timestamp,
        )
        self._rel, self._pos, self._tsb = rel, pos, tsb
        self._bytes_since_entry = 0
        self.next_offset = next_offset
        self.max_timestamp = max_ts
        self.max_timestamp_offset = max_ts_offset
        self.first_batch_timestamp = first_ts
        return True

    def drop_index_file(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.index_path.unlink()

    # ------------------------------------------------------------------ lifecycle

    def seal(self) -> None:
        """fsync the data, then write the index. Idempotent; safe off the event loop.

        Does nothing for a deleted segment; if the segment is deleted while this runs, the
        index just written is removed again.
        """
        with self._seal_lock:
            if self.sealed or self.deleted or not self.closed:
                return  # not closed: it became active again (truncation) since the roll
            os.fsync(self.fd)
            self.sync_aborted()
            self.write_index()
            if self.deleted:
                self.drop_index_file()
                return
            self.sealed = True

    def unlink_files(self) -> None:
        """Delete the segment's files (retention). The descriptor stays open: close() later."""
        self.deleted = True
        self.cleaning = False
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if self.path.name != segment_name(self.base_offset, ".log"):
            return  # the cleaner's output (.cleaned): the index files are the original's
        self.drop_index_file()
        with contextlib.suppress(FileNotFoundError):
            self.txn_index_path.unlink()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.unlink_files()
        self.close()

    # ------------------------------------------------------------------ time

    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when no batch has one (retention)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except FileNotFoundError:
            return self.created_ms

    def time_to_roll(self, timestamp_ms: int, now_ms: int, roll_ms: int) -> bool:
        """Kafka's segment.ms rule on append: the incoming batch's timestamp is more than
        ``roll_ms`` after the first batch's (or the segment is that old, without one)."""
        if self.size == 0:
            return False
        if self.first_batch_timestamp >= 0:
            return timestamp_ms - self.first_batch_timestamp > roll_ms
        return now_ms - self.created_ms > roll_ms

    def idle_roll_due(self, now_ms: int, roll_ms: int) -> bool:
        """Background segment.ms roll: the first append (wall clock) is older than ``roll_ms``."""
        if self.size == 0:
            return False
        since = self.first_append_ms if self.first_append_ms is not None else self.created_ms
        return now_ms - since > roll_ms
