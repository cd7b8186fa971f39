"""The codecs of record batches' records blocks, as Kafka's Java clients and broker write
and read them.

Compressed records blocks, as Kafka's Java clients and broker write them::

    gzip    one gzip member (RFC 1952)
    snappy  xerial framing: "\x82SNAPPY\x00", int32 version 1, int32 compatible 1, then
            [int32 length | raw snappy block of at most 32 KiB]...; raw snappy is read too
    lz4     one LZ4 frame of independent 64 KiB blocks (Kafka's reader refuses linked
            blocks)
    zstd    one zstd frame
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from wire.errors import CorruptRecord, UnsupportedCompression

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_I32 = struct.Struct(">i")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy_decompress(data: bytes) -> bytes:
    if data[:8] != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = 16  # magic, version, compatible version
    while pos < len(data):
        (length,) = _I32.unpack_from(data, pos)
        pos += 4
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + length]))
        pos += length
    return bytes(out)


def decompress(codec: int, data: bytes) -> bytes:
    """The records block of a batch, decompressed."""
    try:
        if codec == CODEC_NONE:
            return data
        if codec == CODEC_GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == CODEC_SNAPPY:
            return _snappy_decompress(data)
        if codec == CODEC_LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == CODEC_ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except Exception as exc:  # the codec libraries raise their own error types
        raise CorruptRecord(f"cannot decompress {CODEC_NAMES[codec]} batch: {exc}") from exc
    raise UnsupportedCompression(f"unknown compression codec {codec}")


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
"""Values of the topic and broker config ``compression.type``, in Kafka's order."""
TARGET_CODECS = {
    "uncompressed": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
}
"""The codec a topic's ``compression.type`` stores batches in ("producer": as sent)."""
LEVEL_KEYS = {
    CODEC_GZIP: "compression.gzip.level",
    CODEC_LZ4: "compression.lz4.level",
    CODEC_ZSTD: "compression.zstd.level",
}
_LZ4_DEFAULT = 9  # at its default level Kafka uses lz4's fast compressor, else lz4 HC
_ZSTD_DEFAULT = 3
_SNAPPY_BLOCK = 32 * 1024  # snappy-java's SnappyOutputStream block size
_XERIAL_HEADER = _XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """A records block compressed as Kafka writes it (framing in the module docstring).

    ``level`` is the topic's compression.<codec>.level (None: Kafka's default).
    """
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:  # zlib: ~1.5x cramjam's gzip speed at level 6
        gzip = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return gzip.compress(data) + gzip.flush()
    if codec == CODEC_SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _SNAPPY_BLOCK):
            block = cramjam.snappy.compress_raw(view[start : start + _SNAPPY_BLOCK])
            out += _I32.pack(len(block))
            out += block
        return bytes(out)
    if codec == CODEC_LZ4:
        lz4 = cramjam.lz4.Compressor(
            level=0 if level in (None, _LZ4_DEFAULT) else level,  # 0: lz4's fast compressor
            content_checksum=False,
            block_linked=False,
        )
        lz4.compress(bytes(data))
        return bytes(lz4.finish())
    if codec == CODEC_ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_DEFAULT if level is None else level))
    raise UnsupportedCompression(f"unknown compression codec {codec}")
