"""Record batches (magic v2), the unit the log stores and serves.

Binary layout of one batch (all integers big-endian)::

    offset  size  field
    0       8     baseOffset            patched by the broker on append
    8       4     batchLength           bytes after this field
    12      4     partitionLeaderEpoch  patched by the broker on append
    16      1     magic                 always 2
    17      4     crc                   CRC-32C of bytes 21..end
    21      2     attributes            bits 0-2 codec, 3 timestamp type (1 = LogAppendTime),
                                        4 transactional, 5 control, 6 has delete horizon
    23      4     lastOffsetDelta       base + delta = last offset, also after compaction
                                        removed records (recordCount may then be smaller,
                                        even 0: an empty batch kept for producer state)
    27      8     baseTimestamp         record timestamps are base + delta; when bit 6 is
                                        set it is the delete horizon (KIP-534) instead of
                                        the first record's timestamp
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordCount
    61      ...   records, compressed as one block when the codec is not 0

One record inside the (decompressed) records block::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | [keyLength varint | key | valueLength varint | value]...

Lengths of -1 mean null. Varints are zig-zag encoded.

The broker validates the header and CRC on produce, patches baseOffset and
partitionLeaderEpoch (the CRC does not cover them) and never re-encodes records on the
hot path. Records are decoded only where the broker must look inside (compaction, the
key check of compacted topics, timestamp bounds a header cannot decide, internal topics,
tests); a topic whose compression.type names another codec gets the records block
decompressed and compressed again, the records themselves untouched.

Codecs (compress / decompress) are in ``wire.compression``.

Error codes follow Kafka 4's LogValidator: a bad CRC or truncated data is CORRUPT_MESSAGE
(retriable: the bytes were damaged in transit); a well-formed batch that breaks a rule
(count and offset range disagree, a control batch from a client, an idempotent batch
without a sequence) is INVALID_RECORD. Rules on single records (a null key in a compacted
topic, a CreateTime timestamp out of bounds) fail the batch with INVALID_RECORD or
INVALID_TIMESTAMP and name each offending record by its index (KIP-467 record errors).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import crc32c

from wire.compression import (
    CODEC_NONE,
    CODEC_ZSTD,
    compress,
    decompress,
)
from wire.errors import (
    CorruptRecord,
    InvalidRecord,
    InvalidRecords,
    InvalidTimestamps,
    UnsupportedCompression,
    UnsupportedMessageFormat,
)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted in batchLength
CRC_START = 21
MAGIC_OFFSET = 16

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40


NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordCount (bytes 21..60)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of one record batch, plus where it sits in its buffer."""

    position: int
    """Byte position of the batch in the buffer it was parsed from."""
    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def delete_horizon(self) -> int:
        """The delete horizon (ms) set by the log cleaner, or -1."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else -1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the batch header at ``position``. The caller checks there are 61 bytes."""
    return BatchHeader(position, *HEADER.unpack_from(buf, position))


def iter_headers(buf: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """Headers of the complete batches in ``buf``; stops at a partial trailing batch."""
    position = 0
    end = len(buf)
    while position + HEADER_SIZE <= end:
        header = parse_header(buf, position)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
            return
        yield header
        position += header.size


def validate_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Validate every batch of a produce request's records and return their headers.

    Raises CorruptRecord for a bad CRC, truncated data or inconsistent lengths,
    UnsupportedMessageFormat for magic < 2 and UnsupportedCompression for unknown codecs.
    """
    headers: list[BatchHeader] = []
    position = 0
    end = len(buf)
    view = memoryview(buf)
    while position < end:
        if end - position < HEADER_SIZE:
            if end - position > MAGIC_OFFSET and view[position + MAGIC_OFFSET] < 2:
                raise UnsupportedMessageFormat("message format v0/v1 is not supported; use v2")
            raise CorruptRecord(f"truncated record batch at byte {position}")
        header = parse_header(buf, position)
        if header.magic != 2:
            raise UnsupportedMessageFormat(
                f"record batch magic {header.magic} is not supported; clients must send magic v2"
            )
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
            raise CorruptRecord(
                f"record batch length {header.batch_length} does not fit the request"
            )
        actual = crc32c.crc32c(view[position + CRC_START : position + header.size])
        if actual != header.crc:
            raise CorruptRecord(
                f"record batch CRC mismatch: header says {header.crc:#010x}, "
                f"data gives {actual:#010x}"
            )
        if header.codec > CODEC_ZSTD:
            raise UnsupportedCompression(f"unknown compression codec {header.codec}")
        if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
            raise InvalidRecord(
                f"record count {header.record_count} does not match last offset delta "
                f"{header.last_offset_delta}"
            )
        if header.attributes & CONTROL_BIT:
            raise InvalidRecord("clients are not allowed to write control records")
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecord(
                f"invalid sequence number {header.base_sequence} in a record batch of "
                f"producer {header.producer_id}"
            )
        headers.append(header)
        position += header.size
    if not headers:
        raise CorruptRecord("produce request carries no record batch")
    return headers


def patch_offsets(buf: bytearray, header: BatchHeader, base_offset: int, leader_epoch: int) -> None:
    """Write the broker-assigned base offset and leader epoch into a batch in ``buf``."""
    _I64.pack_into(buf, header.position, base_offset)
    _I32.pack_into(buf, header.position + 12, leader_epoch)


def patched_header(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    base_offset: int,
    leader_epoch: int,
    log_append_time: int = -1,
) -> bytearray:
    """A copy of a batch's 61-byte header with the broker's base offset and leader epoch.

    With ``log_append_time`` >= 0 the copy is also stamped with LogAppendTime (attribute
    bit 3, maxTimestamp) and carries the CRC recomputed over the new header and the
    unchanged records.
    """
    p = header.position
    head = bytearray(buf[p : p + HEADER_SIZE])
    _I64.pack_into(head, 0, base_offset)
    _I32.pack_into(head, 12, leader_epoch)
    if log_append_time >= 0:
        struct.pack_into(">h", head, 21, header.attributes | TIMESTAMP_TYPE_BIT)
        _I64.pack_into(head, 35, log_append_time)
        crc = crc32c.crc32c(
            memoryview(buf)[p + HEADER_SIZE : p + header.size],
            crc32c.crc32c(memoryview(head)[CRC_START:]),
        )
        struct.pack_into(">I", head, 17, crc)
    return head


def set_log_append_time(buf: bytearray, header: BatchHeader, timestamp_ms: int) -> None:
    """Stamp a batch with LogAppendTime (attribute bit 3, maxTimestamp) and fix its CRC."""
    p = header.position
    struct.pack_into(">h", buf, p + 21, header.attributes | TIMESTAMP_TYPE_BIT)
    _I64.pack_into(buf, p + 35, timestamp_ms)
    crc = crc32c.crc32c(memoryview(buf)[p + CRC_START : p + header.size])
    struct.pack_into(">I", buf, p + 17, crc)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecord("varint too long")
    if raw >> 64:
        raise CorruptRecord("varint over 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _records_body(batch: bytes | bytearray | memoryview, header: BatchHeader) -> bytes:
    if len(batch) < header.size:
        raise CorruptRecord(f"record batch is truncated: {len(batch)} of {header.size} bytes")
    return decompress(header.codec, bytes(batch[HEADER_SIZE : header.size]))


Emit = Callable[
    [bytes | None, bytes | None, int, int, int, list[tuple[str, bytes | None]] | None], None
]
"""``emit(key, value, offset, timestamp, timestamp_type, headers)``: one record."""
CREATE_TIME = 0
LOG_APPEND_TIME = 1


def walk_records(  # noqa: C901, PLR0912, PLR0915 - the hot record walk, kept flat for speed
    body: bytes,
    header: BatchHeader,
    emit: Emit,
    *,
    start: int = 0,
    end: int = 2**63 - 1,
    with_headers: bool = True,
) -> int:
    """Walk the decompressed records block ``body`` of a batch with ``header`` and call
    ``emit`` for each record whose offset is in ``[start, end)``; returns how many.

    Timestamps are absolute (LogAppendTime batches give every record the batch's
    maxTimestamp); ``headers`` is None when the record has none or ``with_headers`` is
    false. Raises CorruptRecord when a field runs past its record or the block, when a
    record's fields do not fill its length, or when bytes are left over after
    ``recordCount`` records.
    """
    base_offset = header.base_offset
    if header.log_append_time:
        ts_type, fixed_ts = LOG_APPEND_TIME, header.max_timestamp
    else:
        ts_type, fixed_ts = CREATE_TIME, -1
    base_ts = header.base_timestamp
    size = len(body)
    pos = 0
    emitted = 0
    try:
        for _ in range(header.record_count):
            length, pos = read_varint(body, pos)
            record_end = pos + length
            if length <= 0 or record_end > size:
                raise CorruptRecord(f"record length {length} runs past its batch")
            pos += 1  # record attributes, unused
            ts_delta, pos = read_varint(body, pos)
            offset_delta, pos = read_varint(body, pos)
            offset = base_offset + offset_delta
            if offset < start or offset >= end:
                if pos > record_end:  # its deltas ran into the next record
                    raise CorruptRecord("record length does not match its fields")
                pos = record_end
                continue
            key_len, pos = read_varint(body, pos)
            key = None
            if key_len >= 0:
                key = body[pos : pos + key_len]
                pos += key_len
            value_len, pos = read_varint(body, pos)
            value = None
            if value_len >= 0:
                value = body[pos : pos + value_len]
                pos += value_len
            count, pos = read_varint(body, pos)
            if count < 0 or count > length:
                raise CorruptRecord(f"invalid header count {count}")
            headers: list[tuple[str, bytes | None]] | None = None
            if count and with_headers:
                headers = []
                for _ in range(count):
                    hk_len, pos = read_varint(body, pos)
                    if hk_len < 0:
                        raise CorruptRecord("record header with a null key")
                    hk = body[pos : pos + hk_len].decode("utf-8", "replace")
                    pos += hk_len
                    hv_len, pos = read_varint(body, pos)
                    hv = None
                    if hv_len >= 0:
                        hv = body[pos : pos + hv_len]
                        pos += hv_len
                    headers.append((hk, hv))
                if pos != record_end:
                    raise CorruptRecord("record length does not match its fields")
            elif count == 0 and pos != record_end:
                raise CorruptRecord("record length does not match its fields")
            pos = record_end
            emit(
                key,
                value,
                offset,
                fixed_ts if fixed_ts >= 0 else base_ts + ts_delta,
                ts_type,
                headers,
            )
            emitted += 1
    except IndexError as exc:
        raise CorruptRecord(f"truncated record in batch at offset {base_offset}") from exc
    if pos != size:
        raise CorruptRecord(f"{size - pos} bytes left over after {header.record_count} records")
    return emitted


def decode_records(batch: bytes | bytearray | memoryview) -> list[Record]:
    """Decode every record of one whole batch (header included); CorruptRecord as
    :func:`walk_records`."""
    header = parse_header(batch, 0)
    records: list[Record] = []

    def collect(
        key: bytes | None,
        value: bytes | None,
        offset: int,
        timestamp: int,
        _ts_type: int,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        records.append(Record(offset, timestamp, key, value, tuple(headers or ())))

    walk_records(_records_body(batch, header), header, collect)
    return records


def _scan(body: bytes | memoryview, count: int) -> list[tuple[int, int, int, int]]:
    """(timestampDelta, offsetDelta, keyLength, valueLength) of the ``count`` records of a
    decompressed records block, without copying keys or values. CorruptRecord as
    :func:`decode_records`."""
    out: list[tuple[int, int, int, int]] = []
    size = len(body)
    pos = 0
    try:
        for _ in range(count):
            length, pos = read_varint(body, pos)
            end = pos + length
            if length <= 0 or end > size:
                raise CorruptRecord(f"record length {length} runs past its batch")
            ts_delta, at = read_varint(body, pos + 1)  # after the attributes byte
            offset_delta, at = read_varint(body, at)
            key_len, at = read_varint(body, at)
            value_len, _ = read_varint(body, at + max(key_len, 0))
            out.append((ts_delta, offset_delta, key_len, value_len))
            pos = end
    except IndexError as exc:
        raise CorruptRecord("truncated record inside batch") from exc
    if pos != size:
        raise CorruptRecord(f"{size - pos} bytes left over after {count} records")
    return out


def _body(buf: bytes | bytearray | memoryview, header: BatchHeader) -> bytes | memoryview:
    """The decompressed records block of the batch at ``header.position``."""
    start = header.position
    raw = memoryview(buf)[start + HEADER_SIZE : start + header.size]
    return raw if header.codec == CODEC_NONE else decompress(header.codec, bytes(raw))


def first_null_key(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    """Index of the first record without a key in the batch at ``header.position``, or -1."""
    for index, (_, _, key_len, _) in enumerate(_scan(_body(buf, header), header.record_count)):
        if key_len < 0:
            return index
    return -1


# --------------------------------------------------------------------------- topic rules

LONG_MAX = 2**63 - 1


def _jlong(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as Java's long arithmetic does."""
    return ((value + 2**63) & 0xFFFFFFFFFFFFFFFF) - 2**63


def validate_records(
    buf: bytes | bytearray,
    headers: list[BatchHeader],
    *,
    topic_partition: str,
    now_ms: int,
    compacted: bool = False,
    log_append_time: bool = False,
    before_ms: int = LONG_MAX,
    after_ms: int = LONG_MAX,
    codec: int = -1,
    level: int | None = None,
) -> tuple[bytes | bytearray, list[BatchHeader]]:
    """A topic's rules applied to batches that passed :func:`validate_batches` (the part of
    Kafka's LogValidator that looks inside batches). Returns ``(buf, headers)`` unchanged
    unless a batch was recompressed, else a new buffer and its headers.

    Records are walked only where a rule needs them: keys in compacted topics
    (``compacted``); CreateTime timestamps (``message.timestamp.before/after.max.ms``)
    when the batch's maxTimestamp is too new or ``before_ms`` is finite (the oldest record
    may be anywhere in a batch); batches whose client set LogAppendTime. Every offending
    record is named (InvalidRecords, or InvalidTimestamps when any timestamp is bad, with
    Kafka's messages). With ``codec`` >= 0 (compression.type other than producer) a batch
    in another codec is decompressed and compressed in ``codec`` at ``level``: records,
    offsets, timestamps, producer id/epoch/sequence and the transactional bit are kept, a
    new CRC is computed; a batch already in ``codec`` is kept as sent, as in Kafka.
    """
    replaced: dict[int, bytes] = {}
    for index, header in enumerate(headers):
        attributes = header.attributes
        convert = codec >= 0 and attributes & CODEC_MASK != codec
        check = (
            compacted
            or attributes & TIMESTAMP_TYPE_BIT
            or (
                not log_append_time
                and (before_ms < LONG_MAX or header.max_timestamp - now_ms > after_ms)
            )
        )
        if not (check or convert):
            continue
        body = _body(buf, header)
        if check:
            # Kafka's in-place path (a compressed batch kept in its codec) prints records
            # as PartialDefaultRecord (null key or value: -1 bytes), others as DefaultRecord.
            partial = header.codec != CODEC_NONE and not convert
            errors = _record_errors(
                body,
                header,
                topic_partition=topic_partition,
                compacted=compacted,
                log_append_time=log_append_time,
                now_ms=now_ms,
                before_ms=before_ms,
                after_ms=after_ms,
                partial=partial,
            )
            if errors:
                raise _rejected(errors)
        if convert:
            fields = (
                codec | attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT),
                header.last_offset_delta,
                header.base_timestamp,
                header.max_timestamp,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.record_count,
            )
            payload = compress(codec, body, level)
            replaced[index] = _assemble(header.base_offset, header.leader_epoch, fields, payload)
    if not replaced:
        return buf, headers
    out = bytearray()
    view = memoryview(buf)
    placed: list[BatchHeader] = []
    for index, header in enumerate(headers):
        position = len(out)
        batch = replaced.get(index)
        out += view[header.position : header.position + header.size] if batch is None else batch
        placed.append(parse_header(out, position))
    return out, placed


def _record_errors(
    body: bytes | memoryview,
    header: BatchHeader,
    *,
    topic_partition: str,
    compacted: bool,
    log_append_time: bool,
    now_ms: int,
    before_ms: int,
    after_ms: int,
    partial: bool,
) -> list[tuple[bool, int, str]]:
    """(is a timestamp error, record index, message) of every record breaking a rule, as
    Kafka's LogValidator.validateRecord: the key first, then the timestamp."""
    errors: list[tuple[bool, int, str]] = []
    batch_lat = header.log_append_time
    for index, (ts_delta, offset_delta, key_len, value_len) in enumerate(
        _scan(body, header.record_count)
    ):
        if compacted and key_len < 0:
            message = (
                "Compacted topic cannot accept message without key in topic partition "
                f"{topic_partition}"
            )
            errors.append((False, index, message))
            continue
        timestamp = header.max_timestamp if batch_lat else _jlong(header.base_timestamp + ts_delta)
        offset = _jlong(header.base_offset + offset_delta)
        if not log_append_time and timestamp != -1:
            diff = _jlong(now_ms - timestamp)
            if diff > before_ms or _jlong(-diff) > after_ms:
                message = (
                    f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                    f"The timestamp should be within [{_jlong(now_ms - before_ms)}, "
                    f"{_jlong(now_ms + after_ms)}]"
                )
                errors.append((True, index, message))
        elif batch_lat:
            if partial:
                shown = f"PartialDefaultRecord(offset={offset}, timestamp={timestamp}, "
                shown += f"key={key_len} bytes, value={value_len} bytes)"
            else:
                shown = f"DefaultRecord(offset={offset}, timestamp={timestamp}, "
                shown += f"key={max(key_len, 0)} bytes, value={max(value_len, 0)} bytes)"
            message = (
                f"Invalid timestamp type in message {shown}. "
                "Producer should not set timestamp type to LogAppendTime."
            )
            errors.append((True, index, message))
    return errors


def _rejected(errors: list[tuple[bool, int, str]]) -> InvalidRecords | InvalidTimestamps:
    """Kafka's LogValidator.processRecordErrors: the error for a batch with bad records."""
    exc: InvalidRecords | InvalidTimestamps
    if any(is_timestamp for is_timestamp, _, _ in errors):
        exc = InvalidTimestamps("One or more records have been rejected due to invalid timestamp")
    else:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for _, i, m in errors[:3])
        exc = InvalidRecords(
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]"
        )
    exc.record_errors = tuple((index, message) for _, index, message in errors)
    return exc


def encode_batch(
    records: Sequence[tuple[bytes | None, bytes | None] | Record],
    *,
    base_offset: int = 0,
    timestamp_ms: int = 0,
    codec: int = CODEC_NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    leader_epoch: int = -1,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Build one batch. Used for internal topics, compaction output and tests.

    ``records`` are (key, value) pairs placed at consecutive offsets, or Record values whose
    offsets and timestamps are kept (offsets relative to ``base_offset``). The log cleaner
    passes ``last_offset_delta`` (the original batch's, so offsets of removed records stay
    covered), ``base_timestamp`` (the delete horizon, with DELETE_HORIZON_BIT in
    ``attributes``) and ``max_timestamp`` (a LogAppendTime batch's append time).
    """
    body = bytearray()
    first_ts = timestamp_ms
    max_ts = -1 if records else timestamp_ms
    last_delta = 0
    first = records[0] if records else None
    if isinstance(first, Record):
        first_ts = first.timestamp
    base_ts = first_ts if base_timestamp is None else base_timestamp
    for i, item in enumerate(records):
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if isinstance(item, Record):
            key, value, headers = item.key, item.value, item.headers
            delta, ts = item.offset - base_offset, item.timestamp
        else:
            key, value = item
            delta, ts = i, timestamp_ms
        max_ts = max(max_ts, ts)
        last_delta = delta
        rec = bytearray(b"\x00")
        _write_varint(rec, ts - base_ts)
        _write_varint(rec, delta)
        for field in (key, value):
            if field is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(field))
                rec += field
        _write_varint(rec, len(headers))
        for hk, hv in headers:
            hkb = hk.encode()
            _write_varint(rec, len(hkb))
            rec += hkb
            if hv is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(hv))
                rec += hv
        _write_varint(body, len(rec))
        body += rec
    payload = compress(codec, bytes(body)) if records else b""
    attrs = (attributes & ~CODEC_MASK) | (codec if records else CODEC_NONE)
    fields = (
        attrs,
        last_delta if last_offset_delta is None else last_offset_delta,
        base_ts,
        max_ts if max_timestamp is None else max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return _assemble(base_offset, leader_epoch, fields, payload)


def batch_of_records(  # noqa: PLR0917 - the header fields a producer sets
    records: bytes,
    count: int,
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    codec: int = CODEC_NONE,
) -> bytes:
    """A batch around an already encoded, uncompressed records section of ``count`` records
    whose offset deltas are 0..count-1 and timestamp deltas 0 (a transform's output): the
    header, then the section compressed with ``codec``."""
    payload = compress(codec, records) if count else b""
    fields = (
        codec if count else CODEC_NONE,
        max(count - 1, 0),
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    return _assemble(0, -1, fields, payload)


def encode_empty_batch(header: BatchHeader) -> bytes:
    """A batch with no records that keeps ``header``'s offsets and producer fields.

    The log cleaner writes one in place of a batch whose records are all gone when it is
    the last batch of a producer, so the producer's sequence state survives (as Kafka).
    """
    attrs = header.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    fields = (
        attrs,
        header.last_offset_delta,
        header.max_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        0,
    )
    return _assemble(header.base_offset, header.leader_epoch, fields, b"")


def _assemble(
    base_offset: int, leader_epoch: int, fields: tuple[int, ...], payload: bytes
) -> bytes:
    """Header + payload; ``fields`` are attributes .. recordCount (bytes 21..60)."""
    tail = _TAIL.pack(*fields) + payload
    crc = crc32c.crc32c(tail)
    batch_length = 4 + 1 + 4 + len(tail)
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, 2, crc) + tail
