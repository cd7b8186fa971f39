"""The sparse index of a log segment (``B.index`` beside ``B.log``, and the ``.index``
object uploaded with a segment to the remote tier): encoding and parsing, no I/O.

Index file (big-endian)::

    0   4   magic b"SLIX"
    4   2   version (1)
    6   2   reserved (0)
    8   8   base offset B
    16  8   next offset          one past the last offset the segment covers
    24  8   log size             bytes of B.log this index describes
    32  8   max timestamp        largest batch maxTimestamp, -1 if none
    40  8   max timestamp offset base offset of the first batch holding it, -1 if none
    48  8   first batch timestamp  maxTimestamp of the first batch (segment.ms rolls), -1
    56  4   N, the entry count
    60  N*4 relative offsets     u32: base offset of an indexed batch minus B
        N*4 positions            u32: byte position of that batch in B.log
        N*8 max timestamp before i64: largest maxTimestamp of the batches before it, -1
    end 4   CRC-32C of every byte before it

An entry is added for the first batch and then for the first batch after every
``index.interval.bytes`` bytes. "Max timestamp before" is non-decreasing, so a timestamp
lookup is a bisection too: the last entry whose value is below the target is a batch at or
before the first batch holding a timestamp >= target.
"""

from __future__ import annotations

import bisect
import struct
import sys
from array import array
from dataclasses import dataclass

import crc32c

INDEX_MAGIC = b"SLIX"
INDEX_VERSION = 1
_INDEX_HEAD = struct.Struct(">4sHHqqqqqqI")
_CRC = struct.Struct(">I")
_BIG_ENDIAN = sys.byteorder == "big"


def _to_disk(values: array[int]) -> bytes:
    copy = array(values.typecode, values)
    if not _BIG_ENDIAN:
        copy.byteswap()
    return copy.tobytes()


def _from_disk(typecode: str, raw: bytes) -> array[int]:
    values = array(typecode)
    values.frombytes(raw)
    if not _BIG_ENDIAN:
        values.byteswap()
    return values


@dataclass(frozen=True, slots=True)
class IndexView:
    """A parsed index file (see the module docstring)."""

    base_offset: int
    next_offset: int
    log_size: int
    max_timestamp: int
    max_timestamp_offset: int
    first_batch_timestamp: int
    relative_offsets: array[int]
    positions: array[int]
    timestamps_before: array[int]

    def entry_for(self, offset: int) -> tuple[int, int]:
        """(byte position, base offset) of the last indexed batch at or before ``offset``."""
        i = bisect.bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        return self._entry(i)

    def entry_for_timestamp(self, timestamp: int) -> tuple[int, int]:
        """(byte position, base offset) of an indexed batch at or before the first batch
        holding a timestamp >= ``timestamp``."""
        return self._entry(bisect.bisect_left(self.timestamps_before, timestamp) - 1)

    def _entry(self, i: int) -> tuple[int, int]:
        i = max(i, 0)
        if not self.positions:
            return 0, self.base_offset
        return self.positions[i], self.base_offset + self.relative_offsets[i]


def parse_index(raw: bytes) -> IndexView | None:
    """The index in ``raw`` (an index file, or an index object of the remote tier), or None
    when it is damaged: wrong CRC, magic, version or lengths."""
    if len(raw) < _INDEX_HEAD.size + _CRC.size:
        return None
    (crc,) = _CRC.unpack_from(raw, len(raw) - _CRC.size)
    if crc32c.crc32c(memoryview(raw)[: -_CRC.size]) != crc:
        return None
    (magic, version, _, base, next_offset, size, max_ts, max_ts_offset, first_ts, count) = (
        _INDEX_HEAD.unpack_from(raw, 0)
    )
    entries_end = _INDEX_HEAD.size + count * 16
    if (
        magic != INDEX_MAGIC
        or version != INDEX_VERSION
        or next_offset < base
        or entries_end + _CRC.size != len(raw)
        or (size > 0) != (count > 0)
    ):
        return None
    a = _INDEX_HEAD.size
    rel = _from_disk("I", raw[a : a + count * 4])
    pos = _from_disk("I", raw[a + count * 4 : a + count * 8])
    tsb = _from_disk("q", raw[a + count * 8 : entries_end])
    if count and (pos[0] != 0 or pos[-1] >= size or rel[-1] > next_offset - base):
        return None
    return IndexView(base, next_offset, size, max_ts, max_ts_offset, first_ts, rel, pos, tsb)


def encode_index(  # noqa: PLR0917 - the fields of the format, in its order
    base_offset: int,
    next_offset: int,
    log_size: int,
    max_timestamp: int,
    max_timestamp_offset: int,
    first_batch_timestamp: int,
    relative_offsets: array[int],
    positions: array[int],
    timestamps_before: array[int],
) -> bytes:
    """An index file's bytes (the format above)."""
    head = _INDEX_HEAD.pack(
        INDEX_MAGIC,
        INDEX_VERSION,
        0,
        base_offset,
        next_offset,
        log_size,
        max_timestamp,
        max_timestamp_offset,
        first_batch_timestamp,
        len(relative_offsets),
    )
    body = b"".join(
        (head, _to_disk(relative_offsets), _to_disk(positions), _to_disk(timestamps_before))
    )
    return body + _CRC.pack(crc32c.crc32c(body))
