"""A small HTTP/1.1 server on asyncio streams (the standard library only): request line,
headers, a body by Content-Length or chunked, ``Expect: 100-continue`` (curl sends it for
bodies over 1 KiB), keep-alive, and JSON answers. Every limit is a setting: the request head
(``schema.registry.max.header.bytes``: 431 past it), the body
(``schema.registry.max.request.bytes``: 413 before it is read), connections at once
(``schema.registry.max.connections``: 503 past it) and how long an idle or slow connection is
kept (``schema.registry.idle.timeout.ms``).

The handler gets a :class:`Request` and returns a :class:`Response`; a
:class:`~controlplane.schema_registry.errors.RegistryError` it raises becomes Confluent's
error body; anything else is logged and answered 500 (a bug, never bad input).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from controlplane.schema_registry import errors

log = logging.getLogger("sluice.controlplane.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_CHUNK_LINE = 1024


@dataclass(frozen=True)
class Limits:
    max_header_bytes: int = 16_384
    max_request_bytes: int = 1_048_576
    max_connections: int = 256
    idle_timeout: float = 60.0


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    """Lower-case names; the last value of a repeated header."""
    body: bytes = b""
    segments: list[str] = field(default_factory=list)
    """The path split at ``/`` and percent-decoded (``%2F`` stays inside its segment)."""
    query: dict[str, str] = field(default_factory=dict)

    def flag(self, name: str) -> bool:
        """A boolean query parameter: ``true`` in any case is true, anything else false."""
        return self.query.get(name, "").strip().lower() == "true"


@dataclass
class Response:
    status: int
    body: Any
    """JSON-able; sent as JSON."""
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None
    """Sent as it is instead of ``body`` (a schema's own text)."""


Handler = Callable[[Request], Awaitable[Response]]


def _error_response(error: errors.RegistryError) -> Response:
    headers = {}
    if error.status == HTTPStatus.UNAUTHORIZED:
        headers["WWW-Authenticate"] = 'Basic realm="sluice schema registry"'
    return Response(error.status, error.body(), headers)


class _Close(Exception):
    """Answer, then close the connection (the request could not be read whole)."""

    def __init__(self, error: errors.RegistryError) -> None:
        super().__init__(error.message)
        self.error = error


LINGER_S = 1.0
LINGER_BYTES = 64 << 20


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After an answer to a request whose body was not read: stop writing and drop what the
    client still sends for a moment, so that closing does not reset the connection before the
    client has read the answer (a "lingering close")."""
    with contextlib.suppress(OSError, RuntimeError):
        if writer.can_write_eof():
            writer.write_eof()
    deadline = asyncio.get_running_loop().time() + LINGER_S
    dropped = 0
    with contextlib.suppress(OSError, TimeoutError, asyncio.IncompleteReadError):
        while dropped < LINGER_BYTES:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            chunk = await asyncio.wait_for(reader.read(1 << 16), left)
            if not chunk:
                break
            dropped += len(chunk)


class HttpServer:
    def __init__(self, handler: Handler, limits: Limits) -> None:
        self.handler = handler
        self.limits = limits
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen; the port bound (a free one for 0)."""
        self.server = await asyncio.start_server(
            self._connection, host, port, limit=self.limits.max_header_bytes
        )
        sockets = self.server.sockets
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for task in list(self.connections):
                task.cancel()
            for task in list(self.connections):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
            self.server = None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            if len(self.connections) > self.limits.max_connections:
                error = errors.unavailable(
                    f"more than {self.limits.max_connections} connections at once "
                    "(schema.registry.max.connections); retry"
                )
                await self._send(writer, _error_response(error), close=True)
                return
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            self.connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection is to be closed."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.limits.idle_timeout)
        except asyncio.IncompleteReadError:
            return False
        except asyncio.LimitOverrunError:
            error = errors.RegistryError(
                431,
                431,
                f"request head over {self.limits.max_header_bytes} bytes "
                "(schema.registry.max.header.bytes)",
            )
            await self._send(writer, _error_response(error), close=True)
            return False
        try:
            request, keep_alive = self._parse_head(head)
            request.body = await self._body(request, reader, writer)
        except _Close as exc:
            await self._send(writer, _error_response(exc.error), close=True)
            await _linger(reader, writer)
            return False
        response = await self._dispatch(request)
        await self._send(writer, response, close=not keep_alive)
        return keep_alive

    def _parse_head(self, head: bytes) -> tuple[Request, bool]:
        try:
            text = head.decode("latin-1")
            line, *header_lines = text[:-4].split("\r\n")
            method, target, version = line.split(" ")
        except ValueError:
            raise _Close(errors.bad_request("malformed HTTP request line")) from None
        if not version.startswith("HTTP/1."):
            raise _Close(errors.bad_request(f"unsupported protocol {version!r}: use HTTP/1.1"))
        headers: dict[str, str] = {}
        for header in header_lines:
            name, sep, value = header.partition(":")
            if not sep or not name.strip():
                raise _Close(errors.bad_request(f"malformed header line {header[:64]!r}"))
            headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        keep_alive = (
            "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        )
        parts = urlsplit(target)
        request = Request(
            method=method.upper(),
            target=target,
            headers=headers,
            segments=[unquote(s) for s in parts.path.split("/") if s],
            query=dict(parse_qsl(parts.query, keep_blank_values=True)),
        )
        return request, keep_alive

    async def _body(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bytes:
        limit = self.limits.max_request_bytes
        chunked = "chunked" in request.headers.get("transfer-encoding", "").lower()
        length_text = request.headers.get("content-length")
        length = 0
        if length_text is not None and not chunked:
            try:
                length = int(length_text)
            except ValueError:
                raise _Close(errors.bad_request(f"Content-Length {length_text!r}")) from None
            if length < 0:
                raise _Close(errors.bad_request(f"Content-Length {length_text!r}"))
            if length > limit:
                raise _Close(errors.too_large(length, limit, "schema.registry.max.request.bytes"))
        if not chunked and length == 0:
            return b""
        if request.headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        timeout = self.limits.idle_timeout
        if not chunked:
            return await asyncio.wait_for(reader.readexactly(length), timeout)
        body = bytearray()
        while True:
            line = await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)
            try:
                size = int(line.split(b";")[0].strip() or b"x", 16)
            except ValueError:
                raise _Close(errors.bad_request("malformed chunk size")) from None
            if size == 0:
                while (await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)) != b"\r\n":
                    pass  # trailers
                return bytes(body)
            if len(body) + size > limit:
                raise _Close(
                    errors.too_large(len(body) + size, limit, "schema.registry.max.request.bytes")
                )
            body += await asyncio.wait_for(reader.readexactly(size + 2), timeout)
            del body[-2:]

    async def _dispatch(self, request: Request) -> Response:
        try:
            return await self.handler(request)
        except errors.RegistryError as error:
            return _error_response(error)
        except Exception as exc:
            log.exception("schema registry: %s %s failed", request.method, request.segments)
            return _error_response(
                errors.RegistryError(500, 50001, f"internal error: {type(exc).__name__}: {exc}")
            )

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, response: Response, close: bool) -> None:
        if response.raw is not None:
            payload = response.raw.encode()
        else:
            payload = json.dumps(response.body, separators=(",", ":")).encode()
        try:
            phrase = HTTPStatus(response.status).phrase
        except ValueError:
            phrase = "Error"
        headers = {"Content-Type": CONTENT_TYPE, **response.headers}
        headers["Content-Length"] = str(len(payload))
        if close:
            headers["Connection"] = "close"
        head = f"HTTP/1.1 {response.status} {phrase}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers.items()
        )
        writer.write(head.encode("latin-1") + b"\r\n" + payload)
        await writer.drain()
