"""Record batches (magic v2) to rows of Spark's Kafka schema, as Arrow record batches.

A tiered segment object is the broker's log file: record batches back to back, exactly as
stored (layout in ``wire/record_batch.py``, whose header parser, codecs — none, gzip,
snappy incl. xerial framing, lz4 frames, zstd — and record walker this module uses).
Records are walked into column arrays by ``wire.record_columns`` (compiled by numba; no
per-record objects): the executor's hot loop.

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
import numpy as np
import pyarrow as pa

from wire.compression import CODEC_NONE, decompress
from wire.errors import BrokerError
from wire.record_batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    parse_header,
)
from wire.record_columns import ColumnArrays, ColumnBuilder
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


BATCH_BYTES = 256 << 20


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
    """Rows of one topic partition being gathered into an Arrow batch: records blocks
    walked by ``wire.record_columns`` (compiled), or rows appended one at a time."""

    def __init__(
        self, topic: str, partition: int, include_headers: bool, rows: int = 4096, data: int = 0
    ) -> None:
        """``rows`` and ``data``: the rows and bytes a batch is expected to reach (its
        arrays are made that large at once, not grown by copies; untouched, they cost
        address space, not memory)."""
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self.builder = ColumnBuilder(include_headers, rows, data or 1 << 20)
        self.append = self.builder.append
        """One row a client decoded (the hot tail): ``ColumnBuilder.append``."""

    def __len__(self) -> int:
        return len(self.builder)

    def full(self, rows: int) -> bool:
        """Whether to hand the batch over: ``rows`` rows (``sluice.read.rows.per.batch``),
        or ``BATCH_BYTES`` of keys, values and headers, well inside the 2 GiB that Arrow's
        32-bit offsets address (a records block adds at most
        ``message.max.decompressed.bytes``, 256 MiB, past it)."""
        return len(self.builder) >= rows or self.builder.data_bytes >= BATCH_BYTES

    def flush(self) -> pa.RecordBatch:
        """The gathered rows as one Arrow batch (the builder's arrays handed over, not
        copied); starts over empty."""
        c = self.builder.take()
        n = c.rows
        arrays: list[Any] = [
            _binary(pa.binary(), n, c.key_ends, c.key_data, c.key_nulls, c.key_null_count),
            _binary(pa.binary(), n, c.value_ends, c.value_data, c.value_nulls, c.value_null_count),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(c.offsets, pa.int64()),
            pa.array(c.timestamps_ms * 1000, pa.timestamp("us", tz="UTC")),
            pa.array(c.timestamp_types.astype(np.int32), pa.int32()),
        ]
        if self.include_headers:
            arrays.append(_headers(c))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _validity(nulls: Any, null_count: int) -> pa.Buffer | None:
    if not null_count:
        return None
    return pa.py_buffer(np.packbits(nulls == 0, bitorder="little"))


def _binary(  # noqa: PLR0917 - the buffers of one array
    kind: pa.DataType, n: int, ends: Any, data: Any, nulls: Any, null_count: int
) -> pa.Array:
    """A binary (or string) Arrow array over the builder's buffers, without a copy."""
    return pa.Array.from_buffers(
        kind,
        n,
        [_validity(nulls, null_count), pa.py_buffer(ends), pa.py_buffer(data)],
        null_count=null_count,
    )


def _headers(c: ColumnArrays) -> pa.Array:
    """``array<struct<key string, value binary>>``, null for a record without headers.
    Header keys are UTF-8 on the wire; one that is not is decoded with replacement, as
    ``walk_records`` does."""
    h = len(c.header_value_nulls)
    keys = _binary(pa.binary(), h, c.header_key_ends, c.header_key_data, c.header_value_nulls, 0)
    try:
        names = keys.cast(pa.string())
    except pa.ArrowInvalid:
        names = pa.array([k.decode("utf-8", "replace") for k in keys.to_pylist()], pa.string())
    values = _binary(
        pa.binary(),
        h,
        c.header_value_ends,
        c.header_value_data,
        c.header_value_nulls,
        c.header_value_null_count,
    )
    pairs = pa.StructArray.from_arrays([names, values], fields=list(HEADERS_TYPE.value_type))
    return pa.Array.from_buffers(
        HEADERS_TYPE,
        c.rows,
        [_validity(c.header_nulls, c.header_null_count), pa.py_buffer(c.header_ends)],
        null_count=c.header_null_count,
        children=[pairs],
    )


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
    if len(batch) < header.size:
        raise CorruptSegment(
            f"record batch at offset {header.base_offset}: {len(batch)} of {header.size} bytes"
        )
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
        if header.codec == CODEC_NONE:
            body = np.frombuffer(batch, np.uint8)
            position = HEADER_SIZE
        else:
            raw = decompress(header.codec, bytes(batch[HEADER_SIZE : header.size]))
            body, position = np.frombuffer(raw, np.uint8), 0
        return columns.builder.add(
            body,
            header.record_count,
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp if header.log_append_time else -1,
            start,
            end,
            position=position,
            limit=header.size if position else len(body),
        )
    except (BrokerError, ValueError) as exc:  # CorruptRecord, UnsupportedCompression
        raise CorruptSegment(f"record batch at offset {header.base_offset}: {exc}") from exc


def iter_batches(chunks: Iterator[bytes]) -> Iterator[memoryview]:
    """Whole batches from a stream of byte chunks of a log (batches may span chunks).

    A batch a chunk cuts is completed with the head of the next chunk (only that batch's
    bytes are copied, never a whole chunk). A trailing partial batch is an error: segment
    objects end on a batch boundary.
    """
    pending = bytearray()  # the start of a batch the previous chunk cut
    for chunk in chunks:
        view = memoryview(chunk)
        pos = 0
        if pending:
            pos = _complete(pending, view)
            if pos < 0:
                continue  # the chunk ended inside the cut batch as well
            yield memoryview(pending)
            pending = bytearray()
        end = len(view)
        while end - pos >= LOG_OVERHEAD:
            size = _batch_size(view[pos + 8 : pos + 12])
            if end - pos < size:
                break
            yield view[pos : pos + size]
            pos += size
        pending = bytearray(view[pos:])
    if pending:
        raise CorruptSegment(f"{len(pending)} bytes of a partial record batch at the end")


def _batch_size(length_field: Any) -> int:
    length = int.from_bytes(length_field, "big", signed=True)
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptSegment(f"bad record batch length {length}")
    return int(length + LOG_OVERHEAD)


def _complete(pending: bytearray, view: memoryview) -> int:
    """Append to ``pending`` (a cut batch's first bytes) what of ``view`` completes it: the
    position in ``view`` after it, or -1 when ``view`` ends first (all of it taken)."""
    pos = 0
    if len(pending) < LOG_OVERHEAD:
        pos = min(len(view), LOG_OVERHEAD - len(pending))
        pending += view[:pos]
        if len(pending) < LOG_OVERHEAD:
            return -1
    need = _batch_size(pending[8:12]) - len(pending)
    taken = view[pos : pos + need]
    pending += taken
    return pos + len(taken) if len(taken) == need else -1
