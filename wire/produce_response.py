"""A hand-written encoder for successful Produce responses, the hottest answer.

kio's generic writer costs tens of microseconds per response; one-record produce
requests are bound by per-request work, so the all-success answer is packed with struct.
Responses with errors go through kio. Layout, by version::

    v3-v8 (classic):  [topics: int32 count]
                        name: int16 length + bytes
                        [partitions: int32 count]
                          index int32 | error_code int16 | base_offset int64 |
                          log_append_time int64 | log_start_offset int64 (v5+) |
                          record_errors int32 count = 0 (v8+) | error_message int16 -1 (v8+)
                      throttle_time_ms int32
    v9-v13 (flexible): counts and lengths are unsigned varints of N+1, strings compact;
                      v13 names topics by 16-byte UUID; every struct ends with an empty
                      tagged-field section (0x00): current_leader (v10+) and node_endpoints
                      (v10+) are tagged and left out when they carry no change.

``tests/dataplane/test_produce_response.py`` checks this byte for byte against kio for
every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

PartitionResult = tuple[int, int, int, int]
"""(partition index, base offset, log append time or -1, log start offset)"""
TopicResult = tuple[str | None, uuid.UUID | None, Sequence[PartitionResult]]

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PART_V3 = struct.Struct(">ihqq")
_PART_V5 = struct.Struct(">ihqqq")
_PART_V8 = struct.Struct(">ihqqqih")
_PART_FLEX = struct.Struct(">ihqqq")
_FLEX_PART_TAIL = b"\x01\x00\x00"  # record_errors [] | error_message null | tagged fields
_THROTTLE_ZERO = b"\x00\x00\x00\x00"


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_success(version: int, topics: Sequence[TopicResult]) -> bytes:
    """The body of a ProduceResponse in which every partition succeeded."""
    out = bytearray()
    if version < 9:
        out += _I32.pack(len(topics))
        for name, _, parts in topics:
            raw = (name or "").encode()
            out += _I16.pack(len(raw))
            out += raw
            out += _I32.pack(len(parts))
            for index, base, append_time, start in parts:
                if version >= 8:
                    out += _PART_V8.pack(index, 0, base, append_time, start, 0, -1)
                elif version >= 5:
                    out += _PART_V5.pack(index, 0, base, append_time, start)
                else:
                    out += _PART_V3.pack(index, 0, base, append_time)
        out += _THROTTLE_ZERO
        return bytes(out)
    out += _uvarint(len(topics) + 1)
    for name, topic_id, parts in topics:
        if version >= 13:
            out += (topic_id or uuid.UUID(int=0)).bytes
        else:
            raw = (name or "").encode()
            out += _uvarint(len(raw) + 1)
            out += raw
        out += _uvarint(len(parts) + 1)
        for index, base, append_time, start in parts:
            out += _PART_FLEX.pack(index, 0, base, append_time, start)
            out += _FLEX_PART_TAIL
        out.append(0)  # topic tagged fields
    out += _THROTTLE_ZERO
    out.append(0)  # response tagged fields
    return bytes(out)
