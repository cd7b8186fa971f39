"""One log segment: a file of record batches and its sparse indexes.

Files of a segment whose first offset is B (B zero-padded to 20 digits)::

    B.log        record batches exactly as stored by append (base offsets patched)
    B.index      sparse offset index: entries of (relativeOffset u32, position u32)
    B.timeindex  sparse time index:   entries of (maxTimestamp i64, relativeOffset u32)

The indexes of the active segment live in memory and are written (to a temporary file,
fsynced, renamed) when the segment is closed; a segment without valid index files is
rebuilt by scanning its batches. Recovery scans the last segment, checks every batch's
CRC and truncates a torn tail.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import crc32c

from dataplane.protocol.record_batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    parse_header,
)

log = logging.getLogger(__name__)

OFFSET_ENTRY = struct.Struct(">II")
TIME_ENTRY = struct.Struct(">qI")
SCAN_CHUNK = 1 << 20


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class Segment:
    """A segment file plus in-memory sparse indexes. Not thread-safe; lives on the loop."""

    def __init__(self, directory: Path, base_offset: int, index_interval: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval = index_interval
        self.path = directory / segment_name(base_offset, ".log")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.created = time.time()
        self.first_append_ms: int | None = None
        # Sparse offset index: absolute offsets and file positions of batch starts.
        self.idx_offsets: list[int] = []
        self.idx_positions: list[int] = []
        # Sparse time index: running max timestamp and the batch base offset it was seen at.
        self.ti_timestamps: list[int] = []
        self.ti_offsets: list[int] = []
        self._bytes_since_entry = 0
        self.closed_for_writes = False

    # ------------------------------------------------------------------ append

    def append(self, data: bytes | bytearray, headers: list[BatchHeader]) -> int:
        """Append already-patched batches; returns the position they were written at."""
        position = self.size
        written = os.write(self.fd, data)
        if written != len(data):  # a short write on a regular file: disk full
            os.ftruncate(self.fd, position)
            raise OSError(28, "short write to segment (disk full?)")
        for header in headers:
            self._index(header, position + header.position)
        self.size += len(data)
        if self.first_append_ms is None:
            self.first_append_ms = int(time.time() * 1000)
        return position

    def _index(self, header: BatchHeader, position: int) -> None:
        if not self.idx_offsets or self._bytes_since_entry >= self.index_interval:
            self.idx_offsets.append(header.base_offset)
            self.idx_positions.append(position)
            self._bytes_since_entry = 0
        self._bytes_since_entry += header.size
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            if not self.ti_timestamps or header.base_offset > self.ti_offsets[-1]:
                self.ti_timestamps.append(header.max_timestamp)
                self.ti_offsets.append(header.base_offset)
        self.next_offset = header.next_offset

    # ------------------------------------------------------------------ read

    def read_at(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def header_at(self, position: int) -> BatchHeader | None:
        raw = os.pread(self.fd, HEADER_SIZE, position)
        if len(raw) < HEADER_SIZE:
            return None
        return parse_header(raw, 0)

    def position_for(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch that contains ``offset`` (or the first after)."""
        i = bisect.bisect_right(self.idx_offsets, offset) - 1
        position = self.idx_positions[i] if i >= 0 else 0
        while position < self.size:
            header = self.header_at(position)
            if header is None:
                return None
            if header.last_offset >= offset:
                return position, header
            position += header.size
        return None

    def position_for_timestamp(self, timestamp: int) -> int:
        """A position at or before the first batch whose max timestamp >= ``timestamp``."""
        i = bisect.bisect_left(self.ti_timestamps, timestamp)
        if i == 0:
            return 0
        # Batches after the entry before i may hold the first larger timestamp.
        start_offset = self.ti_offsets[i - 1]
        found = self.position_for(start_offset)
        return found[0] if found else 0

    def iter_batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        position = start
        while position < self.size:
            header = self.header_at(position)
            if header is None or header.size < HEADER_SIZE:
                return
            yield position, header
            position += header.size

    # ------------------------------------------------------------------ lifecycle

    def recover(self) -> int:
        """Scan every batch, verify CRCs, truncate a torn or corrupt tail, rebuild indexes.

        Returns the number of bytes truncated.
        """
        self._reset_indexes()
        position = 0
        file_size = os.fstat(self.fd).st_size
        buf = b""
        buf_start = 0
        while position < file_size:
            need = position - buf_start + HEADER_SIZE
            if need > len(buf):
                buf = os.pread(self.fd, max(SCAN_CHUNK, HEADER_SIZE), position)
                buf_start = position
            rel = position - buf_start
            if len(buf) - rel < HEADER_SIZE:
                break
            header = parse_header(buf, rel)
            if header.magic != 2 or header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                break
            if rel + header.size > len(buf):
                buf = os.pread(self.fd, max(SCAN_CHUNK, header.size), position)
                buf_start = position
                rel = 0
                if len(buf) < header.size:
                    break
            if crc32c.crc32c(memoryview(buf)[rel + CRC_START : rel + header.size]) != header.crc:
                break
            if self.idx_offsets and header.base_offset < self.next_offset:
                break  # offsets must grow; anything else is garbage
            self.size = position
            self._index(header, position)
            position += header.size
        self.size = position
        truncated = file_size - position
        if truncated:
            log.warning("%s: truncating %d bytes of torn or corrupt tail", self.path, truncated)
            os.ftruncate(self.fd, position)
        if not self.idx_offsets:
            self.next_offset = self.base_offset
        return truncated

    def _reset_indexes(self) -> None:
        self.idx_offsets.clear()
        self.idx_positions.clear()
        self.ti_timestamps.clear()
        self.ti_offsets.clear()
        self._bytes_since_entry = 0
        self.max_timestamp = -1
        self.next_offset = self.base_offset

    def load_indexes(self) -> bool:
        """Load index files written when the segment was closed. False if absent/invalid."""
        index_path = self.directory / segment_name(self.base_offset, ".index")
        time_path = self.directory / segment_name(self.base_offset, ".timeindex")
        meta_path = self.directory / segment_name(self.base_offset, ".meta")
        try:
            raw_idx = index_path.read_bytes()
            raw_ti = time_path.read_bytes()
            meta = meta_path.read_text().split()
        except OSError:
            return False
        if len(raw_idx) % OFFSET_ENTRY.size or len(raw_ti) % TIME_ENTRY.size or len(meta) != 3:
            return False
        next_offset, max_ts, size = (int(x) for x in meta)
        if size != self.size:
            return False
        self._reset_indexes()
        for rel, pos in OFFSET_ENTRY.iter_unpack(raw_idx):
            self.idx_offsets.append(self.base_offset + rel)
            self.idx_positions.append(pos)
        for ts, rel in TIME_ENTRY.iter_unpack(raw_ti):
            self.ti_timestamps.append(ts)
            self.ti_offsets.append(self.base_offset + rel)
        self.next_offset = next_offset
        self.max_timestamp = max_ts
        return True

    def write_indexes(self) -> None:
        """Persist the indexes (atomically) so a restart need not rescan this segment."""
        files = {
            ".index": b"".join(
                OFFSET_ENTRY.pack(o - self.base_offset, p)
                for o, p in zip(self.idx_offsets, self.idx_positions, strict=True)
            ),
            ".timeindex": b"".join(
                TIME_ENTRY.pack(t, o - self.base_offset)
                for t, o in zip(self.ti_timestamps, self.ti_offsets, strict=True)
            ),
            ".meta": f"{self.next_offset} {self.max_timestamp} {self.size}\n".encode(),
        }
        for suffix, content in files.items():
            final = self.directory / segment_name(self.base_offset, suffix)
            tmp = final.with_suffix(suffix + ".tmp")
            with open(tmp, "wb") as fh:
                fh.write(content)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)

    def drop_index_files(self) -> None:
        for suffix in (".index", ".timeindex", ".meta"):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / segment_name(self.base_offset, suffix)).unlink()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        self.drop_index_files()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    @property
    def last_modified_ms(self) -> int:
        """Largest record timestamp, or the file's mtime when there is none."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.path).st_mtime * 1000)
