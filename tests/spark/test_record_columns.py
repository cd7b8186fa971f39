"""The compiled column walker (``wire.record_columns``) against the record walker of the
broker (``wire.record_batch.walk_records``): the same rows from any batch, the same verdict
on any damaged records block."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark.records import Columns, CorruptSegment, decode_into
from wire.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    decompress,
)
from wire.errors import CorruptRecord
from wire.record_batch import (
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    Record,
    encode_batch,
    parse_header,
    walk_records,
)
from wire.record_columns import ColumnBuilder

BASE = 1_000
TS = 1_700_000_000_000

fields = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)
records = st.lists(st.tuples(fields, fields, headers, st.integers(-5_000, 5_000)), max_size=40)


def expected(batch: bytes, start: int, end: int, with_headers: bool) -> list[dict[str, Any]]:
    """The rows ``walk_records`` gives, as Spark's Kafka schema has them."""
    header = parse_header(batch)
    rows: list[dict[str, Any]] = []

    def emit(key: Any, value: Any, offset: int, ts: int, kind: int, hdrs: Any) -> None:  # noqa: PLR0917
        row = {"key": key, "value": value, "offset": offset, "ts": ts, "type": kind}
        if with_headers:
            row["headers"] = [{"key": k, "value": v} for k, v in hdrs] if hdrs else None
        rows.append(row)

    body = decompress(header.codec, batch[HEADER_SIZE : header.size])
    walk_records(body, header, emit, start=start, end=end, with_headers=with_headers)
    return rows


def columns_rows(columns: Columns) -> list[dict[str, Any]]:
    batch = columns.flush()
    table = batch.to_pydict()
    table["timestamp"] = batch.column("timestamp").cast(pa.int64()).to_pylist()
    rows = []
    for i in range(len(table["offset"])):
        row = {
            "key": table["key"][i],
            "value": table["value"][i],
            "offset": table["offset"][i],
            "ts": table["timestamp"][i] // 1000,  # microseconds in Arrow
            "type": table["timestampType"][i],
        }
        if "headers" in table:
            row["headers"] = table["headers"][i]
        rows.append(row)
    return rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=records,
    codec=st.sampled_from([CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]),
    log_append=st.booleans(),
    with_headers=st.booleans(),
    window=st.tuples(st.integers(0, 45), st.integers(0, 45)),
)
def test_the_column_walker_gives_the_rows_of_the_record_walker(
    recs: list[Any], codec: int, log_append: bool, with_headers: bool, window: tuple[int, int]
) -> None:
    batch = encode_batch(
        [
            Record(offset=BASE + i, timestamp=TS + dt, key=k, value=v, headers=tuple(h))
            for i, (k, v, h, dt) in enumerate(recs)
        ],
        base_offset=BASE,
        codec=codec,
        attributes=TIMESTAMP_TYPE_BIT if log_append else 0,
        max_timestamp=TS + 99 if log_append else None,
    )
    start, end = BASE + min(window), BASE + max(window)
    columns = Columns("t", 3, with_headers)
    decode_into(columns, batch, start, end)
    got = columns_rows(columns)
    assert got == expected(batch, start, end, with_headers)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=records.filter(bool),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.integers(0, 40),
)
def test_a_damaged_block_gets_the_same_verdict_from_both_walkers(
    recs: list[Any], flips: list[tuple[int, int]], cut: int
) -> None:
    """Bytes of an uncompressed records block changed (and its end cut): either both
    walkers refuse it, or both give the same rows; the compiled one never reads or writes
    outside its arrays (it does not check its indices)."""
    batch = encode_batch(
        [
            Record(offset=BASE + i, timestamp=TS + dt, key=k, value=v, headers=tuple(h))
            for i, (k, v, h, dt) in enumerate(recs)
        ],
        base_offset=BASE,
    )
    header = parse_header(batch)
    body = bytearray(batch[HEADER_SIZE:])
    for where, value in flips:
        body[where % len(body)] = value
    body = body[: max(0, len(body) - cut)]
    oracle: list[tuple[Any, ...]] = []
    try:
        walk_records(bytes(body), header, lambda *row: oracle.append(row))
        oracle_error = None
    except CorruptRecord as exc:
        oracle_error = exc
    builder = ColumnBuilder(True, rows=16, data=1024)
    try:
        body_array = np.frombuffer(bytes(body), np.uint8)
        builder.add(body_array, header.record_count, BASE, header.base_timestamp, -1)
    except CorruptRecord:
        assert oracle_error is not None, "the column walker refused what walk_records read"
        return
    assert oracle_error is None, f"walk_records refused ({oracle_error}), the columns did not"
    taken = builder.take()
    assert taken.rows == len(oracle)
    assert taken.offsets.tolist() == [row[2] for row in oracle]
    assert taken.timestamps_ms.tolist() == [row[3] for row in oracle]
    values = []
    for i in range(taken.rows):
        lo, hi = taken.value_ends[i], taken.value_ends[i + 1]
        values.append(None if taken.value_nulls[i] else bytes(taken.value_data[lo:hi]))
    assert values == [row[1] for row in oracle]


def test_a_block_bound_outside_its_array_is_refused() -> None:
    builder = ColumnBuilder(False)
    body = np.zeros(10, np.uint8)
    with pytest.raises(ValueError, match="outside 10 bytes"):
        builder.add(body, 1, 0, 0, -1, limit=11)


def test_a_record_count_beyond_the_bytes_allocates_for_the_bytes() -> None:
    """recordCount is the writer's number: 2**31 - 1 records in 9 bytes (one record, then
    a length past the end) is refused, the arrays sized by the bytes (the fuzzer's input
    had them ask for 40 GiB)."""
    body = np.frombuffer(bytes([14, 0, 0, 0, 1, 2, 97, 0, 14]), np.uint8)
    builder = ColumnBuilder(False, rows=16)
    with pytest.raises(CorruptRecord, match="runs past its batch"):
        builder.add(body, 2**31 - 1, 0, 0, -1)
    assert builder.longs.shape[1] <= 16


def test_a_batch_shorter_than_its_length_is_corrupt() -> None:
    batch = encode_batch([(b"k", b"v" * 100)], base_offset=0)
    with pytest.raises(CorruptSegment, match="of 1"):
        decode_into(Columns("t", 0, False), batch[:-10], 0, 10)


def test_rows_appended_one_by_one_and_walked_from_blocks_mix_in_one_batch() -> None:
    columns = Columns("t", 0, True)
    columns.append(b"a", None, 5, TS, 0, [("h", b"1"), ("n", None)])
    decode_into(columns, encode_batch([(None, b"v")], base_offset=6, timestamp_ms=TS), 0, 99)
    columns.append(None, b"", 7, TS + 1, 1, None)
    table = columns.flush().to_pydict()
    assert table["offset"] == [5, 6, 7]
    assert table["key"] == [b"a", None, None]
    assert table["value"] == [None, b"v", b""]
    assert table["timestampType"] == [0, 0, 1]
    assert table["headers"] == [
        [{"key": "h", "value": b"1"}, {"key": "n", "value": None}],
        None,
        None,
    ]


def test_an_executor_process_leaves_its_libraries_to_reference_counting() -> None:
    """Spark's Python daemon collects garbage after every task of a reused worker: once a
    process has read a split, the objects numba and llvmlite brought are frozen, and a
    collection walks only what the process made since (a few thousand objects, not the
    ~170,000 it would walk otherwise)."""
    probe = (
        "import gc\n"
        "from spark.reading import settle_heap\n"
        "before = len(gc.get_objects())\n"
        "settle_heap(); settle_heap()\n"
        "print(before, gc.get_freeze_count(), len(gc.get_objects()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    before, frozen, tracked = (int(x) for x in out.stdout.split())
    assert before > 50_000, out.stdout  # numba's objects, tracked until then
    assert frozen >= before
    assert tracked < 5_000, out.stdout
