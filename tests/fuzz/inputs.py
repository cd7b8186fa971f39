"""How the fuzz targets read one input: containers of several files or frames, and the
"fixed" forms whose checksums the harness recomputes so the fuzzer reaches the code behind
a CRC check.

Container (the segment, metadata, remote and SASL targets)::

    repeated: kind u8 | length u16 (big-endian) | that many bytes

A short last item keeps what is there. Bit 7 of ``kind`` (``FIX``) asks the target to
recompute the item's checksums (batch CRCs, an index or snapshot CRC) before writing it;
the other bits pick the item's role, modulo the number of roles of the target.

Nothing here imports atheris: the regression test replays inputs with the same code.
"""

from __future__ import annotations

import struct

import crc32c

from wire.record_batch import CRC_START, HEADER_SIZE, LOG_OVERHEAD

FIX = 0x80
_ITEM = struct.Struct(">BH")
_U64 = struct.Struct(">Q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
MAX_ITEM = 0xFFFF


def unpack(data: bytes) -> list[tuple[int, bytes]]:
    """The (kind, bytes) items of a container."""
    items: list[tuple[int, bytes]] = []
    pos = 0
    while pos + _ITEM.size <= len(data):
        kind, length = _ITEM.unpack_from(data, pos)
        pos += _ITEM.size
        items.append((kind, data[pos : pos + length]))
        pos += length
    return items


def pack(items: list[tuple[int, bytes]]) -> bytes:
    """A container of ``items``; each item is at most 65,535 bytes."""
    out = bytearray()
    for kind, chunk in items:
        if len(chunk) > MAX_ITEM:
            raise ValueError(f"a container item holds at most {MAX_ITEM} bytes, not {len(chunk)}")
        out += _ITEM.pack(kind, len(chunk)) + chunk
    return bytes(out)


def u64_prefix(chunk: bytes) -> tuple[int, bytes]:
    """(an unsigned 64-bit big-endian number, the rest): a base offset before a file."""
    padded = chunk[:8].ljust(8, b"\x00")
    return _U64.unpack(padded)[0], chunk[8:]


def fix_batch_crcs(buf: bytes) -> bytes:
    """``buf`` with the CRC of every batch that fits recomputed (batch lengths are kept;
    a length running past the end is cut to the end)."""
    out = bytearray(buf)
    pos = 0
    while pos + HEADER_SIZE <= len(out):
        (length,) = _I32.unpack_from(out, pos + 8)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD:
            break
        if pos + size > len(out):
            size = len(out) - pos
            _I32.pack_into(out, pos + 8, size - LOG_OVERHEAD)
        _U32.pack_into(out, pos + 17, crc32c.crc32c(memoryview(out)[pos + CRC_START : pos + size]))
        pos += size
    return bytes(out)


def fix_trailing_crc(buf: bytes) -> bytes:
    """``buf`` whose last 4 bytes are the CRC-32C of the rest (the index formats)."""
    if len(buf) < 4:
        return buf
    return buf[:-4] + _U32.pack(crc32c.crc32c(buf[:-4]))


def fix_snapshot_crc(buf: bytes) -> bytes:
    """A producer snapshot (hex CRC, newline, JSON) with the CRC of its body."""
    _, _, body = buf.partition(b"\n")
    return f"{crc32c.crc32c(body):08x}\n".encode() + body
