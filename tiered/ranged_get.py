"""Ranged GETs received by Sluice's own HTTP client: the remote tier's read path.

boto3 receives a GET's body through urllib3 and botocore's streaming body, which cost a
broker about 0.5-0.8 ms of CPU per MiB on this machine's loopback. So ``S3ObjectStore
.get_range`` asks boto3 only for a *presigned URL* of the GET -- botocore still resolves
the endpoint, the addressing style, the region and the credentials (refreshed ones
included) and signs it (SigV4, valid ``PRESIGN_SECONDS``) -- and sends it here: a minimal
HTTP/1.1 client (one request at a time per connection, a connection per thread and
endpoint, kept open while the server allows) that adds the ``Range`` header (S3 does not
sign it in a presigned URL) and receives the body straight into the caller's buffer. On a
plain-TCP connection the body is received by one ``recv(MSG_WAITALL)`` call, so the thread
gives up the interpreter lock once per GET instead of once per socket read: the broker's
event loop, which serves fetches meanwhile, is not kept waiting for the lock by a thread
that wakes for every 64 KiB (TLS connections read in a loop).

Failures are S3's and mapped by ``tiered.errors.map_status``: 404 ``ObjectNotFound``;
5xx, 429, a refused, reset or timed-out connection ``ObjectStoreUnavailable`` after
``tiered.s3.max.attempts`` attempts (backoff with jitter between them); anything else
``ObjectStoreError`` with S3's error code. A body shorter than its ``Content-Length`` is
a reset connection. Timeouts are the store's (``tiered.s3.connect.timeout.ms`` to connect,
``tiered.s3.read.timeout.ms`` for each wait for bytes). Where the environment names an
HTTP proxy for the endpoint (``HTTP_PROXY`` / ``HTTPS_PROXY``, not bypassed by
``NO_PROXY``), this path is not used: boto3 makes the request, through the proxy.
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import ssl
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectStoreError, ObjectStoreUnavailable, map_status

PRESIGN_SECONDS = 900
"""How long a presigned GET stays valid: it is sent at once, so only clock skew matters."""
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 2.0
MAX_HEAD_BYTES = 64 * 1024
"""The longest status line and headers accepted."""
MAX_ERROR_BODY = 1 << 20
"""The most of an error answer's body read (S3's XML error is a few hundred bytes)."""
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_ERROR_CODE = re.compile(rb"<Code>([^<]+)</Code>")
_ERROR_MESSAGE = re.compile(rb"<Message>([^<]*)</Message>")
_TRANSIENT = (ConnectionError, TimeoutError, OSError)


class _Transient(Exception):
    """One attempt failed in a way another may not."""


def proxied(url: str) -> bool:
    """Whether the environment sends requests for ``url`` through a proxy."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


class RangedGets:
    """Thread-safe: each thread has its own connections (one per endpoint host)."""

    def __init__(
        self,
        settings: ObjectStoreSettings,
        presign: Callable[[str], str],
        tls: Callable[[], ssl.SSLContext],
    ) -> None:
        """``presign(key)``: a presigned URL of the GET of ``key``; ``tls()``: the context
        of HTTPS connections (made once, when the first is opened)."""
        self.settings = settings
        self._presign = presign
        self._tls = tls
        self._tls_context: ssl.SSLContext | None = None
        self._local = threading.local()

    def get(self, key: str, start: int, end: int, out: memoryview | None = None) -> Any:
        """Bytes ``[start, end)`` of ``key`` (shorter if the object ends first): into
        ``out`` (its first bytes; returns how many), or as new ``bytes``."""
        attempts = self.settings.max_attempts
        for attempt in range(attempts):
            try:
                return self._attempt(key, start, end, out)
            except _Transient as exc:
                if attempt + 1 == attempts:
                    raise ObjectStoreUnavailable(
                        f"get_range {key}: {exc} ({attempts} attempts)", op="get_range", key=key
                    ) from None
            delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt)
            time.sleep(random.uniform(0, delay))  # noqa: S311 - jitter, not a secret
        raise AssertionError("unreachable")

    def _attempt(self, key: str, start: int, end: int, out: memoryview | None) -> Any:
        url = urlsplit(self._presign(key))
        target = f"{url.path}?{url.query}" if url.query else url.path
        conn = self._connection(url.scheme, url.netloc)
        try:
            try:
                status, headers = conn.request(target, {"Range": f"bytes={start}-{end - 1}"})
            except (ConnectionError, OSError):
                if not conn.reused:
                    raise
                # a kept connection the server closed while idle: once more on a new one
                self._drop(url.scheme, url.netloc)
                conn = self._connection(url.scheme, url.netloc)
                status, headers = conn.request(target, {"Range": f"bytes={start}-{end - 1}"})
            if status in (200, 206):
                result = _body(conn, status, headers, key, start, end, out)
            else:
                body = conn.read_small_body(headers, MAX_ERROR_BODY)
            if not conn.reusable:
                self._drop(url.scheme, url.netloc)
        except _TRANSIENT as exc:
            self._drop(url.scheme, url.netloc)
            raise _Transient(f"{type(exc).__name__}: {exc}") from None
        except BaseException:
            self._drop(url.scheme, url.netloc)
            raise
        if status in (200, 206):
            return result
        error = _error(status, body, key)
        if error.retriable:
            raise _Transient(str(error))
        raise error

    def _connection(self, scheme: str, netloc: str) -> HttpConnection:
        conns: dict[tuple[str, str], HttpConnection] | None = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        conn = conns.get((scheme, netloc))
        if conn is None:
            context = None
            if scheme == "https":
                if self._tls_context is None:
                    self._tls_context = self._tls()
                context = self._tls_context
            conn = HttpConnection(
                netloc,
                self.settings.connect_timeout_ms / 1000,
                self.settings.read_timeout_ms / 1000,
                context,
            )
            conns[(scheme, netloc)] = conn
        return conn

    def close(self) -> None:
        """Close the calling thread's connections (others close with their threads)."""
        for conn in getattr(self._local, "conns", {}).values():
            conn.close()
        self._local.conns = {}

    def _drop(self, scheme: str, netloc: str) -> None:
        conns = getattr(self._local, "conns", {})
        conn = conns.pop((scheme, netloc), None)
        if conn is not None:
            conn.close()


def _body(  # noqa: PLR0917 - one response and what it answers
    conn: HttpConnection,
    status: int,
    headers: dict[str, str],
    key: str,
    start: int,
    end: int,
    out: memoryview | None,
) -> Any:
    """The asked bytes of a 200 / 206 answer, into ``out`` (their count) or as bytes."""
    length = headers.get("content-length")
    if length is None or "chunked" in headers.get("transfer-encoding", ""):
        # not S3's way for an object: take the whole body, then the asked part of it
        whole = conn.read_small_body(headers, (end - start) + (start if status == 200 else 0))
        part = whole[start:end] if status == 200 else whole[: end - start]
        if out is None:
            return part
        out[: len(part)] = part
        return len(part)
    total = int(length)
    size, skip = min(end - start, total), 0
    if status == 206:
        found = _CONTENT_RANGE.fullmatch(headers.get("content-range", ""))
        if found is None or int(found[1]) != start:
            raise ObjectStoreError(
                f"get_range {key}: Content-Range {headers.get('content-range')!r} does not "
                f"answer bytes={start}-{end - 1}",
                op="get_range",
                key=key,
            )
    else:  # the whole object: what the range asks for is a part of it
        skip = min(start, total)
        size = max(0, min(end - start, total - start))
    if skip:
        conn.discard(skip)
    if skip + size < total:
        conn.reusable = False  # the rest of the object is not wanted: do not read it
    if out is None:
        return conn.receive_bytes(size)
    conn.receive_into(out[:size])
    return size


class HttpConnection:
    """One HTTP/1.1 connection, one request at a time."""

    def __init__(
        self,
        netloc: str,
        connect_timeout: float,
        read_timeout: float,
        tls: ssl.SSLContext | None,
    ) -> None:
        parts = urlsplit(f"//{netloc}")
        self.netloc = netloc
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if tls is not None else 80)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.tls = tls
        self.sock: socket.socket | None = None
        self.pending = b""
        """Bytes received after the answer's head: the start of its body."""
        self.reusable = True
        self.reused = False
        """The open socket has carried a request already (the server may have closed it)."""

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def __del__(self) -> None:  # a thread's connections go with its thread-local storage
        self.close()

    def _open(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), self.connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
            sock.settimeout(self.read_timeout)
        except BaseException:
            sock.close()
            raise
        return sock

    def request(self, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
        """Send a GET and read the answer's status and headers (names in lower case)."""
        if self.sock is None:
            self.sock = self._open()
            self.reused = False
        else:
            self.reused = True
        lines = [f"GET {target} HTTP/1.1", f"Host: {self.netloc}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = self._head()
        status_line, *fields = head.decode("latin-1").split("\r\n")
        version, _, rest = status_line.partition(" ")
        try:
            status = int(rest[:3])
        except ValueError:
            raise ConnectionError(f"not an HTTP answer: {status_line[:80]!r}") from None
        answer: dict[str, str] = {}
        for field in fields:
            name, _, value = field.partition(":")
            answer[name.strip().lower()] = value.strip()
        connection = answer.get("connection", "").lower()
        self.reusable = connection != "close" and (
            version != "HTTP/1.0" or connection == "keep-alive"
        )
        return status, answer

    def _head(self) -> bytes:
        """The answer's status line and headers. A plain socket is peeked at first, so
        nothing of the body is taken with them (``receive_bytes`` receives it whole into
        one new ``bytes``); TLS reads on, and keeps the start of the body in ``pending``."""
        assert self.sock is not None
        head = bytearray()
        while True:
            peeked = self.tls is None
            got = self.sock.recv(65536, socket.MSG_PEEK) if peeked else self.sock.recv(65536)
            if not got:
                raise ConnectionError("the server closed the connection before answering")
            start = max(0, len(head) - 3)
            head += got
            end = head.find(b"\r\n\r\n", start)
            if end >= 0:
                if peeked:  # take the head only
                    self.sock.recv(end + 4 - (len(head) - len(got)))
                self.pending = bytes(head[end + 4 :]) if not peeked else b""
                return bytes(head[:end])
            if peeked:
                self.sock.recv(len(got))
            if len(head) > MAX_HEAD_BYTES:
                raise ConnectionError(f"an answer head over {MAX_HEAD_BYTES} bytes")

    def receive_bytes(self, size: int) -> bytes:
        """Exactly ``size`` body bytes, as new ``bytes`` (on a plain socket received
        straight into them: one blocking ``recv(MSG_WAITALL)``, no copy after the
        kernel's)."""
        assert self.sock is not None
        if self.tls is not None or self.pending:
            view = memoryview(bytearray(size))
            self.receive_into(view)
            return bytes(view)
        pieces = []
        got = 0
        with _blocking(self.sock, self.read_timeout):
            while got < size:
                try:
                    piece = self.sock.recv(size - got, socket.MSG_WAITALL)
                except BlockingIOError:  # SO_RCVTIMEO passed with nothing received
                    raise TimeoutError(f"timed out after {got} of {size} body bytes") from None
                if not piece:
                    raise ConnectionError(f"the body ended after {got} of {size} bytes")
                pieces.append(piece)
                got += len(piece)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def receive_into(self, view: memoryview) -> None:
        """Exactly ``len(view)`` body bytes into ``view``."""
        assert self.sock is not None
        got = min(len(self.pending), len(view))
        view[:got] = self.pending[:got]
        self.pending = self.pending[got:]
        if got == len(view):
            return
        if self.tls is None:
            _receive_all(self.sock, view[got:], self.read_timeout)
            return
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if not n:
                raise ConnectionError(f"the body ended after {got} of {len(view)} bytes")
            got += n

    def discard(self, count: int) -> None:
        scratch = memoryview(bytearray(min(count, 1 << 20)))
        while count > 0:
            step = min(count, len(scratch))
            self.receive_into(scratch[:step])
            count -= step

    def read_small_body(self, headers: dict[str, str], limit: int) -> bytes:
        """A whole body of at most ``limit`` bytes (Content-Length, chunked, or up to the
        close); more is an error."""
        if "chunked" in headers.get("transfer-encoding", ""):
            return self._chunked(limit)
        length = headers.get("content-length")
        if length is not None:
            size = int(length)
            if size > limit:
                raise ConnectionError(f"an answer body of {size} bytes, over {limit}")
            body = memoryview(bytearray(size))
            self.receive_into(body)
            return bytes(body)
        self.reusable = False
        data = bytearray(self.pending)
        self.pending = b""
        assert self.sock is not None
        while len(data) <= limit:
            got = self.sock.recv(65536)
            if not got:
                return bytes(data)
            data += got
        raise ConnectionError(f"an answer body over {limit} bytes")

    def _chunked(self, limit: int) -> bytes:
        data = bytearray()
        while True:
            size_line = self._line()
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self._line():  # trailers, then the empty line
                    pass
                return bytes(data)
            if len(data) + size > limit:
                raise ConnectionError(f"an answer body over {limit} bytes")
            chunk = memoryview(bytearray(size + 2))
            self.receive_into(chunk)
            data += chunk[:size]

    def _line(self) -> bytes:
        assert self.sock is not None
        while b"\r\n" not in self.pending:
            got = self.sock.recv(65536)
            if not got:
                raise ConnectionError("the body ended inside a chunk header")
            self.pending += got
            if len(self.pending) > MAX_HEAD_BYTES:
                raise ConnectionError("a chunk header line too long")
        line, _, self.pending = self.pending.partition(b"\r\n")
        return line


def _receive_all(sock: socket.socket, view: memoryview, timeout: float) -> None:
    """Fill ``view`` from a plain socket with blocking ``recv(MSG_WAITALL)`` calls (the
    kernel returns once all of it is there, or the read timeout passed without bytes)."""
    got = 0
    with _blocking(sock, timeout):
        while got < len(view):
            try:
                n = sock.recv_into(view[got:], len(view) - got, socket.MSG_WAITALL)
            except BlockingIOError:  # SO_RCVTIMEO passed with nothing received
                raise TimeoutError(f"timed out after {got} of {len(view)} body bytes") from None
            if not n:
                raise ConnectionError(f"the body ended after {got} of {len(view)} bytes")
            got += n


@contextlib.contextmanager
def _blocking(sock: socket.socket, timeout: float) -> Iterator[None]:
    """The socket in blocking mode, its read timeout the kernel's (SO_RCVTIMEO), so that
    one recv call can wait for a whole body; back to Python's timeout after."""
    seconds = int(timeout)
    sock.settimeout(None)
    sock.setsockopt(
        socket.SOL_SOCKET,
        socket.SO_RCVTIMEO,
        struct.pack("ll", seconds, int((timeout - seconds) * 1_000_000)),
    )
    try:
        yield
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
        sock.settimeout(timeout)


def _error(status: int, body: bytes, key: str) -> ObjectStoreError:
    code = _ERROR_CODE.search(body)
    message = _ERROR_MESSAGE.search(body)
    return map_status(
        status,
        code[1].decode(errors="replace") if code else "",
        message[1].decode(errors="replace") if message else "",
        op="get_range",
        key=key,
    )
