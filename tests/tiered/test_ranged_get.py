"""Sluice's HTTP client of ranged GETs (``tiered.ranged_get``) against small HTTP servers
of the test's own on loopback, for what the embedded S3 never does: keeping connections
open (and closing them while idle), chunked bodies, a 200 with the whole object for a
ranged GET, an error answer. The embedded S3's own answers are tests/tiered/test_errors.py
and test_object_store.py."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterator

import pytest

from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectNotFound, ObjectStoreUnavailable
from tiered.ranged_get import RangedGets

DATA = os.urandom(300_000)

Answer = Callable[[int, int, int], bytes]
"""(request number on its connection, start, end inclusive) -> the whole answer."""


def _partial(_n: int, start: int, end: int) -> bytes:
    body = DATA[start : end + 1]
    head = (
        f"HTTP/1.1 206 Partial Content\r\nContent-Length: {len(body)}\r\n"
        f"Content-Range: bytes {start}-{start + len(body) - 1}/{len(DATA)}\r\n\r\n"
    )
    return head.encode() + body


class Server:
    """Answers every request line it reads with ``answer``; ``close_after`` requests per
    connection, then it closes the connection without saying so (an idle timeout)."""

    def __init__(self, answer: Answer, close_after: int = 1000) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.answer, self.close_after = answer, close_after
        self.connections = 0
        self.requests = 0
        self._stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # a client that leaves mid-answer
            buf = b""
            for n in range(self.close_after):
                while b"\r\n\r\n" not in buf:
                    got = conn.recv(65536)
                    if not got:
                        return
                    buf += got
                head, buf = buf.split(b"\r\n\r\n", 1)
                self.requests += 1
                ranged = next(
                    line for line in head.decode().split("\r\n") if line.startswith("Range:")
                )
                start, end = (int(x) for x in ranged.split("=", 1)[1].split("-"))
                conn.sendall(self.answer(n, start, end))

    def stop(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def make(answer: Answer = _partial, close_after: int = 1000) -> Server:
        servers.append(Server(answer, close_after))
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


def gets(server: Server, attempts: int = 1) -> RangedGets:
    settings = ObjectStoreSettings(
        endpoint=f"http://127.0.0.1:{server.port}", max_attempts=attempts, read_timeout_ms=5000
    )
    return RangedGets(
        settings,
        lambda key: f"http://127.0.0.1:{server.port}/b/{key}?X-Amz-Signature=x",
        ssl.create_default_context,
    )


def test_one_kept_connection_carries_every_request(serve: Callable[..., Server]) -> None:
    server = serve()
    client = gets(server)
    for start in range(0, 200_000, 20_000):
        assert client.get("k", start, start + 70_000) == DATA[start : start + 70_000]
    out = memoryview(bytearray(100_000))
    assert client.get("k", 250_000, 350_000, out) == 50_000  # the object ends first
    assert out[:50_000] == DATA[250_000:]
    assert server.connections == 1
    assert server.requests == 11


def test_a_kept_connection_closed_while_idle_is_opened_again(
    serve: Callable[..., Server],
) -> None:
    """The server closes each connection after one answer without saying so: the second
    GET finds it closed and is sent again on a new one, without using an attempt (one
    attempt is all this client has)."""
    server = serve(close_after=1)
    client = gets(server, attempts=1)
    for start in (0, 1_000, 2_000):
        assert client.get("k", start, start + 500) == DATA[start : start + 500]
    assert server.connections == 3


def test_chunked_bodies_and_whole_objects_for_a_range(serve: Callable[..., Server]) -> None:
    def chunked(_n: int, start: int, end: int) -> bytes:
        body = DATA[start : end + 1]
        pieces = b"".join(
            f"{len(body[i : i + 7000]):x}\r\n".encode() + body[i : i + 7000] + b"\r\n"
            for i in range(0, len(body), 7000)
        )
        return (
            b"HTTP/1.1 206 Partial Content\r\nTransfer-Encoding: chunked\r\n\r\n"
            + pieces
            + b"0\r\n\r\n"
        )

    def whole(_n: int, _start: int, _end: int) -> bytes:
        return f"HTTP/1.1 200 OK\r\nContent-Length: {len(DATA)}\r\n\r\n".encode() + DATA

    client = gets(serve(chunked))
    assert client.get("k", 10, 50_010) == DATA[10:50_010]
    assert client.get("k", 0, 3) == DATA[:3]
    server = serve(whole)
    client = gets(server)
    assert client.get("k", 100, 200) == DATA[100:200]
    out = memoryview(bytearray(1000))
    assert client.get("k", 299_500, 300_500, out) == 500
    assert out[:500] == DATA[299_500:]
    assert server.connections == 2  # the rest of a whole object is not read: closed


def test_error_answers_are_s3s(serve: Callable[..., Server]) -> None:
    def missing(_n: int, _start: int, _end: int) -> bytes:
        body = b"<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>"
        return f"HTTP/1.1 404 Not Found\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body

    def slow_down(_n: int, _start: int, _end: int) -> bytes:
        body = b"<Error><Code>SlowDown</Code><Message>later</Message></Error>"
        return f"HTTP/1.1 503 Slow Down\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body

    with pytest.raises(ObjectNotFound, match="NoSuchKey gone"):
        gets(serve(missing), attempts=3).get("k", 0, 10)
    server = serve(slow_down)
    with pytest.raises(ObjectStoreUnavailable, match=r"SlowDown later \(3 attempts\)"):
        gets(server, attempts=3).get("k", 0, 10)
    assert server.requests == 3
