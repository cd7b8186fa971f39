"""A byte range of a file, served to a socket without passing through the interpreter.

A fetch answer's ``records`` may be a ``FileRegion`` instead of bytes: the connection's
writer hands it to ``os.sendfile`` (the kernel copies page cache to socket), as Kafka's
``FileRecords.writeTo`` does, and only a TLS connection reads it into memory (``read``).
The region holds its own duplicate of the file's descriptor, so the range stays readable
when the segment it came from is closed, deleted by retention or swapped by the cleaner
before the answer is written; the writer closes it once sent or dropped (and a region
that was never released closes its descriptor when it is collected).

Only whole batches are put in a region, and the bytes below a segment's size are never
rewritten in place, so the range reads back what it held when it was made -- unless the
log is truncated below it meanwhile (a leader that lost its leadership): then the file is
shorter than the region, ``sendfile`` stops early and the writer closes the connection,
as a client would see it if the broker had crashed.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable


class FileRegion:
    """``length`` bytes of a file from byte ``offset``; ``len()`` is its length, so kio
    frames it as any records value."""

    __slots__ = ("fd", "length", "next_offset", "offset")

    def __init__(self, fd: int, offset: int, length: int, next_offset: int = -1) -> None:
        """``fd``: a descriptor the region now owns (a duplicate: ``FileRegion.of``);
        ``next_offset``: one past the last offset of the batches in it (-1: not known)."""
        self.fd = fd
        self.offset = offset
        self.length = length
        self.next_offset = next_offset

    @classmethod
    def of(cls, fd: int, offset: int, length: int, next_offset: int = -1) -> FileRegion:
        """A region of the file open at ``fd`` (which stays the caller's)."""
        return cls(os.dup(fd), offset, length, next_offset)

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, offset={self.offset}, length={self.length})"

    def read(self) -> bytes:
        """The bytes (one pread), for writers that cannot send a file; closes the region.
        Raises ``OSError`` (ENODATA) when the file no longer holds them all."""
        try:
            data = os.pread(self.fd, self.length, self.offset)
        finally:
            self.close()
        if len(data) != self.length:
            raise OSError(
                errno.ENODATA,
                f"the file holds {len(data)} of the region's {self.length} bytes (truncated)",
            )
        return data

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.close()


def release(chunks: Iterable[object]) -> None:
    """Close the regions among a response's chunks (an answer that will not be written)."""
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            chunk.close()
