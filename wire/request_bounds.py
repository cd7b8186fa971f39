"""Array counts of a request body checked against the bytes after them, before kio reads
the body.

kio 0.6.5 reserves memory for an array's declared element count before it reads the
elements: a 20-byte Metadata v9 frame declaring 3.5 billion topics makes it ask for 28 GB,
and Rust's allocator aborts the whole broker process when that fails (found by
tests/fuzz; on a machine with less memory a legacy int32 count of 2**31 does the same).
Every element of a Kafka array takes at least one byte, so a count larger than the bytes
left in the frame is malformed: this walk finds every array of the body as kio's schema
lays it out and refuses such a count with InvalidRequest. It reads only lengths and
counts (record data is skipped whole), so its cost grows with the number of fields, not
bytes; a frame it cannot walk to the end is malformed too (kio would refuse it as well).

Wire rules it follows (KIP-482 for flexible versions): non-flexible strings are int16
lengths, bytes and records int32, arrays int32 counts (-1: null); flexible ones are
unsigned varints of length + 1 (0: null), followed by tagged fields (a count, then tag,
size, bytes); a tagged field kio knows is walked within its size, others skipped.
"""

from __future__ import annotations

import struct
import types
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Any, Union, get_args, get_origin

from wire.errors import InvalidRequest

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_LENGTH = {
    "string": struct.Struct(">h"),
    "bytes": struct.Struct(">i"),
    "records": struct.Struct(">i"),
}
_COUNT = struct.Struct(">i")

FIXED, LENGTH, ARRAY, ENTITY = 0, 1, 2, 3
Step = tuple[int, Any]
"""(FIXED, size) | (LENGTH, struct of the legacy length) | (ARRAY, element step) |
(ENTITY, plan)."""
Plan = tuple[bool, tuple[Step, ...], dict[int, Step]]
"""(flexible, the steps of the untagged fields in order, tag -> step)."""


def check_counts(frame: bytes | bytearray | memoryview, offset: int, entity: type) -> None:
    """Raise InvalidRequest when an array in the body of type ``entity`` at ``offset``
    declares more elements than bytes follow it, or the body ends early."""
    _walk(frame, offset, len(frame), plan(entity))


@cache
def plan(entity: type) -> Plan:
    """How to walk an entity of type ``entity`` (compiled once per kio class)."""
    flexible = bool(getattr(entity, "__flexible__", False))
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in fields(entity):
        step = _step_of(field.type, field.metadata.get("kafka_type"), field.name)
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = step
        elif step[0] == FIXED and steps and steps[-1][0] == FIXED:
            steps[-1] = (FIXED, steps[-1][1] + step[1])  # fixed-size fields in a row: one step
        else:
            steps.append(step)
    return flexible, tuple(steps), tagged


def _step_of(kind: Any, kafka_type: str | None, name: str) -> Step:
    origin = get_origin(kind)
    if origin in (types.UnionType, Union):
        inner = [a for a in get_args(kind) if a is not type(None)]
        return _step_of(inner[0], kafka_type, name)
    if origin is tuple:
        return ARRAY, _step_of(get_args(kind)[0], kafka_type, name)
    if is_dataclass(kind):
        return ENTITY, plan(kind)  # type: ignore[arg-type]
    if kafka_type in _FIXED:
        return FIXED, _FIXED[kafka_type]
    if kafka_type in _LENGTH:
        return LENGTH, _LENGTH[kafka_type]
    raise TypeError(f"field {name}: no bounds rule for Kafka type {kafka_type!r}")


def _uvarint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 28:
            raise InvalidRequest("request ends inside an unsigned varint, or one is too long")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _walk(buf: bytes | bytearray | memoryview, pos: int, end: int, entity: Plan) -> int:
    flexible, steps, tagged = entity
    for step in steps:
        pos = _one(buf, pos, end, flexible, step)
    if flexible:
        if pos < end and buf[pos] == 0:  # no tagged fields: the usual case
            return pos + 1
        count, pos = _uvarint(buf, pos, end)
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            if size > end - pos:
                raise InvalidRequest(f"tagged field {tag} of {size} bytes runs past the request")
            known = tagged.get(tag)
            if known is not None:
                _one(buf, pos, pos + size, flexible, known)
            pos += size
    return pos


def _one(
    buf: bytes | bytearray | memoryview, pos: int, end: int, flexible: bool, step: Step
) -> int:
    kind, arg = step
    if kind == FIXED:
        pos += arg
    elif kind == LENGTH:
        length, pos = _length(buf, pos, end, flexible, arg)
        pos += max(length, 0)
    elif kind == ARRAY:
        count, pos = _length(buf, pos, end, flexible, _COUNT)
        if count > end - pos:
            raise InvalidRequest(f"an array declares {count} elements but {end - pos} bytes follow")
        element_kind, element = arg
        if element_kind == FIXED:
            pos += max(count, 0) * element
        else:
            for _ in range(count):
                pos = _one(buf, pos, end, flexible, arg)
    else:
        pos = _walk(buf, pos, end, arg)
    if pos > end:
        raise InvalidRequest("request ends before its last field")
    return pos


def _length(
    buf: bytes | bytearray | memoryview, pos: int, end: int, flexible: bool, legacy: struct.Struct
) -> tuple[int, int]:
    """A length or count (-1: null) and the position after it."""
    if flexible:
        if pos < end and buf[pos] < 0x80:  # one byte: the usual case
            return buf[pos] - 1, pos + 1
        value, pos = _uvarint(buf, pos, end)
        return value - 1, pos
    if pos + legacy.size > end:
        raise InvalidRequest("request ends inside a length or count")
    (value,) = legacy.unpack_from(buf, pos)
    return int(value), pos + legacy.size
