"""The client side of the Kafka wire: request frames out, response frames in, and two
connection helpers on top (one blocking, one asyncio) for every Sluice client of a broker.

Frames (big-endian)::

    request  := size:int32 | header | body
                header v1: api_key:int16 api_version:int16 correlation_id:int32
                           client_id:nullable string
                header v2 (flexible versions): header v1 | tagged fields
    response := size:int32 | correlation_id:int32 | [tagged fields, flexible] | body

Requests and responses are kio entities (and Sluice's own APIs of ``wire.internal``, whose
request classes name their response class in ``__response_schema__``).

- :class:`BlockingConnection`: one socket, one request at a time or raw frames (tests,
  benchmarks, Spark executors and planners).
- :class:`Channel`: one asyncio connection, many requests in flight matched by correlation
  id, connected on first use and again after a failure (brokers talking to brokers, the
  control plane talking to brokers). A failure to connect is :class:`ConnectFailed`
  (nothing was sent); a connection lost with requests in flight fails them with OSError.
  A request that times out closes its connection, as Kafka's NetworkClient does: a peer
  that stopped answering on it (killed behind a partition, its reset never delivered) is
  not waited on again, and the next request opens a new one. With ``unacked_timeout_ms``
  the kernel also drops a connection whose sent bytes stay unacknowledged that long
  (:func:`bound_unacked`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import socket
import ssl
import struct
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from wire.sasl import ClientSecurity, SaslCredentials, SaslFailed, exchange

SIZE = struct.Struct(">i")
MAX_RESPONSE = 256 * 1024 * 1024
"""Largest response frame a client accepts (a broker's fetch.max.bytes is far below)."""


def bound_unacked(sock: socket.socket | None, timeout_ms: int | None) -> None:
    """Have the kernel drop ``sock`` once bytes sent on it stay unacknowledged for
    ``timeout_ms`` (TCP_USER_TIMEOUT, Linux). Without it a connection to a peer that died
    behind a network partition keeps its bytes in retransmission backoff, seconds apart
    and for up to 15 minutes, after the partition heals. None or 0: the kernel's default;
    a platform without the option is left alone."""
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if sock is None or not timeout_ms or option is None:
        return
    with contextlib.suppress(OSError):  # not TCP (a Unix socket in a test)
        sock.setsockopt(socket.IPPROTO_TCP, option, timeout_ms)


class ConnectFailed(OSError):
    """No connection to the broker could be opened (refused, unreachable, timed out):
    nothing was sent."""


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """The whole frame of ``request`` (size prefix included)."""
    header_cls = request.__header_schema__
    header = header_cls(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    entity_writer(header_cls)(buf, header)
    entity_writer(type(request))(buf, request)
    frame = buf.getbuffer()
    SIZE.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)


def response_schema(request_type: Any) -> Any:
    """The response class answering requests of ``request_type`` (a kio entity class)."""
    own = getattr(request_type, "__response_schema__", None)
    if own is not None:
        return own
    return load_response_schema(request_type.__api_key__, request_type.__version__)


def response_correlation(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame (without its size prefix)."""
    return int(SIZE.unpack_from(frame, 0)[0])


def decode_response(frame: bytes | bytearray | memoryview, response_cls: Any) -> Any:
    """The body of a response frame (without its size prefix) as ``response_cls``."""
    offset = 4 + (1 if response_cls.__header_schema__.__flexible__ else 0)  # empty tags
    response, _ = entity_reader(response_cls)(frame, offset)
    return response


class BlockingConnection:
    """A blocking connection to one broker. ``request`` sends and waits for the answer;
    ``send`` / ``receive`` / ``send_raw`` / ``read_frame`` let a caller pipeline requests
    or send malformed bytes."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "sluice",
        timeout: float = 10,
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: TLS and / or SASL as a secured listener needs (None: plaintext)."""
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {host}:{port}: {exc}") from exc
        self.client_id = client_id
        self.correlation = 0
        if security is None:
            return
        try:
            if security.tls is not None:
                self.sock = security.tls.wrap_socket(self.sock, server_hostname=host)
            if security.credentials is not None:
                self._authenticate(security.credentials)
        except (OSError, ssl.SSLError):
            self.sock.close()
            raise

    def _authenticate(self, credentials: SaslCredentials) -> None:
        steps = exchange(credentials)
        answer: Any = None
        while True:
            try:
                request = steps.send(answer)
            except StopIteration:
                return
            answer = self.request(request)

    @classmethod
    def to(cls, address: str, **kwargs: Any) -> BlockingConnection:
        """Connect to ``HOST:PORT``."""
        host, _, port = address.rpartition(":")
        return cls(host.strip("[]"), int(port), **kwargs)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode(self, request: Any, correlation_id: int | None = None) -> bytes:
        if correlation_id is None:
            self.correlation += 1
            correlation_id = self.correlation
        return encode_request(request, correlation_id, self.client_id)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: Any) -> int:
        """Send ``request``; its correlation id."""
        self.send_raw(self.encode(request))
        return self.correlation

    def read_frame(self) -> bytes:
        (size,) = SIZE.unpack(self._read_exact(4))
        if size < 4 or size > MAX_RESPONSE:
            raise OSError(f"bad response size {size}")
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks += chunk
        return bytes(chunks)

    def receive(self, request_type: Any) -> tuple[int, Any]:
        """One response to a request of ``request_type``: (correlation id, response)."""
        frame = self.read_frame()
        return response_correlation(frame), decode_response(frame, response_schema(request_type))

    def request(self, request: Any) -> Any:
        correlation = self.send(request)
        got, response = self.receive(type(request))
        if got != correlation:
            raise OSError(f"response correlation {got}, expected {correlation}")
        return response

    def is_closed(self, timeout: float = 5) -> bool:
        """True when the broker closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


class Channel:
    """A pipelined asyncio connection to one broker (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        connect_timeout: float = 2.0,
        credentials: SaslCredentials | None = None,
        unacked_timeout_ms: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.credentials = credentials
        self.unacked_timeout_ms = unacked_timeout_ms
        """See :func:`bound_unacked` (None: the kernel's default)."""
        self.timeouts = 0
        """Requests that timed out, each closing its connection."""
        """SASL credentials each new connection authenticates with (None: it does not)."""
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], Any]] = {}
        self._correlation = 0
        self._connecting = asyncio.Lock()
        self.closed = False
        self.on_peer_close: Callable[[], None] | None = None
        """Called when the broker closes or resets the connection (not when this side
        drops it: a timeout, ``close``), as its process does when it dies."""

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    async def request(self, request: Any, timeout: float) -> Any:
        """Send ``request`` and return the decoded response. ConnectFailed when no
        connection could be opened within ``timeout`` (and ``connect_timeout``): a
        connection attempt whose first SYN was lost would otherwise wait for the kernel's
        retransmission, a second later; OSError / TimeoutError on other failures."""
        writer = await self._connect(timeout)
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation] = (future, response_schema(type(request)))
        writer.write(encode_request(request, correlation, self.client_id))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            # the peer stopped answering on this connection: do not wait on it again
            self.timeouts += 1
            if self._writer is writer:
                self._writer = None
            writer.close()
            raise
        finally:
            self._pending.pop(correlation, None)

    async def connect(self) -> None:
        """Open the connection now (ConnectFailed if it cannot be opened)."""
        await self._connect()

    async def _connect(self, timeout: float | None = None) -> asyncio.StreamWriter:
        if self.closed:
            raise OSError(f"channel to {self.host}:{self.port} is closed")
        limit = self.connect_timeout if timeout is None else min(self.connect_timeout, timeout)
        if self._connecting.locked():  # another request is connecting: wait for it, bounded
            try:
                async with asyncio.timeout(limit):
                    async with self._connecting:
                        pass
            except TimeoutError:
                raise ConnectFailed(
                    f"cannot connect to {self.host}:{self.port}: not connected in {limit:.2f} s"
                ) from None
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), limit
                )
            except OSError as exc:  # TimeoutError included
                why = exc or type(exc).__name__
                raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: {why}") from exc
            bound_unacked(writer.get_extra_info("socket"), self.unacked_timeout_ms)
            if self.credentials is not None:
                try:
                    await asyncio.wait_for(
                        self._authenticate(reader, writer, self.credentials), self.connect_timeout
                    )
                except (OSError, asyncio.IncompleteReadError) as exc:  # TimeoutError included
                    writer.close()
                    if isinstance(exc, SaslFailed):
                        raise
                    reason = str(exc) or type(exc).__name__
                    raise ConnectFailed(
                        f"authentication to {self.host}:{self.port} failed: {reason}"
                    ) from exc
            self._writer = writer
            self._reader_task = asyncio.get_running_loop().create_task(self._read(reader, writer))
            return writer

    async def _authenticate(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        credentials: SaslCredentials,
    ) -> None:
        """Run the SASL exchange on a new connection before anything else is sent."""
        steps = exchange(credentials)
        answer: Any = None
        correlation = 0
        while True:
            try:
                request = steps.send(answer)
            except StopIteration:
                return
            correlation += 1
            writer.write(encode_request(request, correlation, self.client_id))
            await writer.drain()
            (size,) = SIZE.unpack(await reader.readexactly(4))
            if size < 4 or size > MAX_RESPONSE:
                raise OSError(f"bad response size {size} from {self.host}:{self.port}")
            answer = decode_response(await reader.readexactly(size), response_schema(type(request)))

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: BaseException = OSError(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                (size,) = SIZE.unpack(await reader.readexactly(4))
                if size < 4 or size > MAX_RESPONSE:
                    raise OSError(f"bad response size {size} from {self.host}:{self.port}")
                frame = await reader.readexactly(size)
                entry = self._pending.get(response_correlation(frame))
                if entry is None:
                    continue  # its caller gave up (timeout)
                future, response_cls = entry
                try:
                    response = decode_response(frame, response_cls)
                except Exception as exc:
                    if not future.done():
                        future.set_exception(OSError(f"undecodable response: {exc}"))
                    continue
                if not future.done():
                    future.set_result(response)
        except (OSError, asyncio.IncompleteReadError) as exc:
            error = exc if isinstance(exc, OSError) else error
            self._closed_by_peer(exc, writer)
        except asyncio.CancelledError:
            pass
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            for future, _ in self._pending.values():
                if not future.done():
                    future.set_exception(OSError(str(error)))

    def _closed_by_peer(self, exc: BaseException, writer: asyncio.StreamWriter) -> None:
        """``on_peer_close`` when the broker's side ended the connection (EOF or reset)
        and this side had not dropped it (a timeout, ``close``)."""
        by_peer = isinstance(exc, (asyncio.IncompleteReadError, ConnectionResetError))
        if by_peer and self._writer is writer and not self.closed and self.on_peer_close:
            self.on_peer_close()

    async def close(self) -> None:
        self.closed = True
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        task, self._reader_task = self._reader_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task


class Channels:
    """One channel per (purpose, broker address), created on demand."""

    def __init__(
        self,
        client_id: str,
        credentials: SaslCredentials | None = None,
        *,
        unacked_timeout_ms: int | None = None,
    ) -> None:
        self.client_id = client_id
        self.credentials = credentials
        self.unacked_timeout_ms = unacked_timeout_ms
        self._channels: dict[tuple[str, str, int], Channel] = {}

    def get(self, purpose: str, host: str, port: int) -> Channel:
        key = (purpose, host, port)
        channel = self._channels.get(key)
        if channel is None or channel.closed:
            channel = self._channels[key] = Channel(
                host,
                port,
                client_id=self.client_id,
                credentials=self.credentials,
                unacked_timeout_ms=self.unacked_timeout_ms,
            )
        return channel

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
