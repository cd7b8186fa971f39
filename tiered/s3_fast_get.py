"""The embedded S3 server's GETs of whole objects and byte ranges, sent with ``sendfile``.

moto answers a GET by reading the whole object into memory, slicing the range out of it
(a second copy) and writing that to the socket (a third): ~0.65 ms of CPU per MiB in the
server process, under one interpreter lock, on the same cores as the brokers and Spark
executors that read the remote tier. ``FastGet`` (WSGI middleware in front of moto, behind
``SigV4Front`` and ``ReadMeter``) answers the plain ones itself: the headers are moto's own
for the object (``FakeKey.response_dict`` and its metadata), the body goes from the file
moto keeps the object in (objects above moto's in-memory buffer, 5 MiB by default, live in
a temporary file) to the socket with ``socket.sendfile``, so the server copies none of it.

Plain means: GET of ``/BUCKET/KEY`` (path style, as the server is run), no query parameter
but a presigned URL's ``X-Amz-*`` ones, no conditional (``If-*``), SSE-C, checksum-mode,
account or CORS (``Origin``) header, one ``Range`` of the forms ``bytes=A-B``, ``bytes=A-``
or ``bytes=-N`` that the object satisfies, a bucket without versioning, and an object of the
STANDARD storage class held in a file. Everything else goes to moto unchanged, and so does
any request the fast path cannot finish before it sends its headers.

The file is opened anew through ``/proc/self/fd`` under the key's lock: the read has its
own file offset (moto seeks its own), and a PUT or DELETE that replaces the key meanwhile
closes moto's descriptor, not this one, so the read sends the object as it was (the
buffer is checked to be still open after the open: moto closes a replaced key's buffer
without the lock).

Imports: the standard library only; moto's objects arrive as arguments (this module runs in
the server process, which has imported moto).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPLACED_RETRIES = 5
"""Lookups of a key that a PUT or DELETE replaced between the lookup and the open."""
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
_REFUSED_HEADERS = ("HTTP_IF_", "HTTP_X_AMZ_SERVER_SIDE_ENCRYPTION_CUSTOMER", "HTTP_ORIGIN")
_REFUSED_EXACT = ("HTTP_X_AMZ_CHECKSUM_MODE", "HTTP_X_MOTO_ACCOUNT_ID", "HTTP_X_AMZ_VERSION_ID")


class FileBody:
    """A response body sent with ``sendfile``: iterating it yields ``b""`` once (the server
    sends the status line and headers on that), then sends ``count`` bytes of ``fd`` from
    ``offset`` on ``sock``. ``sent``: the body bytes sent (``ReadMeter`` counts them)."""

    def __init__(self, sock: socket.socket, fd: int, offset: int, count: int) -> None:
        self.sock = sock
        self.file = open(fd, "rb", buffering=0, closefd=True)  # noqa: SIM115 - closed in close()
        self.offset = offset
        self.count = count
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        yield b""  # the headers go out, then the body straight from the file
        if self.count:
            self.sent = self.sock.sendfile(self.file, self.offset, self.count)
        if self.sent != self.count:  # the file is shorter than moto said: cut the response
            raise ConnectionAbortedError(
                f"sent {self.sent} of {self.count} bytes of an object file; connection closed"
            )

    def close(self) -> None:
        self.file.close()


class FastGet:
    """WSGI middleware in front of moto's app: plain GETs answered with ``sendfile``.

    ``buckets_dir``: the disk mirror's ``s3/`` directory (each bucket's ``bucket.json``
    names the moto account and partition holding it); ``backends``: moto's
    ``s3_backends``; ``key_type``: moto's ``FakeKey`` (a delete marker is not one)."""

    def __init__(
        self, app: Callable[..., Any], buckets_dir: Path, backends: Any, key_type: type
    ) -> None:
        self.app = app
        self.buckets_dir = buckets_dir
        self.backends = backends
        self.key_type: Any = key_type
        self._homes: dict[str, Any] = {}
        """Bucket name -> the moto backend holding it (read from its ``bucket.json`` once,
        again when the bucket is no longer there)."""
        self.served = 0
        """Requests answered here (for tests)."""

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        answer = self._answer(environ) if _plain(environ) else None
        if answer is None:
            return self.app(environ, start_response)
        status, headers, body = answer
        self.served += 1
        start_response(status, headers)
        return body

    def _answer(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], Any] | None:
        sock = environ.get("werkzeug.socket")
        if not isinstance(sock, socket.socket):
            return None
        bucket_name, _, key_name = str(environ.get("PATH_INFO") or "").lstrip("/").partition("/")
        for _ in range(REPLACED_RETRIES):
            key = self._key(bucket_name, key_name)
            if key is None:
                return None
            opened = _open(key)
            if opened is not None:
                break
            if not (key.disposed or key._value_buffer.closed):
                return None  # held in memory: moto sends it
        else:
            return None  # replaced again and again: moto answers
        fd, size = opened
        try:
            answer = self._headers(environ, key, size)
            if answer is None:
                os.close(fd)
                return None
            status, headers, start, count = answer
            return status, headers, FileBody(sock, fd, start, count)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise

    def _key(self, bucket_name: str, key_name: str) -> Any:
        if not bucket_name or not key_name:
            return None
        backend = self._homes.get(bucket_name)
        bucket = None if backend is None else backend.buckets.get(bucket_name)
        if bucket is None:  # not seen yet, or deleted (and perhaps made again elsewhere)
            try:
                meta = json.loads((self.buckets_dir / bucket_name / "bucket.json").read_bytes())
                backend = self.backends[meta["account_id"]][meta["partition"]]
            except (OSError, ValueError, KeyError):
                return None
            bucket = backend.buckets.get(bucket_name)
            if bucket is not None:
                self._homes[bucket_name] = backend
        if bucket is None or bucket.versioning_status is not None:
            return None
        key: Any = bucket.keys.get(key_name)
        if not isinstance(key, self.key_type) or key.storage_class != "STANDARD":
            return None
        return key

    @staticmethod
    def _headers(
        environ: dict[str, Any], key: Any, size: int
    ) -> tuple[str, list[tuple[str, str]], int, int] | None:
        """moto's headers for the object (as its ``get_object``), the status, and the
        bytes to send; None for a range to leave to moto."""
        fields: dict[str, str] = {}
        if key.version_id != "null":
            fields["x-amz-version-id"] = str(key.version_id)
        fields.update(key.response_dict)
        fields.update(key.metadata)
        fields["Accept-Ranges"] = "bytes"
        fields["Access-Control-Allow-Origin"] = "*"  # moto's server sends it on every answer
        fields["x-amzn-requestid"] = f"sendfile-{secrets.token_hex(16)}"
        status, start, count = "200 OK", 0, size
        wanted = environ.get("HTTP_RANGE")
        if wanted is not None:
            found = _RANGE.fullmatch(str(wanted).strip())
            if found is None or size == 0:
                return None
            first, last = found.groups()
            if first:
                begin = int(first)
                end = min(int(last), size - 1) if last else size - 1
                if begin > end:
                    return None  # unsatisfiable or reversed: moto's answer
            elif last and int(last) > 0:
                begin, end = size - min(int(last), size), size - 1
            else:
                return None
            status, start, count = "206 Partial Content", begin, end - begin + 1
            fields["content-range"] = f"bytes {begin}-{end}/{size}"
            if begin or end < size - 1:
                fields = {k: v for k, v in fields.items() if not k.startswith("x-amz-checksum-")}
        fields = {k: v for k, v in fields.items() if k.lower() != "content-length"}
        headers = [(k, str(v)) for k, v in fields.items()]
        if not any(k.lower() == "content-type" for k, _ in headers):
            headers.append(("Content-Type", "binary/octet-stream"))
        headers.append(("Content-Length", str(count)))
        return status, headers, start, count


def _open(key: Any) -> tuple[int, int] | None:
    """A descriptor of its own of the file holding moto's key, and the key's size; None
    when the key is held in memory or was replaced meanwhile."""
    with key.lock:
        if key.disposed:
            return None
        buffer = key._value_buffer
        if not getattr(buffer, "_rolled", False):
            return None  # held in memory: moto sends it
        try:
            fd = os.open(f"/proc/self/fd/{buffer.fileno()}", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, ValueError):
            return None
    # moto disposes of a replaced key without its lock: had it closed the buffer before the
    # open, the descriptor number may have been another file's by then. A file object marks
    # itself closed before it closes its descriptor, so open here means it was open then.
    if buffer.closed:
        os.close(fd)
        return None
    return fd, int(key.size)


def _plain(environ: dict[str, Any]) -> bool:
    """A GET the fast path may answer: no query but a presigned URL's, no header that
    changes what S3 answers."""
    if str(environ.get("REQUEST_METHOD", "")).upper() != "GET":
        return False
    query = str(environ.get("QUERY_STRING") or "")
    if query and not all(p.lower().startswith("x-amz-") for p in query.split("&") if p):
        return False
    for name in environ:
        if name.startswith(_REFUSED_HEADERS) or name in _REFUSED_EXACT:
            return False
    return True
