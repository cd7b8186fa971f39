"""Responses written to a plaintext socket by the broker itself: ``writev`` and ``sendfile``.

uvloop's transports cannot send a file (``loop.sendfile`` is not implemented), so on a
connection without TLS the listener writes its answers here and uses the transport only to
read. Bytes go out with ``os.writev`` (many chunks in one call), a ``FileRegion`` with
``os.sendfile``: a fetch answer of a segment's batches never enters the interpreter.

The writer owns a duplicate of the socket's descriptor: it writes and polls on that, so
a descriptor number the transport closed and the kernel gave to another socket is never
written to. What the socket does not take at once stays queued, in order, and is written
when the socket is writable again (``loop.add_writer`` on the duplicate). Backpressure as
a transport's: ``pause`` when more than ``high`` bytes are queued, ``resume`` once at most
``low`` are. A failed write (peer gone, a region whose file was truncated under it) drops
what is queued, releases its regions and calls ``failed`` with the reason once; later
writes are dropped too.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections import deque
from collections.abc import Callable

from dataplane.log.region import FileRegion, release

HIGH_WATER = 64 * 1024
LOW_WATER = 16 * 1024
IOV_MAX = 512
"""Chunks per writev call (the kernel's limit is 1,024)."""
_RETRY = (BlockingIOError, InterruptedError)
PEER_GONE = frozenset({errno.EPIPE, errno.ECONNRESET})
PEER_GONE_PREFIX = "peer gone: "
"""Starts the reason given to ``failed`` when the client closed its end (not worth a
warning: a consumer that stops reading mid-answer)."""

Chunk = bytes | bytearray | memoryview | FileRegion


class SocketWriter:
    def __init__(  # noqa: PLR0917 - the socket and the owner's callbacks
        self,
        loop: asyncio.AbstractEventLoop,
        sock_fd: int,
        pause: Callable[[], None],
        resume: Callable[[], None],
        failed: Callable[[str], None],
        high: int = HIGH_WATER,
        low: int = LOW_WATER,
    ) -> None:
        self._loop = loop
        self._fd = os.dup(sock_fd)
        self._pause, self._resume, self._failed = pause, resume, failed
        self._high, self._low = high, low
        self._queue: deque[Chunk] = deque()
        self._sent = 0
        """Bytes of the queue's first chunk already written."""
        self._queued = 0
        self._watching = False
        self._paused = False
        self._closed = False
        self.on_flushed: Callable[[], None] | None = None
        """Called when the queue empties."""

    @property
    def queued(self) -> int:
        """Bytes not yet taken by the socket."""
        return self._queued

    def write(self, chunks: list[Chunk]) -> None:
        if self._closed:
            release(chunks)
            return
        for chunk in chunks:
            if len(chunk):
                self._queue.append(chunk)
                self._queued += len(chunk)
            elif isinstance(chunk, FileRegion):
                chunk.close()
        if not self._watching:
            self._flush()

    def close(self) -> None:
        """Drop what is queued (the connection is gone) and let go of the descriptor."""
        if self._closed:
            return
        self._closed = True
        if self._watching:
            self._watching = False
            with contextlib.suppress(Exception):
                self._loop.remove_writer(self._fd)
        release(self._queue)
        self._queue.clear()
        self._queued = 0
        with contextlib.suppress(OSError):
            os.close(self._fd)

    # ------------------------------------------------------------------ writing

    def _flush(self) -> None:
        try:
            self._write_queued()
        except OSError as exc:
            self._fail(exc)
            return
        if self._closed:
            return
        if self._queue and not self._watching:
            self._watching = True
            self._loop.add_writer(self._fd, self._flush)
        elif not self._queue and self._watching:
            self._watching = False
            self._loop.remove_writer(self._fd)
        if not self._paused and self._queued > self._high:
            self._paused = True
            self._pause()
        elif self._paused and self._queued <= self._low:
            self._paused = False
            self._resume()
        if not self._queue and self.on_flushed is not None:
            self.on_flushed()

    def _write_queued(self) -> None:
        """Write until the queue is empty or the socket is full."""
        queue, fd = self._queue, self._fd
        while queue:
            first = queue[0]
            if isinstance(first, FileRegion):
                sent = self._sent
                try:
                    n = os.sendfile(fd, first.fd, first.offset + sent, first.length - sent)
                except _RETRY:
                    return
                if n == 0:
                    raise OSError(
                        errno.ENODATA,
                        f"a segment file ended {first.length - self._sent} bytes before the "
                        "fetch answer's records (truncated under it)",
                    )
                self._advance(n)
                continue
            buffers: list[bytes | bytearray | memoryview] = []
            for chunk in queue:
                if isinstance(chunk, FileRegion) or len(buffers) == IOV_MAX:
                    break
                buffers.append(chunk)
            if self._sent:
                buffers[0] = memoryview(buffers[0])[self._sent :]
            try:
                n = os.writev(fd, buffers)
            except _RETRY:
                return
            self._advance(n)

    def _advance(self, n: int) -> None:
        """``n`` more bytes written: drop the chunks they complete."""
        self._queued -= n
        queue = self._queue
        n += self._sent
        while queue and n >= len(queue[0]):
            done = queue.popleft()
            n -= len(done)
            if isinstance(done, FileRegion):
                done.close()
        self._sent = n

    def _fail(self, exc: OSError) -> None:
        reason = f"writing the answer failed: {exc.strerror or exc}"
        if exc.errno in PEER_GONE:
            reason = f"{PEER_GONE_PREFIX}{reason}"
        self.close()
        self._failed(reason)
