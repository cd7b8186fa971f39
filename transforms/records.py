"""What goes into a transform and what comes out, as typed values over Kafka's own bytes.

Input and output records travel in the Kafka v2 records-section format (the bytes of a
record batch after its 61-byte header, uncompressed), so the broker hands the guest what it
read from the log and frames the guest's output without decoding or encoding records::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | [keyLength varint | key | valueLength varint | value]...

Varints are zig-zag; a length of -1 is null. Output sections always have attributes 0,
timestamp delta 0 and offset deltas 0..n-1: the broker chooses the output batch's
timestamp (Redpanda writes outputs with LogAppendTime = now) and offsets.

``decode`` / ``encode`` here are for tests, tools and small batches; the engine never
decodes records on its hot path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from wire.compression import CODEC_NONE, decompress
from wire.record_batch import CODEC_MASK, HEADER_SIZE, TIMESTAMP_TYPE_BIT, parse_header

Header = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The batch fields Redpanda's ``read_batch_header`` hands the guest (same order)."""

    base_offset: int
    record_count: int
    partition_leader_epoch: int = -1
    attributes: int = 0
    """Without a codec: the guest always sees uncompressed records."""
    last_offset_delta: int = -1
    base_timestamp: int = 0
    max_timestamp: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One record of the input partition, absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class InputBatch:
    """One batch as the guest sees it: the header fields and the uncompressed records."""

    header: BatchHeader
    records: bytes
    """The Kafka v2 records section (uncompressed), ``header.record_count`` records."""

    @classmethod
    def from_kafka(cls, batch: bytes | bytearray | memoryview) -> InputBatch:
        """From one stored record batch (61-byte header + records, any codec)."""
        h = parse_header(batch)
        body = bytes(batch[HEADER_SIZE : h.size])
        if h.codec != CODEC_NONE:
            body = decompress(h.codec, body)
        header = BatchHeader(
            base_offset=h.base_offset,
            record_count=h.record_count,
            partition_leader_epoch=h.leader_epoch,
            attributes=h.attributes & ~CODEC_MASK,
            last_offset_delta=h.last_offset_delta,
            base_timestamp=h.base_timestamp,
            max_timestamp=h.max_timestamp,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
        )
        return cls(header, body)

    @classmethod
    def of(
        cls,
        records: Sequence[InputRecord],
        *,
        leader_epoch: int = 0,
        log_append_time: int | None = None,
    ) -> InputBatch:
        """A batch of ``records`` (consecutive or not; offsets must increase)."""
        if not records:
            raise ValueError("a batch has at least one record")
        base_offset = records[0].offset
        base_ts = records[0].timestamp
        out = bytearray()
        for r in records:
            if r.offset < base_offset:
                raise ValueError("record offsets must not go below the first one")
            _append_record(out, r.timestamp - base_ts, r.offset - base_offset, r)
        max_ts = max(r.timestamp for r in records)
        attributes = 0
        if log_append_time is not None:
            attributes |= TIMESTAMP_TYPE_BIT
            max_ts = log_append_time
        header = BatchHeader(
            base_offset=base_offset,
            record_count=len(records),
            partition_leader_epoch=leader_epoch,
            attributes=attributes,
            last_offset_delta=records[-1].offset - base_offset,
            base_timestamp=base_ts,
            max_timestamp=max_ts,
        )
        return cls(header, bytes(out))

    def decode(self) -> list[InputRecord]:
        h = self.header
        out = []
        for _attrs, ts_delta, offset_delta, key, value, headers in _walk(self.records):
            ts = h.max_timestamp if h.log_append_time else h.base_timestamp + ts_delta
            out.append(InputRecord(h.base_offset + offset_delta, ts, key, value, headers))
        return out


@dataclass(frozen=True, slots=True)
class OutputRecord:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class OutputBatch:
    """The records one call wrote to one output topic, ready to frame as a Kafka batch."""

    topic_index: int
    topic: str
    record_count: int
    records: bytes
    """Kafka v2 records section: attributes 0, timestamp delta 0, offset deltas
    0..record_count-1. Prefix a 61-byte header (``wire.record_batch``) to store it."""

    def decode(self) -> list[OutputRecord]:
        return [
            OutputRecord(self.topic, key, value, headers)
            for _a, _t, _o, key, value, headers in _walk(self.records)
        ]


class LogStream(StrEnum):
    STDOUT = "stdout"
    STDERR = "stderr"


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line the guest wrote (WASI stdout/stderr, or the batch ABI's ``log``)."""

    stream: LogStream
    text: str


RECYCLE_FRACTION = 0.75
"""See ``TransformResult.memory_nearly_full``."""


@dataclass(frozen=True, slots=True)
class TransformResult:
    """The outcome of one call: what to produce, what to log, and what to commit."""

    last_offset: int
    """The input batch's last offset: commit ``last_offset + 1`` once outputs are acked."""
    outputs: tuple[OutputBatch, ...]
    """One per output topic that got records, by topic index."""
    logs: tuple[LogLine, ...]
    fuel_used: int
    """Compute used (wasmtime fuel), for metering."""
    memory_bytes: int = 0
    """The guest's linear memory after the call (it only grows)."""
    memory_limit: int = 0
    """The most it may grow to (``transforms.memory.max.bytes`` or the module's maximum)."""

    @property
    def memory_nearly_full(self) -> bool:
        """Over RECYCLE_FRACTION of the limit: a caller should start a fresh instance before
        the next batch. Go's runtime on wasip1 never schedules its background GC worker while
        Redpanda's SDK loops in read/write host calls, so a Go guest that allocates per
        record grows until it runs out of memory (the Go JSON filter after ~420,000 records
        of 100 B in 64 MiB); a fresh instance starts with an empty heap."""
        return self.memory_limit > 0 and self.memory_bytes > self.memory_limit * RECYCLE_FRACTION

    def records(self) -> list[OutputRecord]:
        """Every output record, decoded (topic by topic, in write order within each)."""
        return [r for batch in self.outputs for r in batch.decode()]

    @property
    def record_count(self) -> int:
        return sum(b.record_count for b in self.outputs)


# ------------------------------------------------------------------------------ codec


def _put_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _put_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(1)  # zig-zag -1
    else:
        _put_varint(out, len(value))
        out += value


def encode_payload(key: bytes | None, value: bytes | None, headers: Iterable[Header]) -> bytes:
    """Key, value and headers as Redpanda's ABI passes a record's payload."""
    out = bytearray()
    _put_bytes(out, key)
    _put_bytes(out, value)
    hs = list(headers)
    _put_varint(out, len(hs))
    for hk, hv in hs:
        _put_bytes(out, hk)
        _put_bytes(out, hv)
    return bytes(out)


def _append_record(out: bytearray, ts_delta: int, offset_delta: int, r: InputRecord) -> None:
    body = bytearray(b"\x00")
    _put_varint(body, ts_delta)
    _put_varint(body, offset_delta)
    body += encode_payload(r.key, r.value, r.headers)
    _put_varint(out, len(body))
    out += body


def encode_output(records: Sequence[OutputRecord]) -> bytes:
    """An output section as the engine returns it (for tests that build expectations)."""
    out = bytearray()
    for i, r in enumerate(records):
        _append_record(out, 0, i, InputRecord(0, 0, r.key, r.value, r.headers))
    return bytes(out)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("record field runs past the records section")
    return buf[pos : pos + n], pos + n


def _walk(
    buf: bytes,
) -> Iterable[tuple[int, int, int, bytes | None, bytes | None, tuple[Header, ...]]]:
    pos = 0
    while pos < len(buf):
        length, pos = _varint(buf, pos)
        end = pos + length
        attrs = buf[pos]
        ts_delta, p = _varint(buf, pos + 1)
        offset_delta, p = _varint(buf, p)
        key, p = _bytes(buf, p)
        value, p = _bytes(buf, p)
        count, p = _varint(buf, p)
        headers = []
        for _ in range(count):
            hk, p = _bytes(buf, p)
            hv, p = _bytes(buf, p)
            headers.append((hk or b"", hv))
        if p != end:
            raise ValueError("a record's fields do not fill its length")
        pos = end
        yield attrs, ts_delta, offset_delta, key, value, tuple(headers)
