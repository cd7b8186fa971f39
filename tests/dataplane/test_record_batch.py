"""Record batch codec: round trips (hypothesis), validation errors, cleaner helpers."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire.compression import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY
from wire.errors import (
    CorruptRecord,
    InvalidRecord,
    UnsupportedCompression,
    UnsupportedMessageFormat,
)
from wire.record_batch import (
    CODEC_NONE,
    CODEC_ZSTD,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    Record,
    decode_records,
    encode_batch,
    encode_empty_batch,
    first_null_key,
    iter_headers,
    parse_header,
    patch_offsets,
    patched_header,
    set_log_append_time,
    validate_batches,
)

CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]

optional_bytes = st.none() | st.binary(max_size=64)
header_list = st.lists(st.tuples(st.text(max_size=10), optional_bytes), max_size=3).map(tuple)
record_fields = st.tuples(optional_bytes, optional_bytes, header_list, st.integers(0, 10**6))


@settings(max_examples=150, deadline=None)
@given(
    fields=st.lists(record_fields, min_size=1, max_size=20),
    codec=st.sampled_from(CODECS),
    base_ts=st.integers(0, 2**41),
    base_offset=st.integers(0, 2**40),
    producer=st.tuples(st.integers(-1, 2**40), st.integers(0, 2**15 - 1), st.integers(0, 2**30)),
)
def test_encode_validate_decode_round_trip(
    fields: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
    codec: int,
    base_ts: int,
    base_offset: int,
    producer: tuple[int, int, int],
) -> None:
    records = [
        Record(base_offset + i, base_ts + dt, key, value, headers)
        for i, (key, value, headers, dt) in enumerate(fields)
    ]
    pid, epoch, seq = producer
    batch = encode_batch(
        records,
        base_offset=base_offset,
        codec=codec,
        producer_id=pid,
        producer_epoch=epoch if pid >= 0 else -1,
        base_sequence=seq if pid >= 0 else -1,
    )
    (header,) = validate_batches(batch)
    assert header.codec == codec
    assert header.record_count == len(records)
    assert header.base_offset == base_offset
    assert header.last_offset == base_offset + len(records) - 1
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert header.producer_id == pid
    assert decode_records(batch) == records
    expected_null = next((i for i, r in enumerate(records) if r.key is None), -1)
    assert first_null_key(batch, header) == expected_null


@settings(max_examples=60, deadline=None)
@given(
    pairs=st.lists(st.tuples(optional_bytes, optional_bytes), min_size=1, max_size=10),
    codec=st.sampled_from(CODECS),
    position=st.integers(0, 10_000),
)
def test_any_single_bit_flip_in_crc_range_is_detected(
    pairs: list[tuple[bytes | None, bytes | None]], codec: int, position: int
) -> None:
    batch = bytearray(encode_batch(pairs, codec=codec, timestamp_ms=5))
    index = 21 + position % (len(batch) - 21)
    batch[index] ^= 1 << (position % 8)
    with pytest.raises(CorruptRecord, match="CRC"):
        validate_batches(batch)


@settings(max_examples=60, deadline=None)
@given(
    pairs=st.lists(st.tuples(optional_bytes, optional_bytes), min_size=1, max_size=10),
    cut=st.integers(1, 10_000),
)
def test_truncated_batches_are_rejected(
    pairs: list[tuple[bytes | None, bytes | None]], cut: int
) -> None:
    one = encode_batch(pairs, timestamp_ms=5)
    two = one + encode_batch(pairs, base_offset=len(pairs), timestamp_ms=5)
    keep = len(two) - 1 - cut % (len(two) - 1)
    if keep == len(one):
        keep -= 1
    with pytest.raises(CorruptRecord):
        validate_batches(two[:keep])
    with pytest.raises(CorruptRecord):
        decode_records(one[: max(keep, HEADER_SIZE)] if keep < len(one) else one[:-1])
    # Complete batches before a torn one are still found by the header walk.
    assert len(list(iter_headers(two[:keep]))) == (1 if keep >= len(one) else 0)


def test_patching_offsets_and_epoch_keeps_the_crc_valid() -> None:
    data = bytearray(encode_batch([(b"k", b"v"), (b"k2", None)], timestamp_ms=7))
    (header,) = validate_batches(data)
    patch_offsets(data, header, 123456, 9)
    (patched,) = validate_batches(data)
    assert patched.base_offset == 123456
    assert patched.leader_epoch == 9
    assert [r.offset for r in decode_records(data)] == [123456, 123457]


def test_log_append_time_stamps_every_record() -> None:
    data = bytearray(encode_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=10))
    (header,) = validate_batches(data)
    set_log_append_time(data, header, 99_000)
    (stamped,) = validate_batches(data)
    assert stamped.log_append_time
    assert [r.timestamp for r in decode_records(data)] == [99_000, 99_000]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_patched_header_equals_patching_in_place(codec: int) -> None:
    """The copy-free append path writes the same bytes as patching the batch in place."""
    original = encode_batch([(b"a", b"1" * 50), (b"b", None)], timestamp_ms=10, codec=codec)
    (header,) = validate_batches(original)
    for append_time in (-1, 99_000):
        in_place = bytearray(original)
        patch_offsets(in_place, header, 777, 3)
        if append_time >= 0:
            set_log_append_time(in_place, header, append_time)
        head = patched_header(original, header, 777, 3, append_time)
        assert bytes(head) + original[HEADER_SIZE:] == bytes(in_place)
        validate_batches(bytes(head) + original[HEADER_SIZE:])


def test_batch_rules_are_invalid_record() -> None:
    good = bytearray(encode_batch([(b"k", b"v"), (b"k", b"w")]))
    # record count that disagrees with lastOffsetDelta
    bad_count = bytearray(good)
    struct.pack_into(">i", bad_count, 57, 5)
    _fix_crc(bad_count)
    with pytest.raises(InvalidRecord, match="record count"):
        validate_batches(bad_count)
    control = bytearray(encode_batch([(b"k", b"v")], attributes=CONTROL_BIT))
    with pytest.raises(InvalidRecord, match="control"):
        validate_batches(control)
    no_sequence = encode_batch([(b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecord, match="sequence"):
        validate_batches(no_sequence)


def test_format_errors() -> None:
    with pytest.raises(CorruptRecord, match="no record batch"):
        validate_batches(b"")
    old = bytearray(encode_batch([(b"k", b"v")]))
    old[16] = 1
    with pytest.raises(UnsupportedMessageFormat):
        validate_batches(old)
    odd_codec = bytearray(encode_batch([(b"k", b"v")]))
    struct.pack_into(">h", odd_codec, 21, 6)
    _fix_crc(odd_codec)
    with pytest.raises(UnsupportedCompression):
        validate_batches(odd_codec)
    short_length = bytearray(encode_batch([(b"k", b"v")]))
    struct.pack_into(">i", short_length, 8, 10)
    with pytest.raises(CorruptRecord, match="length"):
        validate_batches(short_length)


def test_decode_rejects_lying_record_lengths() -> None:
    batch = bytearray(encode_batch([(b"key", b"value")]))
    # The first record's length varint (at byte 61) claims one byte more than there is.
    batch[HEADER_SIZE] += 2
    with pytest.raises(CorruptRecord):
        decode_records(batch)
    trailing = bytearray(encode_batch([(b"key", b"value")]))
    trailing += b"\x00\x00"
    struct.pack_into(">i", trailing, 8, len(trailing) - 12)
    with pytest.raises(CorruptRecord, match="left over"):
        decode_records(trailing)


@pytest.mark.parametrize("codec", CODECS)
def test_compacted_rewrite_keeps_offsets_horizon_and_codec(codec: int) -> None:
    records = [
        Record(100, 5_000, b"a", b"1"),
        Record(102, 5_002, b"c", None),
        Record(104, 5_004, b"e", b"5"),
    ]
    batch = encode_batch(
        records,
        base_offset=100,
        codec=codec,
        producer_id=7,
        producer_epoch=2,
        base_sequence=40,
        attributes=DELETE_HORIZON_BIT,
        last_offset_delta=6,
        base_timestamp=86_400_000,
    )
    header = parse_header(batch)
    assert header.codec == codec
    assert header.last_offset == 106
    assert header.record_count == 3
    assert header.delete_horizon == 86_400_000
    assert header.last_sequence == 46
    assert header.max_timestamp == 5_004
    assert decode_records(batch) == records


def test_empty_batch_keeps_producer_fields() -> None:
    original = parse_header(
        encode_batch(
            [(b"k", b"v")] * 3,
            base_offset=10,
            producer_id=3,
            producer_epoch=1,
            base_sequence=20,
            timestamp_ms=77,
            codec=CODEC_ZSTD,
            attributes=TIMESTAMP_TYPE_BIT,
        )
    )
    empty = encode_empty_batch(original)
    header = parse_header(empty)
    assert len(empty) == HEADER_SIZE
    assert (header.base_offset, header.last_offset, header.record_count) == (10, 12, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (3, 1, 20)
    assert header.last_sequence == original.last_sequence
    assert header.codec == CODEC_NONE
    assert header.log_append_time
    assert decode_records(empty) == []


def _fix_crc(buf: bytearray) -> None:
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
