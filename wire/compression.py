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
from collections.abc import Callable

import cramjam

from wire.errors import CorruptRecord, MessageTooLarge, UnsupportedCompression

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_I32 = struct.Struct(">i")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"

MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
"""The default of ``message.max.decompressed.bytes``: the most one batch's records block
may decompress to. A zstd frame of 50 bytes can declare a megabyte and one of a megabyte
tens of gigabytes; without a bound, a single produce request could exhaust the broker's
memory. Kafka has no such bound (its readers stream record by record)."""
_ZSTD_MAGIC = 0xFD2FB528
_LZ4_MAGIC = 0x184D2204
_SKIPPABLE = range(0x184D2A50, 0x184D2A60)  # zstd and lz4 skippable frames
_ZSTD_BLOCK_MAX = 128 * 1024  # RFC 8878 Block_Maximum_Size: min(window size, 128 KiB)
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


_limit = {"bytes": MAX_DECOMPRESSED_BYTES}


def set_max_decompressed_bytes(limit: int) -> None:
    """This process's bound for every ``decompress`` without its own (a broker sets its
    ``message.max.decompressed.bytes`` at start)."""
    _limit["bytes"] = limit


class DecompressionLimit(MessageTooLarge):
    """A records block that would decompress to more than the bound (MESSAGE_TOO_LARGE)."""


def _le(data: bytes, pos: int, size: int) -> int:
    if pos + size > len(data):
        raise CorruptRecord("compressed records block is truncated")
    return int.from_bytes(data[pos : pos + size], "little")


def _frames(
    data: bytes, magic: int, name: str, walk: Callable[[bytes, int], tuple[int, int]]
) -> int:
    """The sum of the bounds ``walk(data, pos)`` gives for the frames of ``data`` that
    start with ``magic`` (skippable frames passed over); ``walk`` also gives where the
    frame ends."""
    pos, total = 0, 0
    while pos < len(data):
        found = _le(data, pos, 4)
        if found in _SKIPPABLE:
            pos += 8 + _le(data, pos + 4, 4)
            continue
        if found != magic:
            raise CorruptRecord(f"not a {name} frame")
        bound, pos = walk(data, pos)
        total += bound
    return total


def _zstd_frame(data: bytes, pos: int) -> tuple[int, int]:
    """At least what one zstd frame decompresses to, from its block headers alone (RFC
    8878): a raw or RLE block by its size, a compressed one by the block maximum."""
    descriptor = _le(data, pos + 4, 1)
    single_segment = descriptor >> 5 & 1
    pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    pos += (single_segment, 2, 4, 8)[descriptor >> 6]
    total, last = 0, 0
    while not last:
        block = _le(data, pos, 3)
        last, kind, size = block & 1, block >> 1 & 3, block >> 3
        pos += 3
        if kind == 0:  # raw
            total, pos = total + size, pos + size
        elif kind == 1:  # RLE: one byte, repeated size times
            total, pos = total + size, pos + 1
        elif kind == 2:  # compressed
            total, pos = total + _ZSTD_BLOCK_MAX, pos + size
        else:
            raise CorruptRecord("zstd block of the reserved type")
    return total, pos + (4 if descriptor >> 2 & 1 else 0)  # content checksum


def _lz4_frame(data: bytes, pos: int) -> tuple[int, int]:
    """At least what one LZ4 frame decompresses to: each block by the frame's block maximum
    size (or its own size when stored uncompressed)."""
    flags, descriptor = _le(data, pos + 4, 1), _le(data, pos + 5, 1)
    block_max = _LZ4_BLOCK_MAX.get(descriptor >> 4 & 7)
    if block_max is None:
        raise CorruptRecord("LZ4 frame with an invalid block maximum size")
    pos += 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0) + 1
    total = 0
    while True:
        size = _le(data, pos, 4)
        pos += 4
        if size == 0:  # end mark
            break
        stored = size & 0x80000000
        size &= 0x7FFFFFFF
        total += size if stored else block_max
        pos += size + (4 if flags & 0x10 else 0)
    return total, pos + (4 if flags & 0x04 else 0)  # content checksum


def _varint(data: bytes, pos: int) -> int:
    """Snappy's preamble: the uncompressed length, little-endian base 128."""
    value = 0
    for shift in range(0, 35, 7):
        byte = _le(data, pos, 1)
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
    raise CorruptRecord("snappy length preamble longer than 5 bytes")


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    if data[:8] != _XERIAL_MAGIC:
        _check(CODEC_SNAPPY, _varint(data, 0), limit)
        return bytes(cramjam.snappy.decompress_raw(data))
    blocks: list[bytes] = []
    pos, total = 16, 0  # magic, version, compatible version
    while pos < len(data):
        (length,) = _I32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CorruptRecord(f"xerial snappy block of {length} bytes at {pos - 4} is truncated")
        block = data[pos : pos + length]
        total += _varint(block, 0)
        _check(CODEC_SNAPPY, total, limit)
        blocks.append(block)
        pos += length
    return b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks)


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    """Every gzip member of ``data`` (Java's GZIPInputStream reads them all), never more
    than ``limit`` bytes out."""
    out = bytearray()
    rest = data
    while rest:
        member = zlib.decompressobj(31)
        out += member.decompress(rest, limit + 1 - len(out))
        _check(CODEC_GZIP, len(out), limit)
        if not member.eof:
            raise CorruptRecord("gzip member is truncated")
        rest = member.unused_data
    return bytes(out)


def _check(codec: int, size: int, limit: int) -> None:
    if size > limit:
        raise DecompressionLimit(
            f"{CODEC_NAMES[codec]} records block would decompress to more than {limit} bytes "
            f"(at least {size}); raise message.max.decompressed.bytes if that is intended"
        )


def decompress(codec: int, data: bytes, limit: int | None = None) -> bytes:
    """The records block of a batch, decompressed; DecompressionLimit (MESSAGE_TOO_LARGE)
    rather than more than ``limit`` bytes (default: the process's bound) of output, judged
    from the frames' headers before anything is decompressed (gzip: while decompressing)."""
    cap = _limit["bytes"] if limit is None else limit
    try:
        if codec == CODEC_NONE:
            return data
        if codec == CODEC_GZIP:
            return _gzip_decompress(data, cap)
        if codec == CODEC_SNAPPY:
            return _snappy_decompress(data, cap)
        if codec == CODEC_LZ4:
            _check(codec, _frames(data, _LZ4_MAGIC, "LZ4", _lz4_frame), cap)
            return bytes(cramjam.lz4.decompress(data))
        if codec == CODEC_ZSTD:
            _check(codec, _frames(data, _ZSTD_MAGIC, "zstd", _zstd_frame), cap)
            return bytes(cramjam.zstd.decompress(data))
    except (DecompressionLimit, CorruptRecord):
        raise
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
