"""The plaintext writer: bytes and file regions, in order, through a socket that fills up.

Real sockets under uvloop: the receiving side reads slowly from a small receive buffer, so
the writer meets a full socket (EAGAIN), queues, pauses its owner and resumes it. A region
whose file was truncated under it fails the connection instead of sending short.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest
import uvloop

from dataplane.log.region import FileRegion
from dataplane.socket_writer import SocketWriter

MiB = 1 << 20


def _pair() -> tuple[socket.socket, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(server.getsockname())
    b, _ = server.accept()
    server.close()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    a.setblocking(False)
    return a, b


async def _receive(sock: socket.socket, size: int) -> bytes:
    """Read ``size`` bytes slowly (a thread, at most 64 KiB a millisecond)."""

    def read() -> bytes:
        out = bytearray()
        while len(out) < size:
            got = sock.recv(min(65536, size - len(out)))
            if not got:
                break
            out += got
            time.sleep(0.001)
        return bytes(out)

    return await asyncio.to_thread(read)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_bytes_and_regions_arrive_in_order_through_a_full_socket(tmp_path: Path) -> None:
    data = os.urandom(3 * MiB)
    path = tmp_path / "segment.log"
    path.write_bytes(data)

    async def main() -> tuple[list[str], int, int]:
        loop = asyncio.get_running_loop()
        a, b = _pair()
        events: list[str] = []
        fd = os.open(path, os.O_RDONLY)
        before = _open_fds()
        writer = SocketWriter(
            loop,
            a.fileno(),
            lambda: events.append("pause"),
            lambda: events.append("resume"),
            lambda reason: events.append(f"failed {reason}"),
        )
        flushed = asyncio.Event()
        writer.on_flushed = flushed.set
        head = b"H" * 100
        chunks = [
            head,
            FileRegion.of(fd, 10, MiB),
            b"",
            memoryview(b"middle"),
            FileRegion.of(fd, 2 * MiB, MiB),
            b"T",
        ]
        expected = head + data[10 : 10 + MiB] + b"middle" + data[2 * MiB : 3 * MiB] + b"T"
        writer.write(chunks)
        writer.write([b"second", FileRegion.of(fd, 0, 1000)])
        expected += b"second" + data[:1000]
        got = await _receive(b, len(expected))
        await asyncio.wait_for(flushed.wait(), 10)
        queued = writer.queued
        writer.close()
        after = _open_fds()
        os.close(fd)
        a.close()
        b.close()
        assert got == expected
        return events, queued, after - before

    events, queued, leaked = uvloop.run(main())
    assert queued == 0
    assert "pause" in events, events
    assert events[-1] == "resume", events
    assert not any(e.startswith("failed") for e in events)
    assert leaked == 0, "every region's descriptor and the writer's own are closed"


def test_a_truncated_region_fails_the_connection_and_sends_nothing_short(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(MiB))

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        a, b = _pair()
        failures: list[str] = []
        fd = os.open(path, os.O_RDWR)
        region = FileRegion.of(fd, 0, MiB)
        os.ftruncate(fd, 1000)  # the log was truncated after the answer was made
        writer = SocketWriter(loop, a.fileno(), lambda: None, lambda: None, failures.append)
        writer.write([b"head", region, b"tail"])
        for _ in range(200):
            if failures:
                break
            b.setblocking(False)
            try:
                while b.recv(65536):
                    pass
            except BlockingIOError:
                pass
            await asyncio.sleep(0.01)
        writer.write([b"after the failure: dropped"])
        assert region.fd == -1
        writer.close()
        os.close(fd)
        a.close()
        b.close()
        return failures

    failures = uvloop.run(main())
    assert len(failures) == 1
    assert "truncated" in failures[0]


def test_a_region_reads_back_for_writers_that_cannot_send_files(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDWR)
    region = FileRegion.of(fd, 2, 5)
    assert len(region) == 5
    assert region.read() == b"23456"
    assert region.fd == -1
    short = FileRegion.of(fd, 8, 5)
    with pytest.raises(OSError, match="truncated"):
        short.read()
    os.close(fd)
