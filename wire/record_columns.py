"""Records blocks walked into columns: the Spark source's hot loop, compiled by numba.

The same records block as ``wire.record_batch.walk_records`` reads (layout in that module's
docstring), walked by a function numba compiles to machine code on first use (cached on
disk beside this file), which writes every field straight into numpy arrays instead of
calling back per record: offsets, timestamps, and keys, values and headers as Arrow's
variable-size binary layout (one data buffer, int32 end offsets, a null flag per row), so
``spark.records`` hands them to Arrow without copying again. ``walk_records`` stays the
walker of the broker and of every client that wants records as objects; the two agree on
every batch (``tests/spark/test_record_columns.py`` compares them on generated batches).

Rules, as ``walk_records`` checks them: a length that runs past the block, a key, value or
header that runs past its record, a header with a null key, a header count below 0 or
above the record's length, fields that do not fill their record, a varint over 10 bytes
or 64 bits, bytes left after ``recordCount`` records: each is
:class:`~wire.errors.CorruptRecord`; a negative key, value or header value length is null,
as Kafka's ``DefaultRecord`` reads it. Records outside ``[start, end)`` are skipped by their
length, unread, as ``walk_records`` does.

May import numpy and numba (the ``spark`` extra) besides the rest of ``wire``; the broker
never imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from wire.errors import CorruptRecord

_F = TypeVar("_F", bound=Callable[..., Any])


def _kernel(**options: Any) -> Callable[[_F], _F]:
    """How the walker's functions are compiled. Without numba's reference-counting runtime
    (``_nrt=False``): with it, every array passed to ``_varint`` and every array a field's copy
    names is increfed and decrefed (an atomic add each, 6-10 a record, that numba's pruning
    pass leaves in a loop with early exits): ~190 ns of a record's ~260 ns at 8-byte values,
    ~250 of ~480 ns at 1 KiB (measured on this machine's 2 cores). The kernel allocates
    nothing and keeps no array, so it needs no runtime; one that did would not compile."""
    compile_with: Any = njit  # its stubs do not name _nrt
    return compile_with(cache=True, nogil=True, _nrt=False, **options)  # type: ignore[no-any-return]


# the kernel's running totals, one int64 each in ``state``
ROWS, KEY_BYTES, VALUE_BYTES, HEADERS, HKEY_BYTES, HVALUE_BYTES = range(6)
KEY_NULLS, VALUE_NULLS, HEADER_NULLS, HVALUE_NULLS = range(6, 10)
_STATE_SLOTS = 10
MIN_RECORD_BYTES = 7

# what the kernel answers: 0, or what was wrong and where (the position in the block)
_ERRORS = {
    1: "record length runs past its batch",
    2: "truncated record",
    3: "varint too long",
    4: "invalid header count",
    5: "record header with a null key",
    6: "record length does not match its fields",
    7: "bytes left over after the batch's records",
}


@_kernel()
def _varint(buf: Any, pos: int, limit: int) -> tuple[int, int]:
    """(value, next position) of the zig-zag varint at ``pos``; next position -1 when the
    varint runs past ``limit``, -2 when it is longer than 10 bytes or 64 bits."""
    raw = np.uint64(0)
    shift = 0
    while True:
        if pos >= limit:
            return 0, -1
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 1:
            return 0, -2
        raw |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            return 0, -2
    value = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
    return int(value), pos


@intrinsic
def _copy(typingctx: Any, dst: Any, at: Any, src: Any, pos: Any, n: Any) -> Any:  # noqa: PLR0917
    """``dst[at:at + n] = src[pos:pos + n]`` as one LLVM memcpy (an indexed loop or a slice
    assignment compiles to a byte loop here: ~1.7 ns a byte, 7x the memcpy)."""
    sig = types.void(dst, at, src, pos, n)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> None:
        target = context.make_array(signature.args[0])(context, builder, args[0])
        source = context.make_array(signature.args[2])(context, builder, args[2])
        cgutils.raw_memcpy(  # type: ignore[no-untyped-call]
            builder,
            builder.gep(target.data, [args[1]]),
            builder.gep(source.data, [args[3]]),
            args[4],
            1,
        )

    return sig, codegen


@_kernel(inline="always")  # inlined into _walk: no call per field
def _field(
    body: Any, pos: int, record_end: int, data: Any, filled: int
) -> tuple[int, int, int, int]:
    """A record's key or value (length, then bytes) copied to ``data`` at ``filled``:
    (0, next position, bytes filled, 1 if null) or (error code, position, ...). Any
    negative length is null, as Kafka's DefaultRecord reads it."""
    n, pos = _varint(body, pos, record_end)
    if pos < 0:
        return (2 if pos == -1 else 3), record_end, filled, 0
    if n < 0:
        return 0, pos, filled, 1
    if pos + n > record_end:
        return 2, pos, filled, 0
    _copy(data, filled, body, pos, n)  # type: ignore[call-arg]
    return 0, pos + n, filled + n, 0


@_kernel()
def _walk(  # noqa: C901, PLR0911, PLR0912, PLR0915, PLR0917 - one flat compiled loop
    body: Any,
    pos: int,
    size: int,
    count: int,
    base_offset: int,
    base_ts: int,
    fixed_ts: int,
    ts_type: int,
    start: int,
    end: int,
    with_headers: bool,
    state: Any,
    longs: Any,
    ends: Any,
    nulls: Any,
    key_data: Any,
    value_data: Any,
    hends: Any,
    hvalue_nulls: Any,
    hkey_data: Any,
    hvalue_data: Any,
) -> tuple[int, int]:
    """Walk ``count`` records of ``body[pos:size]`` into the arrays; (0, emitted) or
    (error code, position). The running totals live in locals (the arrays written in the
    loop could alias ``state`` for all the compiler knows) and go back to ``state`` once."""
    rows, kb, vb = state[ROWS], state[KEY_BYTES], state[VALUE_BYTES]
    heads, hkb, hvb = state[HEADERS], state[HKEY_BYTES], state[HVALUE_BYTES]
    key_nulls, value_nulls = state[KEY_NULLS], state[VALUE_NULLS]
    header_nulls, hvalue_null_count = state[HEADER_NULLS], state[HVALUE_NULLS]
    emitted = 0
    for _ in range(count):
        length, pos = _varint(body, pos, size)
        if pos < 0:
            return (2 if pos == -1 else 3), size
        record_end = pos + length
        if length <= 0 or record_end > size:
            return 1, pos
        pos += 1  # record attributes, unused
        ts_delta, pos = _varint(body, pos, record_end)
        if pos < 0:
            return (2 if pos == -1 else 3), record_end
        offset_delta, pos = _varint(body, pos, record_end)
        if pos < 0:
            return (2 if pos == -1 else 3), record_end
        offset = base_offset + offset_delta
        if offset < start or offset >= end:
            pos = record_end
            continue
        longs[0, rows] = offset
        longs[1, rows] = fixed_ts if fixed_ts >= 0 else base_ts + ts_delta
        longs[2, rows] = ts_type
        code, pos, kb, null = _field(body, pos, record_end, key_data, kb)
        if code:
            return code, pos
        nulls[0, rows] = null
        key_nulls += null
        ends[0, rows + 1] = kb
        code, pos, vb, null = _field(body, pos, record_end, value_data, vb)
        if code:
            return code, pos
        nulls[1, rows] = null
        value_nulls += null
        ends[1, rows + 1] = vb
        headers, pos = _varint(body, pos, record_end)
        if pos < 0:
            return (2 if pos == -1 else 3), record_end
        if headers < 0 or headers > length:
            return 4, pos
        for _h in range(headers):
            n, pos = _varint(body, pos, record_end)
            if pos < 0:
                return (2 if pos == -1 else 3), record_end
            if n < 0:
                return 5, pos
            if pos + n > record_end:
                return 2, pos
            if with_headers:
                _copy(hkey_data, hkb, body, pos, n)  # type: ignore[call-arg]
                hkb += n
                hends[0, heads + 1] = hkb
            pos += n
            n, pos = _varint(body, pos, record_end)
            if pos < 0:
                return (2 if pos == -1 else 3), record_end
            if n >= 0 and pos + n > record_end:
                return 2, pos
            if with_headers:
                if n < 0:
                    hvalue_nulls[heads] = 1
                    hvalue_null_count += 1
                else:
                    hvalue_nulls[heads] = 0
                    _copy(hvalue_data, hvb, body, pos, n)
                    hvb += n
                hends[1, heads + 1] = hvb
                heads += 1
            if n > 0:
                pos += n
        if pos != record_end:
            return 6, pos
        if with_headers:
            nulls[2, rows] = 1 if headers == 0 else 0
            if headers == 0:
                header_nulls += 1
            ends[2, rows + 1] = heads
        rows += 1
        emitted += 1
    if pos != size:
        return 7, pos
    state[ROWS], state[KEY_BYTES], state[VALUE_BYTES] = rows, kb, vb
    state[HEADERS], state[HKEY_BYTES], state[HVALUE_BYTES] = heads, hkb, hvb
    state[KEY_NULLS], state[VALUE_NULLS] = key_nulls, value_nulls
    state[HEADER_NULLS], state[HVALUE_NULLS] = header_nulls, hvalue_null_count
    return 0, emitted


Row = tuple[bytes | None, bytes | None, int, int, int, list[tuple[str, bytes | None]] | None]
"""An appended row: key, value, offset, timestamp (ms), timestamp type, headers."""


@dataclass
class ColumnArrays:
    """The columns of ``rows`` records, sliced to their length (numpy views, handed over:
    the builder that made them starts over with new arrays)."""

    rows: int
    offsets: Any  # int64[rows]
    timestamps_ms: Any  # int64[rows]
    timestamp_types: Any  # int64[rows]: 0 CreateTime, 1 LogAppendTime
    key_ends: Any  # int32[rows + 1], Arrow's offsets buffer
    key_nulls: Any  # uint8[rows], 1 for a null key
    key_null_count: int
    key_data: Any  # uint8
    value_ends: Any
    value_nulls: Any
    value_null_count: int
    value_data: Any
    # headers (with_headers only): a list per row (null when the record has none)
    header_ends: Any  # int32[rows + 1]
    header_nulls: Any  # uint8[rows]
    header_null_count: int
    header_key_ends: Any  # int32[headers + 1]
    header_key_data: Any
    header_value_ends: Any
    header_value_nulls: Any  # uint8[headers]
    header_value_null_count: int
    header_value_data: Any


class ColumnBuilder:
    """Rows gathered from records blocks (``add``) or one by one (``append``), as numpy
    arrays that ``take`` hands over."""

    def __init__(self, with_headers: bool, rows: int = 4096, data: int = 1 << 20) -> None:
        self.with_headers = with_headers
        rows, data = max(16, rows), max(1024, data)
        headers = rows if with_headers else 16
        self._caps = {"rows": rows, "keys": data, "values": data, "headers": headers}
        self._caps |= {"header_keys": 16 + with_headers * data, "header_values": 16}
        self._pending: list[Row] = []
        self._pending_bytes = 0
        self._reset()

    def _reset(self) -> None:
        """New arrays (the last ones were handed over), as large as the last ones grew:
        batches of one read are alike, so growing (a copy) happens in the first only."""
        caps = self._caps
        self.state = np.zeros(_STATE_SLOTS, np.int64)
        self.longs = np.empty((3, caps["rows"]), np.int64)
        self.ends = np.empty((3, caps["rows"] + 1), np.int32)
        self.ends[:, 0] = 0
        self.nulls = np.empty((3, caps["rows"]), np.uint8)
        self.key_data = np.empty(caps["keys"], np.uint8)
        self.value_data = np.empty(caps["values"], np.uint8)
        self.hends = np.empty((2, caps["headers"] + 1), np.int32)
        self.hends[:, 0] = 0
        self.hvalue_nulls = np.empty(caps["headers"], np.uint8)
        self.hkey_data = np.empty(caps["header_keys"], np.uint8)
        self.hvalue_data = np.empty(caps["header_values"], np.uint8)

    def _remember(self) -> None:
        self._caps = {
            "rows": self.longs.shape[1],
            "keys": self.key_data.shape[0],
            "values": self.value_data.shape[0],
            "headers": self.hvalue_nulls.shape[0],
            "header_keys": self.hkey_data.shape[0],
            "header_values": self.hvalue_data.shape[0],
        }

    def __len__(self) -> int:
        return int(self.state[ROWS]) + len(self._pending)

    @property
    def data_bytes(self) -> int:
        """Bytes gathered so far (keys, values, headers): callers take before 2 GiB, the
        reach of Arrow's 32-bit offsets."""
        s = self.state
        gathered = s[KEY_BYTES] + s[VALUE_BYTES] + s[HKEY_BYTES] + s[HVALUE_BYTES]
        return int(gathered) + self._pending_bytes

    def _room(self, rows: int, data: int) -> None:
        """Grow every array that ``rows`` more rows of ``data`` more bytes could overrun."""
        s = self.state
        need = int(s[ROWS]) + rows
        if need > self.longs.shape[1]:
            cap = max(need, 2 * self.longs.shape[1])
            self.longs = _grown(self.longs, cap)
            self.ends = _grown(self.ends, cap + 1)
            self.nulls = _grown(self.nulls, cap)
        self.key_data = _grown(self.key_data, int(s[KEY_BYTES]) + data)
        self.value_data = _grown(self.value_data, int(s[VALUE_BYTES]) + data)
        if self.with_headers:
            heads = int(s[HEADERS]) + data // 2 + 1  # a header takes 2 bytes at least
            if heads > self.hvalue_nulls.shape[0]:
                self.hends = _grown(self.hends, heads + 1)
                self.hvalue_nulls = _grown(self.hvalue_nulls, heads)
            self.hkey_data = _grown(self.hkey_data, int(s[HKEY_BYTES]) + data)
            self.hvalue_data = _grown(self.hvalue_data, int(s[HVALUE_BYTES]) + data)

    def add(  # noqa: PLR0917 - a batch header's fields, positional
        self,
        body: Any,
        count: int,
        base_offset: int,
        base_ts: int,
        fixed_ts: int,
        start: int = 0,
        end: int = 2**63 - 1,
        *,
        position: int = 0,
        limit: int | None = None,
    ) -> int:
        """Walk ``count`` records of the block ``body[position:limit]`` (a uint8 array)
        and keep those with offsets in ``[start, end)``; returns how many. ``fixed_ts``
        is the LogAppendTime of every record, or -1 for CreateTime (base + delta)."""
        self._settle()
        size = len(body) if limit is None else limit
        if not 0 <= position <= size <= len(body):
            # the kernel does not check its indices against the array: these bound them
            raise ValueError(f"records block [{position}, {size}) outside {len(body)} bytes")
        # rows are bounded by the bytes, not by the batch's recordCount (someone else's
        # number): a record takes 7 bytes at least (length, attributes, two deltas, key
        # and value lengths, header count)
        self._room(min(count, (size - position) // MIN_RECORD_BYTES + 1), size - position)
        code, detail = _walk(
            body,
            position,
            size,
            count,
            base_offset,
            base_ts,
            fixed_ts,
            1 if fixed_ts >= 0 else 0,
            start,
            end,
            self.with_headers,
            self.state,
            self.longs,
            self.ends,
            self.nulls,
            self.key_data,
            self.value_data,
            self.hends,
            self.hvalue_nulls,
            self.hkey_data,
            self.hvalue_data,
        )
        if code:
            # rows of a failed walk are never handed over: the caller raises
            raise CorruptRecord(
                f"{_ERRORS[code]} (batch at offset {base_offset}, byte {detail} of its records)"
            )
        return int(detail)

    def append(  # noqa: PLR0917 - a row's fields, positional as the hot tail's call
        self,
        key: bytes | None,
        value: bytes | None,
        offset: int,
        timestamp_ms: int,
        timestamp_type: int,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        """One row from a client that decoded it (the hot tail's consumer): kept as it
        came, written into the arrays with the others in bulk (``_settle``)."""
        self._pending.append((key, value, offset, timestamp_ms, timestamp_type, headers))
        self._pending_bytes += len(value or b"")

    def _settle(self) -> None:
        """Rows appended one by one, into the arrays: keys and values joined and copied
        once, their ends a cumulative sum; headers (rare) one by one."""
        rows, self._pending, self._pending_bytes = self._pending, [], 0
        if not rows:
            return
        n = len(rows)
        heads = [h or [] for *_, h in rows] if self.with_headers else []
        hsize = sum(len(k.encode()) + len(v or b"") + 2 for hs in heads for k, v in hs)
        keys = [r[0] for r in rows]
        values = [r[1] for r in rows]
        size = sum(len(k) for k in keys if k) + sum(len(v) for v in values if v)
        self._room(n, size + hsize)
        s = self.state
        first = int(s[ROWS])
        self.longs[0, first : first + n] = [r[2] for r in rows]
        self.longs[1, first : first + n] = [r[3] for r in rows]
        self.longs[2, first : first + n] = [r[4] for r in rows]
        for field, items in ((0, keys), (1, values)):
            self._put_many(field, first, items)
        if self.with_headers:
            for row, hs in enumerate(heads, first):
                self._put_headers(row, hs)
        s[ROWS] = first + n

    def _put_many(self, field: int, first: int, items: list[bytes | None]) -> None:
        s = self.state
        slot = KEY_BYTES if field == 0 else VALUE_BYTES
        n = len(items)
        lengths = np.fromiter((-1 if x is None else len(x) for x in items), np.int64, n)
        nulls = lengths < 0
        sizes = np.where(nulls, 0, lengths)
        at = int(s[slot])
        total = int(sizes.sum())
        target = self.key_data if field == 0 else self.value_data
        joined = b"".join([x for x in items if x])
        target[at : at + total] = np.frombuffer(joined, np.uint8)
        self.ends[field, first + 1 : first + n + 1] = at + np.cumsum(sizes)
        self.nulls[field, first : first + n] = nulls
        s[KEY_NULLS + field] += int(nulls.sum())
        s[slot] = at + total

    def _put_headers(self, row: int, heads: list[tuple[str, bytes | None]]) -> None:
        s = self.state
        for hk, hv in heads:
            h = int(s[HEADERS])
            k = hk.encode()
            at = int(s[HKEY_BYTES])
            self.hkey_data[at : at + len(k)] = np.frombuffer(k, np.uint8)
            s[HKEY_BYTES] += len(k)
            self.hends[0, h + 1] = s[HKEY_BYTES]
            self.hvalue_nulls[h] = hv is None
            if hv is None:
                s[HVALUE_NULLS] += 1
            else:
                at = int(s[HVALUE_BYTES])
                self.hvalue_data[at : at + len(hv)] = np.frombuffer(hv, np.uint8)
                s[HVALUE_BYTES] += len(hv)
            self.hends[1, h + 1] = s[HVALUE_BYTES]
            s[HEADERS] = h + 1
        self.nulls[2, row] = not heads
        s[HEADER_NULLS] += not heads
        self.ends[2, row + 1] = s[HEADERS]

    def take(self) -> ColumnArrays:
        """The rows gathered so far; the builder starts over empty."""
        self._settle()
        s = self.state
        n, h = int(s[ROWS]), int(s[HEADERS])
        taken = ColumnArrays(
            rows=n,
            offsets=self.longs[0, :n],
            timestamps_ms=self.longs[1, :n],
            timestamp_types=self.longs[2, :n],
            key_ends=self.ends[0, : n + 1],
            key_nulls=self.nulls[0, :n],
            key_null_count=int(s[KEY_NULLS]),
            key_data=self.key_data[: s[KEY_BYTES]],
            value_ends=self.ends[1, : n + 1],
            value_nulls=self.nulls[1, :n],
            value_null_count=int(s[VALUE_NULLS]),
            value_data=self.value_data[: s[VALUE_BYTES]],
            header_ends=self.ends[2, : n + 1],
            header_nulls=self.nulls[2, :n],
            header_null_count=int(s[HEADER_NULLS]),
            header_key_ends=self.hends[0, : h + 1],
            header_key_data=self.hkey_data[: s[HKEY_BYTES]],
            header_value_ends=self.hends[1, : h + 1],
            header_value_nulls=self.hvalue_nulls[:h],
            header_value_null_count=int(s[HVALUE_NULLS]),
            header_value_data=self.hvalue_data[: s[HVALUE_BYTES]],
        )
        self._remember()
        self._reset()
        return taken


def _grown(array: Any, need: int) -> Any:
    """``array`` with room for ``need`` along its last axis (doubling), contents kept."""
    have = array.shape[-1]
    if need <= have:
        return array
    cap = max(need, 2 * have)
    grown = np.empty((*array.shape[:-1], cap), array.dtype)
    grown[..., :have] = array
    return grown


def load() -> None:
    """Load the compiled walker for the blocks readers pass (read-only uint8 arrays:
    ``np.frombuffer`` of a batch or of its decompressed records), compiling it if numba's
    cache has no build for this machine: ~1 s from the cache, a few seconds without."""
    ColumnBuilder(False).add(np.frombuffer(b"", np.uint8), 0, 0, 0, -1)
