"""Record batches (magic v2) to rows of Spark's Kafka schema, as Arrow record batches.

A tiered segment object is the broker's log file: record batches back to back, exactly as
stored (layout in ``wire/record_batch.py``, whose header parser, codecs — none, gzip,
snappy incl. xerial framing, lz4 frames, zstd — and record walker this module uses).
Records are walked straight into column lists (no per-record objects): the executor's hot
loop.

Rows (Spark's Kafka source, all nullable)::

    key binary | value binary | topic string | partition int | offset long |
    timestamp timestamp | timestampType int | [headers array<struct<key string, value binary>>]

``timestampType`` is 0 for CreateTime, 1 for LogAppendTime (then every record carries the
batch's maxTimestamp). ``headers`` is null for a record without headers, as in Spark.
Control batches (attribute bit 5: transaction markers) are never returned. With
read_committed, :class:`AbortedRanges` (from the segment's ``.txnindex`` object) tells which
transactional batches belong to aborted transactions; those are skipped too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import crc32c
import pyarrow as pa
import pyarrow.compute as pc

from wire.compression import decompress
from wire.errors import BrokerError
from wire.record_batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    parse_header,
    walk_records,
)
from wire.transactions import AbortedRanges

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]


class CorruptSegment(Exception):
    """A record batch that cannot be read back (bad CRC, length, magic or record)."""


def arrow_schema(include_headers: bool) -> pa.Schema:
    """What Spark expects back for its Kafka schema (``to_arrow_schema(..., "UTC")``)."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def spark_ddl(include_headers: bool) -> str:
    ddl = (
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int"
    )
    if include_headers:
        ddl += ", headers array<struct<key: string, value: binary>>"
    return ddl


class Columns:
    """Rows of one topic partition being gathered into an Arrow batch."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def append(  # noqa: PLR0917 - the hot loop's call, positional for speed
        self,
        key: bytes | None,
        value: bytes | None,
        offset: int,
        timestamp_ms: int,
        timestamp_type: int,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.offsets.append(offset)
        self.timestamps.append(timestamp_ms)
        self.types.append(timestamp_type)
        if self.include_headers:
            self.headers.append(headers or None)

    def flush(self) -> pa.RecordBatch:
        """The gathered rows as one Arrow batch; starts over empty."""
        n = len(self.offsets)
        millis = pa.array(self.timestamps, pa.int64())
        arrays: list[Any] = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, HEADERS_TYPE))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.clear()
        return batch


def decode_into(
    columns: Columns,
    batch: bytes | memoryview,
    start: int,
    end: int,
    *,
    check_crc: bool = True,
    aborted: AbortedRanges | None = None,
) -> int:
    """Append the records of one whole batch with offsets in ``[start, end)``; returns how
    many were appended (0 for a control batch, one outside the range, or -- ``aborted``
    given: read_committed -- a batch of an aborted transaction)."""
    header = parse_header(batch, 0)
    if header.magic != 2:
        raise CorruptSegment(f"record batch at offset {header.base_offset}: magic {header.magic}")
    if check_crc and crc32c.crc32c(batch[CRC_START : header.size]) != header.crc:
        raise CorruptSegment(f"record batch at offset {header.base_offset}: CRC mismatch")
    if header.is_control or header.record_count == 0:
        return 0
    if header.last_offset < start or header.base_offset >= end:
        return 0
    if (
        aborted is not None
        and header.is_transactional
        and aborted.covers(header.producer_id, header.base_offset)
    ):
        return 0
    try:
        body = decompress(header.codec, bytes(batch[HEADER_SIZE : header.size]))
        return walk_records(
            body,
            header,
            columns.append,
            start=start,
            end=end,
            with_headers=columns.include_headers,
        )
    except (BrokerError, ValueError) as exc:  # CorruptRecord, UnsupportedCompression
        raise CorruptSegment(f"record batch at offset {header.base_offset}: {exc}") from exc


def iter_batches(chunks: Iterator[bytes]) -> Iterator[memoryview]:
    """Whole batches from a stream of byte chunks of a log (batches may span chunks).

    A trailing partial batch is an error: segment objects end on a batch boundary.
    """
    pending = b""
    for chunk in chunks:
        buf = pending + chunk if pending else chunk
        view = memoryview(buf)
        pos = 0
        end = len(buf)
        while end - pos >= LOG_OVERHEAD:
            length = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
            if length < HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptSegment(f"bad record batch length {length}")
            size = length + LOG_OVERHEAD
            if end - pos < size:
                break
            yield view[pos : pos + size]
            pos += size
        pending = bytes(buf[pos:])
    if pending:
        raise CorruptSegment(f"{len(pending)} bytes of a partial record batch at the end")
