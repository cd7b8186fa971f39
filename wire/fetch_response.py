"""A hand-written encoder for Fetch responses: every consumer's and follower's answer.

kio's generic writer costs about a fifth of a fetch's Python work (three levels of
dataclasses, a schema walk per field); this packs the same bytes with struct. The records
of a partition are not copied: they stay a chunk of their own (bytes, a view, or a file
region the connection sends with sendfile), so the answer is a list of chunks. Answers
that carry tagged fields (KIP-951 leader hints on errors, node endpoints) go through
kio. Layout, by version (4-18)::

    throttle_time_ms int32
    error_code int16 | session_id int32                               (v7+)
    [responses]                       count: int32 (v4-11), uvarint N+1 (v12+)
      topic: string int16 length (v4-11), compact string (v12), topic id 16 bytes (v13+)
      [partitions]
        partition_index int32 | error_code int16 | high_watermark int64 |
        last_stable_offset int64 | log_start_offset int64 (v5+)
        [aborted_transactions]        nullable: int32 count / -1 (v4-11),
                                      uvarint N+1 / 0 (v12+)
          producer_id int64 | first_offset int64 | tagged fields 0x00 (v12+)
        preferred_read_replica int32 = -1                             (v11+)
        records                       nullable: int32 length / -1 (v4-11),
                                      uvarint length+1 / 0 (v12+), then the bytes
        tagged fields 0x00                                            (v12+)
      tagged fields 0x00                                              (v12+)
    tagged fields 0x00                                                (v12+)

``tests/dataplane/test_fetch_response.py`` checks this byte for byte against kio for
every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any

FIRST_VERSION = 4
LAST_VERSION = 18

Aborted = Sequence[tuple[int, int]]
"""(producer id, first offset) of each aborted transaction."""
PartitionAnswer = tuple[int, int, int, int, int, Aborted | None, Any]
"""(partition index, error code, high watermark, last stable offset, log start offset,
aborted transactions or None, records: anything with a length, or None)"""
TopicAnswer = tuple[str | None, uuid.UUID | None, Sequence[PartitionAnswer]]

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_HEAD_V4 = struct.Struct(">i")
_HEAD_V7 = struct.Struct(">ihi")
_PART_V4 = struct.Struct(">ihqq")
_PART_V5 = struct.Struct(">ihqqq")
_ABORTED = struct.Struct(">qq")
_NO_REPLICA = b"\xff\xff\xff\xff"
_ZERO_UUID = uuid.UUID(int=0)


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_fetch(version: int, topics: Sequence[TopicAnswer]) -> list[Any]:  # noqa: PLR0912 - the layout above, one branch per versioned field
    """The body of a FetchResponse without tagged fields, as chunks: packed bytes, and
    each partition's records as they were given."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"Fetch v{version} is not encoded here")
    flexible = version >= 12
    chunks: list[Any] = []
    out = bytearray(_HEAD_V7.pack(0, 0, 0) if version >= 7 else _HEAD_V4.pack(0))
    out += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for name, topic_id, parts in topics:
        if version >= 13:
            out += (topic_id or _ZERO_UUID).bytes
        else:
            raw = (name or "").encode()
            out += _uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))
            out += raw
        out += _uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for index, code, hw, lso, start, aborted, records in parts:
            if version >= 5:
                out += _PART_V5.pack(index, code, hw, lso, start)
            else:
                out += _PART_V4.pack(index, code, hw, lso)
            if aborted is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                out += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first in aborted:
                    out += _ABORTED.pack(producer_id, first)
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _NO_REPLICA
            if records is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                size = len(records)
                out += _uvarint(size + 1) if flexible else _I32.pack(size)
                if size:
                    chunks.append(bytes(out))
                    chunks.append(records)
                    out = bytearray()
            if flexible:
                out.append(0)  # partition tagged fields
        if flexible:
            out.append(0)  # topic tagged fields
    if flexible:
        out.append(0)  # response tagged fields (no node endpoints)
    chunks.append(bytes(out))
    return chunks
