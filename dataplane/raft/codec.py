"""Raft messages <-> bytes. Our own compact binary format; never pickle.

A frame on the wire (big-endian)::

    0   4   length L of what follows
    4   1   message type
    5   4   src node id (u32)
    9   4   dst node id (u32)
    13  8   term
    21  ..  body, by type:

    1 VoteRequest       last_index u64, last_term u64, flags u8 (1 pre_vote, 2 transfer)
    2 VoteResponse      flags u8 (1 granted, 2 pre_vote)
    3 AppendRequest     prev_index u64, prev_term u64, commit u64, count u32, then per entry:
                        term u64, index u64, kind u8, payload length u32, payload
    4 AppendResponse    flags u8 (1 success), match_index u64, reject_index u64,
                        hint_index u64, hint_term u64
    5 SnapshotRequest   index u64, term u64, data length u32, data
    6 TimeoutNow        (nothing)

``decode`` takes the bytes after the length and refuses anything malformed with
``CodecError`` (a connection that sends one is closed).
"""

from __future__ import annotations

import struct

from dataplane.raft.types import (
    AppendRequest,
    AppendResponse,
    Entry,
    EntryKind,
    Message,
    Snapshot,
    SnapshotRequest,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)

MAX_FRAME = 256 << 20
"""Largest frame accepted (a snapshot travels in one frame)."""

_LEN = struct.Struct(">I")
_HEAD = struct.Struct(">BIIQ")
_VOTE_REQ = struct.Struct(">QQB")
_VOTE_RESP = struct.Struct(">B")
_APPEND_REQ = struct.Struct(">QQQI")
_ENTRY = struct.Struct(">QQBI")
_APPEND_RESP = struct.Struct(">BQQQQ")
_SNAP = struct.Struct(">QQI")

_VOTE_REQUEST, _VOTE_RESPONSE, _APPEND_REQUEST, _APPEND_RESPONSE, _SNAPSHOT, _TIMEOUT_NOW = range(
    1, 7
)


class CodecError(ValueError):
    """Malformed Raft frame."""


def encode(m: Message) -> bytes:
    """The whole frame, length prefix included."""
    parts: list[bytes]
    if isinstance(m, AppendRequest):
        parts = [
            _HEAD.pack(_APPEND_REQUEST, m.src, m.dst, m.term),
            _APPEND_REQ.pack(m.prev_index, m.prev_term, m.commit, len(m.entries)),
        ]
        for e in m.entries:
            parts.append(_ENTRY.pack(e.term, e.index, e.kind, len(e.payload)))
            parts.append(e.payload)
    elif isinstance(m, AppendResponse):
        parts = [
            _HEAD.pack(_APPEND_RESPONSE, m.src, m.dst, m.term),
            _APPEND_RESP.pack(
                1 if m.success else 0, m.match_index, m.reject_index, m.hint_index, m.hint_term
            ),
        ]
    elif isinstance(m, VoteRequest):
        flags = (1 if m.pre_vote else 0) | (2 if m.transfer else 0)
        parts = [
            _HEAD.pack(_VOTE_REQUEST, m.src, m.dst, m.term),
            _VOTE_REQ.pack(m.last_index, m.last_term, flags),
        ]
    elif isinstance(m, VoteResponse):
        flags = (1 if m.granted else 0) | (2 if m.pre_vote else 0)
        parts = [_HEAD.pack(_VOTE_RESPONSE, m.src, m.dst, m.term), _VOTE_RESP.pack(flags)]
    elif isinstance(m, SnapshotRequest):
        s = m.snapshot
        parts = [
            _HEAD.pack(_SNAPSHOT, m.src, m.dst, m.term),
            _SNAP.pack(s.index, s.term, len(s.data)),
            s.data,
        ]
    else:
        parts = [_HEAD.pack(_TIMEOUT_NOW, m.src, m.dst, m.term)]
    body = b"".join(parts)
    return _LEN.pack(len(body)) + body


def decode(data: bytes) -> Message:
    """A message from a frame body (the bytes after the length prefix)."""
    try:
        message, end = _decode(memoryview(data))
    except struct.error as exc:
        raise CodecError(f"truncated frame: {exc}") from None
    if end != len(data):
        raise CodecError(f"{len(data) - end} trailing bytes in frame")
    return message


def _decode(buf: memoryview) -> tuple[Message, int]:  # noqa: PLR0912 - one branch per Raft message type
    kind, src, dst, term = _HEAD.unpack_from(buf, 0)
    pos = _HEAD.size
    if kind == _APPEND_REQUEST:
        prev_index, prev_term, commit, count = _APPEND_REQ.unpack_from(buf, pos)
        pos += _APPEND_REQ.size
        if count > len(buf):
            raise CodecError("entry count exceeds frame")
        entries = []
        for _ in range(count):
            e_term, e_index, e_kind, size = _ENTRY.unpack_from(buf, pos)
            pos += _ENTRY.size
            if pos + size > len(buf):
                raise CodecError("entry payload exceeds frame")
            try:
                entry_kind = EntryKind(e_kind)
            except ValueError:
                raise CodecError(f"unknown entry kind {e_kind}") from None
            entries.append(Entry(e_term, e_index, bytes(buf[pos : pos + size]), entry_kind))
            pos += size
        for offset, e in enumerate(entries):
            if e.index != prev_index + 1 + offset:
                raise CodecError("entries are not contiguous after prev_index")
        return AppendRequest(src, dst, term, prev_index, prev_term, tuple(entries), commit), pos
    if kind == _APPEND_RESPONSE:
        flags, match, reject, hint, hint_term = _APPEND_RESP.unpack_from(buf, pos)
        return (
            AppendResponse(src, dst, term, bool(flags & 1), match, reject, hint, hint_term),
            pos + _APPEND_RESP.size,
        )
    if kind == _VOTE_REQUEST:
        last_index, last_term, flags = _VOTE_REQ.unpack_from(buf, pos)
        return (
            VoteRequest(src, dst, term, last_index, last_term, bool(flags & 1), bool(flags & 2)),
            pos + _VOTE_REQ.size,
        )
    if kind == _VOTE_RESPONSE:
        (flags,) = _VOTE_RESP.unpack_from(buf, pos)
        return VoteResponse(src, dst, term, bool(flags & 1), bool(flags & 2)), pos + 1
    if kind == _SNAPSHOT:
        index, s_term, size = _SNAP.unpack_from(buf, pos)
        pos += _SNAP.size
        if pos + size > len(buf):
            raise CodecError("snapshot data exceeds frame")
        data = bytes(buf[pos : pos + size])
        return SnapshotRequest(src, dst, term, Snapshot(index, s_term, data)), pos + size
    if kind == _TIMEOUT_NOW:
        return TimeoutNow(src, dst, term), pos
    raise CodecError(f"unknown message type {kind}")
