"""The executor's decoder: record batches of every codec to Arrow rows of Spark's Kafka
schema, control batches skipped, offset ranges cut, batches split across chunks."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark.records import Columns, CorruptSegment, arrow_schema, decode_into, iter_batches
from wire.compression import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY
from wire.record_batch import (
    CODEC_NONE,
    CODEC_ZSTD,
    CONTROL_BIT,
    TIMESTAMP_TYPE_BIT,
    Record,
    encode_batch,
)


def rows(batches: list[bytes], start: int = 0, end: int = 1 << 62, headers: bool = True) -> dict:
    columns = Columns("t", 3, headers)
    for batch in batches:
        decode_into(columns, batch, start, end)
    return columns.flush().to_pydict()


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_every_codec_decodes(codec: int) -> None:
    records = [
        Record(10 + i, 1_700_000_000_000 + i, b"k%d" % i, b"v" * i, (("h", b"x"),) if i else ())
        for i in range(50)
    ]
    got = rows([encode_batch(records, base_offset=10, codec=codec)])
    assert got["offset"] == list(range(10, 60))
    assert got["key"] == [b"k%d" % i for i in range(50)]
    assert got["value"] == [b"v" * i for i in range(50)]
    assert got["topic"] == ["t"] * 50
    assert got["partition"] == [3] * 50
    assert got["timestampType"] == [0] * 50
    assert [ts.timestamp() * 1000 for ts in got["timestamp"]] == [
        1_700_000_000_000 + i for i in range(50)
    ]
    assert got["headers"][0] is None  # no headers: null, as Spark
    assert got["headers"][1] == [{"key": "h", "value": b"x"}]


def test_schema_matches_spark() -> None:
    """What Spark checks a returned Arrow batch against (Spark's Kafka source schema)."""
    kafka = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
        ]
    )
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    with_headers = StructType([*kafka.fields, StructField("headers", ArrayType(header))])
    assert arrow_schema(False).equals(to_arrow_schema(kafka, timezone="UTC"))
    assert arrow_schema(True).equals(to_arrow_schema(with_headers, timezone="UTC"))


def test_control_batches_and_offsets_outside_the_range_are_skipped() -> None:
    data = encode_batch([(b"a", b"1"), (b"b", b"2"), (None, None)], base_offset=0)
    marker = encode_batch([(b"\x00\x00\x00\x00", b"")], base_offset=3, attributes=CONTROL_BIT)
    more = encode_batch([(b"c", b"3"), (b"d", b"4")], base_offset=4, codec=CODEC_ZSTD)
    got = rows([data, marker, more], start=1, end=5)
    assert got["offset"] == [1, 2, 4]
    assert got["key"] == [b"b", None, b"c"]
    assert got["value"] == [b"2", None, b"3"]


def test_log_append_time_gives_every_record_the_batch_time() -> None:
    batch = encode_batch(
        [(b"a", b"1"), (b"b", b"2")],
        timestamp_ms=5,
        attributes=TIMESTAMP_TYPE_BIT,
        max_timestamp=1_000_000,
    )
    got = rows([batch], headers=False)
    assert got["timestampType"] == [1, 1]
    assert [int(ts.timestamp() * 1000) for ts in got["timestamp"]] == [1_000_000, 1_000_000]
    assert "headers" not in got


def test_batches_split_across_chunks_are_joined() -> None:
    log = b"".join(
        encode_batch([(b"k", b"v" * 100)] * 3, base_offset=i * 3, codec=CODEC_GZIP)
        for i in range(20)
    )
    for size in (1, 7, 61, 100, len(log)):
        chunks = [log[i : i + size] for i in range(0, len(log), size)]
        columns = Columns("t", 0, False)
        for batch in iter_batches(iter(chunks)):
            decode_into(columns, batch, 0, 1000)
        assert columns.flush().column("offset").to_pylist() == list(range(60))


_LOG = [encode_batch([(b"k", b"v" * (7 * i))] * (1 + i % 3), base_offset=10 * i) for i in range(12)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=sum(map(len, _LOG))), max_size=40))
def test_any_cuts_give_back_the_same_batches(cuts: list[int]) -> None:
    log = b"".join(_LOG)
    points = sorted([0, len(log), *cuts])  # equal cuts make empty chunks
    chunks = [log[a:b] for a, b in itertools.pairwise(points)] + [b""]
    assert [bytes(b) for b in iter_batches(iter(chunks))] == _LOG


def test_damage_is_reported_not_returned() -> None:
    batch = bytearray(encode_batch([(b"k", b"value")]))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptSegment, match="CRC"):
        rows([bytes(batch)])
    whole = encode_batch([(b"k", b"value")])
    with pytest.raises(CorruptSegment, match="partial"):
        list(iter_batches(iter([whole + whole[:30]])))
