"""A records block may decompress to at most ``message.max.decompressed.bytes``.

A zstd frame of 50 bytes decompresses to a megabyte, one of a megabyte to tens of
gigabytes: without a bound one produce request could exhaust a broker's memory. The bound
is judged from the frames' own headers before anything is decompressed (zstd and LZ4 block
headers, snappy's length preambles; gzip while it decompresses), and a batch over it is
refused with MESSAGE_TOO_LARGE. Kafka has no such bound: its readers stream record by
record."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.conftest import BrokerProcess, unique
from tests.support.raw_client import RawClient
from tests.support.records import partition_response, produce_request
from wire.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    DecompressionLimit,
    compress,
    decompress,
)
from wire.errors import CorruptRecord
from wire.record_batch import encode_batch

CODECS = {"gzip": CODEC_GZIP, "snappy": CODEC_SNAPPY, "lz4": CODEC_LZ4, "zstd": CODEC_ZSTD}
MIB = 1024 * 1024


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_a_block_over_the_bound_is_refused_and_one_under_it_decompresses(codec: int) -> None:
    block = bytes(4 * MIB)  # zeros: every codec shrinks them twentyfold or more
    compressed = compress(codec, block)
    assert len(compressed) < MIB // 5
    with pytest.raises(DecompressionLimit, match=r"message\.max\.decompressed\.bytes"):
        decompress(codec, compressed, limit=MIB)
    assert decompress(codec, compressed, limit=4 * MIB) == block


def test_every_gzip_member_is_read_within_the_bound() -> None:
    def member(data: bytes) -> bytes:
        gz = zlib.compressobj(6, zlib.DEFLATED, 31)
        return gz.compress(data) + gz.flush()

    two = member(b"first ") + member(b"second")
    assert decompress(CODEC_GZIP, two, limit=12) == b"first second"
    with pytest.raises(DecompressionLimit):
        decompress(CODEC_GZIP, two, limit=11)


@pytest.mark.parametrize(
    ("codec", "data"),
    [
        # a xerial block whose length is negative used to send the reader back for ever
        (CODEC_SNAPPY, b"\x82SNAPPY\x00" + bytes([0, 0, 0, 1, 0, 0, 0, 1]) + b"\xff\xff\xff\xfc"),
        (CODEC_ZSTD, b"\x28\xb5\x2f\xfd\x00"),  # a frame header and no block
        (CODEC_ZSTD, b"\x28\xb5\x2f\xfd\x00\x07\x00\x00"),  # a block of the reserved type
        (CODEC_LZ4, b"\x04\x22\x4d\x18\x60\x00\x00"),  # an invalid block maximum size
        (CODEC_LZ4, b"\x04\x22\x4d\x18\x60\x40\x00\x05\x00"),  # a block size cut short
        (CODEC_GZIP, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\x03"),  # a member cut short
    ],
    ids=["xerial-negative", "zstd-no-block", "zstd-reserved", "lz4-bad-bd", "lz4-cut", "gzip-cut"],
)
def test_malformed_frames_are_corrupt_records(codec: int, data: bytes) -> None:
    with pytest.raises(CorruptRecord):
        decompress(codec, data)


def test_a_broker_refuses_a_decompression_bomb_and_keeps_serving(tmp_path: Path) -> None:
    """compression.type=lz4 makes the broker decompress a zstd batch to recompress it."""
    broker = BrokerProcess(tmp_path / "data", {"message.max.decompressed.bytes": str(MIB)}).start()
    try:
        topic = unique("bomb")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "lz4"})])[
            topic
        ].result(30)
        bomb = encode_batch([(b"k", bytes(8 * MIB))], codec=CODEC_ZSTD)
        fine = encode_batch([(b"k", bytes(MIB // 2))], codec=CODEC_ZSTD)
        assert len(bomb) < 2048
        with RawClient(broker.bootstrap) as client:
            refused = partition_response(client.request(produce_request(topic, bomb)))
            assert refused.error_code == ErrorCode.message_too_large
            accepted = partition_response(client.request(produce_request(topic, fine)))
            assert accepted.error_code == ErrorCode.none
            assert accepted.base_offset == 0
        assert broker.alive()
    finally:
        broker.stop()
