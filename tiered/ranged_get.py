"""Ranged GETs received by Sluice's own HTTP client: the remote tier's read path.

boto3 receives a GET's body through urllib3 and botocore's streaming body, which cost a
broker about 0.5-0.8 ms of CPU per MiB on this machine's loopback; a body read with
``http.client`` into one buffer (``recv_into`` underneath, no copy after the kernel's)
costs about half. So ``S3ObjectStore.get_range`` asks boto3 only for a *presigned URL* of
the GET -- botocore still resolves the endpoint, the addressing style, the region and the
credentials (refreshed ones included) and signs it (SigV4, valid ``PRESIGN_SECONDS``) --
and sends it here, with a ``Range`` header (S3 does not sign it in a presigned URL), on a
connection the calling thread keeps open between requests.

Failures are S3's and mapped by ``tiered.errors.map_status``: 404 ``ObjectNotFound``;
5xx, 429, a refused, reset or timed-out connection ``ObjectStoreUnavailable`` after
``tiered.s3.max.attempts`` attempts (backoff with jitter between them); anything else
``ObjectStoreError`` with S3's error code. A body shorter than its ``Content-Length``
is a reset connection. Timeouts are the store's (``tiered.s3.connect.timeout.ms``,
``tiered.s3.read.timeout.ms``). Where the environment names an HTTP proxy for the
endpoint (``HTTP_PROXY`` / ``HTTPS_PROXY``, not bypassed by ``NO_PROXY``), this path is
not used: boto3 makes the request, through the proxy.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import re
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectStoreError, ObjectStoreUnavailable, map_status

PRESIGN_SECONDS = 900
"""How long a presigned GET stays valid: it is sent at once, so only clock skew matters."""
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 2.0
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_ERROR_CODE = re.compile(rb"<Code>([^<]+)</Code>")
_ERROR_MESSAGE = re.compile(rb"<Message>([^<]*)</Message>")
_TRANSIENT = (ConnectionError, TimeoutError, http.client.HTTPException, OSError)


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
        conn = self._connection(url.scheme, url.netloc)
        target = f"{url.path}?{url.query}" if url.query else url.path
        try:
            conn.request("GET", target, headers={"Range": f"bytes={start}-{end - 1}"})
            resp = conn.getresponse()
            if resp.status in (200, 206):
                return self._body(conn, resp, key, start, end, out)
            body = resp.read()
        except _TRANSIENT as exc:
            self._drop(url.scheme, url.netloc)
            raise _Transient(f"{type(exc).__name__}: {exc}") from None
        error = _error(resp.status, body, key)
        if error.retriable:
            raise _Transient(str(error))
        raise error

    def _body(  # noqa: PLR0917 - one response and what it answers
        self,
        conn: http.client.HTTPConnection,
        resp: http.client.HTTPResponse,
        key: str,
        start: int,
        end: int,
        out: memoryview | None,
    ) -> Any:
        size = end - start
        skip = 0
        if resp.status == 206:
            found = _CONTENT_RANGE.fullmatch(resp.getheader("Content-Range") or "")
            if found is None or int(found[1]) != start:
                conn.close()
                raise ObjectStoreError(
                    f"get_range {key}: Content-Range {resp.getheader('Content-Range')!r} does "
                    f"not answer bytes={start}-{end - 1}",
                    op="get_range",
                    key=key,
                )
            size = min(size, int(found[2]) - start + 1)
        else:  # the whole object: what the range asks for is a part of it
            length = int(resp.getheader("Content-Length") or 0)
            skip = min(start, length)
            size = max(0, min(size, length - start))
        if skip:
            _discard(resp, skip)
        if out is None:
            data = resp.read(size) if size else b""
            if len(data) != size:
                raise ConnectionError(f"the body ended after {len(data)} of {size} bytes")
            result: Any = data
        else:
            got = 0
            view = out[:size]
            while got < size:
                n = resp.readinto(view[got:])
                if not n:
                    raise ConnectionError(f"the body ended after {got} of {size} bytes")
                got += n
            result = got
        if resp.status == 200 and not resp.isclosed():
            conn.close()  # the rest of the object is not wanted: do not read it
        return result

    def _connection(self, scheme: str, netloc: str) -> _Connection | _TlsConnection:
        conns: dict[tuple[str, str], _Connection | _TlsConnection] | None = getattr(
            self._local, "conns", None
        )
        if conns is None:
            conns = self._local.conns = {}
        conn = conns.get((scheme, netloc))
        if conn is None:
            timeout = self.settings.connect_timeout_ms / 1000
            if scheme == "https":
                if self._tls_context is None:
                    self._tls_context = self._tls()
                conn = _TlsConnection(netloc, timeout=timeout, context=self._tls_context)
            else:
                conn = _Connection(netloc, timeout=timeout)
            conn.read_timeout = self.settings.read_timeout_ms / 1000
            conns[(scheme, netloc)] = conn
        return conn

    def _drop(self, scheme: str, netloc: str) -> None:
        conns = getattr(self._local, "conns", {})
        conn = conns.pop((scheme, netloc), None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


class _Connection(http.client.HTTPConnection):
    """Connect with the connect timeout, then wait for bytes with the read timeout."""

    read_timeout: float = 30.0

    def connect(self) -> None:
        super().connect()
        assert self.sock is not None
        self.sock.settimeout(self.read_timeout)


class _TlsConnection(http.client.HTTPSConnection):
    """``_Connection`` over TLS."""

    read_timeout: float = 30.0

    def connect(self) -> None:
        super().connect()
        assert self.sock is not None
        self.sock.settimeout(self.read_timeout)


def _discard(resp: http.client.HTTPResponse, count: int) -> None:
    while count > 0:
        got = resp.read(min(count, 1 << 20))
        if not got:
            raise ConnectionError("the body ended early")
        count -= len(got)


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
