"""The Kafka listener: framing, per-connection pipelining, ordered responses.

Each connection reads frames as they arrive and hands every request to its handler at
once, so a long-poll fetch or an fsync wait never blocks the requests behind it on the
same connection; responses are written strictly in request order, as Kafka requires.
Malformed frames, oversized frames and unknown API keys or versions close the
connection with a log line, as Kafka does (ApiVersions answers an unknown version with
UNSUPPORTED_VERSION instead, so clients can fall back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, cast

from dataplane.broker import Broker
from dataplane.handlers.api_versions import unsupported_version_response
from dataplane.handlers.context import RequestContext
from dataplane.handlers.registry import SERVED
from dataplane.log.region import FileRegion, release
from dataplane.security.listeners import Listener, endpoint_of
from dataplane.security.session import Outcome, Security, Session, State
from dataplane.socket_writer import PEER_GONE_PREFIX, SocketWriter
from wire.framing import decode_request, encode_response, peek_header

log = logging.getLogger(__name__)

SIZE = struct.Struct(">i")
API_VERSIONS = 18
MIN_FRAME = 8  # api_key, api_version, correlation_id


class _Slot:
    """One response position in the connection's ordered output queue."""

    __slots__ = ("chunks", "done")

    def __init__(self) -> None:
        self.chunks: list[bytes] | None = None
        self.done = False


READ_BUFFER = 256 * 1024
"""Bytes of the per-connection read buffer; larger frames get a buffer of their own."""


class RequestMemory:
    """Bytes of large frames held by the broker (``queued.max.request.bytes``), as Kafka's
    MemoryPool: a frame too large for its connection's read buffer is granted its size
    before it is received and gives it back once handled. A connection refused a grant
    stops reading (its bytes wait in the kernel, the client is slowed by TCP) and is
    resumed, oldest first, when memory is given back. When nothing is held, any frame is
    granted, so no frame within socket.request.max.bytes waits forever."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiting: deque[KafkaConnection] = deque()

    def grant(self, size: int) -> bool:
        if self.limit >= 0 and self.used > 0 and self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give_back(self, size: int) -> None:
        self.used -= size
        if self.waiting and (self.limit < 0 or self.used < self.limit):
            # each waiting connection tries once, in order; those refused again queue up
            # anew behind any that a grant let through
            waiting, self.waiting = self.waiting, deque()
            for connection in waiting:
                connection.memory_available()


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection.

    Reading uses the buffered protocol: the kernel copies straight into this
    connection's buffer, several small frames per read; a frame larger than the buffer is
    received directly into a buffer of its exact size, so a 1 MiB produce request is never
    copied between arrival and decoding.
    """

    def __init__(
        self, broker: Broker, connections: set[KafkaConnection], memory: RequestMemory
    ) -> None:
        self.broker = broker
        self.connections = connections
        self.memory = memory
        self._awaiting_memory = False
        self.max_frame = broker.config.get_int("socket.request.max.bytes")
        self.max_queued = broker.config.get_int("queued.max.requests.per.connection")
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.host = "?"
        self._buf = bytearray(READ_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0  # first unparsed byte in _buf
        self._end = 0  # end of received bytes in _buf
        self._big: bytearray | None = None  # a large frame being received
        self._big_filled = 0
        self._queue: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reading_paused = False
        self._writing_paused = False
        self._closed = False
        self._stopping = False  # the broker stops: no more requests are read
        self.on_answered: Callable[[], None] | None = None
        """Set at a stop: called when this connection has nothing left to answer."""
        self.session: Session | None = None  # set by KafkaServer for its listener
        self._writer: SocketWriter | None = None
        """Writes the answers of a plaintext connection (writev, sendfile); None: the
        transport writes them (TLS)."""

    # ------------------------------------------------------------------ transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host = str(peer[0]) if peer else "?"
        limit = self.broker.config.get_int("max.connections.per.ip")
        if sum(1 for c in self.connections if c.host == self.host) >= limit:
            self.close(f"{self.host} already holds {limit} connections (max.connections.per.ip)")
            return
        self.connections.add(self)
        sock = transport.get_extra_info("socket")
        if transport.get_extra_info("sslcontext") is None and sock is not None:
            self._writer = SocketWriter(
                asyncio.get_running_loop(),
                sock.fileno(),
                self.pause_writing,
                self.resume_writing,
                self.close,
            )
            self._writer.on_flushed = self._flushed
        if self.session is not None:
            self.session.connected(transport, self.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.connections.discard(self)
        if self._writer is not None:
            self._writer.close()
        if self.on_answered is not None:
            self.on_answered()
        if self._big is not None:
            self.memory.give_back(len(self._big))
            self._big = None
        if self._awaiting_memory:
            self._awaiting_memory = False
            self.memory.waiting.remove(self)
        for task in self._tasks:
            task.cancel()
        # Let go of what a closed connection holds now rather than when the cycle collector
        # runs (the session holds this connection's close): its read buffer (256 KiB) and its
        # session. A TLS transport may keep this protocol alive for a while (uvloop), so
        # under connection churn the buffers would pile up (hundreds of MiB per 1,000
        # failed logins before).
        if self.session is not None:
            self.session.disconnected()
            self.session = None
        self._buf = bytearray()
        self._view = memoryview(self._buf)
        self._start = self._end = 0

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        assert self.transport is not None
        should_pause = (
            self._stopping
            or self._writing_paused
            or self._awaiting_memory
            or len(self._queue) >= self.max_queued
        )
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused and not self._closed:
            self._reading_paused = False
            self.transport.resume_reading()

    def memory_available(self) -> None:
        """Called by RequestMemory: try the frame that waited for memory again."""
        self._awaiting_memory = False
        if self._closed:
            return
        self._parse()
        self._update_reading()

    def stop_reading(self) -> None:
        """The broker stops: read no more requests; those read are still answered."""
        self._stopping = True
        if self.transport is not None and not self._closed:
            self._update_reading()

    @property
    def answering(self) -> bool:
        """Requests read whose answers are not written yet."""
        queued = self._writer is not None and self._writer.queued > 0
        return (bool(self._queue) or queued) and not self._closed

    def _flushed(self) -> None:
        """The writer's queue emptied."""
        if not self._queue and self.on_answered is not None:
            self.on_answered()

    def close(self, reason: str) -> None:
        if self._closed:
            return
        if reason.startswith(PEER_GONE_PREFIX):
            log.debug("closing connection from %s: %s", self.peer, reason)
        else:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        if self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------------ framing

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._end == len(self._buf):
            # Move the unparsed tail (a partial frame) to the front.
            pending = self._end - self._start
            self._buf[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        big = self._big
        if big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(big):
                self._big = None
                # kio reads read-only buffers; the grant is given back once it is handled
                self._handle_frame(memoryview(big).toreadonly(), held=len(big))
            return
        self._end += nbytes
        self._parse()

    def _parse(self) -> None:
        buf, pos, end = self._buf, self._start, self._end
        while end - pos >= 4 and not self._closed:
            (size,) = SIZE.unpack_from(buf, pos)
            if size < MIN_FRAME or size > self.max_frame:
                self.close(
                    f"frame of {size} bytes is outside [{MIN_FRAME}, {self.max_frame}] "
                    "(socket.request.max.bytes)"
                )
                return
            have = end - pos - 4
            if have >= size:
                frame = bytes(self._view[pos + 4 : pos + 4 + size])
                pos += 4 + size
                self._handle_frame(frame)
                continue
            if size > len(buf) - 4:
                # Too large for the shared buffer: receive the rest into its own buffer,
                # once the broker's memory for large frames allows it.
                if not self.memory.grant(size):
                    self._awaiting_memory = True
                    self.memory.waiting.append(self)
                    self._update_reading()
                    break
                big = bytearray(size)
                big[:have] = self._view[pos + 4 : end]
                self._big, self._big_filled = big, have
                pos = end
            break
        if pos == end:
            pos = end = 0
        self._start, self._end = pos, end

    def _handle_frame(self, frame: bytes | memoryview, held: int = 0) -> None:
        """Handle one request; ``held``: bytes of RequestMemory its frame holds, given back
        once the handler is done with it (when its task ends, for an asynchronous one)."""
        task: asyncio.Future[None] | None = None
        try:
            if self.session is not None and self.session.raw_tokens:
                task = self._raw_token(self.session, bytes(frame))
            else:
                task = self._dispatch(frame)
        finally:
            if held and task is None:
                self.memory.give_back(held)
            elif held and task is not None:
                task.add_done_callback(lambda _t: self.memory.give_back(held))

    def _served(self, key: int, version: int, correlation_id: int) -> Any:
        """The handler of API ``key`` at ``version``, or None (the connection was closed, or
        ApiVersions was answered with UNSUPPORTED_VERSION)."""
        served = SERVED.get(key)
        if served is None:
            self.close(f"unknown or unsupported API key {key}")
            return None
        low, high = served.versions
        if low <= version <= high:
            return served
        if key == API_VERSIONS:
            self._enqueue_ready(correlation_id, unsupported_version_response())
        else:
            self.close(f"API key {key} version {version} is not supported (range {low}-{high})")
        return None

    def _dispatch(self, frame: bytes | memoryview) -> asyncio.Future[None] | None:
        """Decode and hand the request to its handler; the task that awaits an
        asynchronous handler's answer, else None."""
        head = peek_header(frame)
        key, version = head.api_key, head.api_version
        refused = None if self.session is None else self.session.refuse(key)
        if refused is not None:  # authentication first (SASL listeners, KIP-368 expiry)
            self.close(refused)
            return None
        served = self._served(key, version, head.correlation_id)
        if served is None:
            return None
        try:
            header, request = decode_request(frame, key, version)
        except Exception as exc:  # kio raises a variety of errors on malformed input
            log.debug("malformed frame from %s: %s", self.peer, frame[:256].hex())
            self.close(f"malformed request (API {key} v{version}): {type(exc).__name__}: {exc}")
            return None
        ctx = RequestContext(
            self.broker,
            key,
            version,
            head.correlation_id,
            header.client_id,
            self.peer,
            self.session,
        )
        try:
            result = served.handle(ctx, request)
        except Exception:
            log.exception("handler of API %d v%d failed; closing %s", key, version, self.peer)
            self.close("internal error")
            return None
        if isinstance(result, Awaitable):
            slot = _Slot()
            self._queue.append(slot)
            task = asyncio.ensure_future(self._await(slot, head.correlation_id, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self._update_reading()
            return task
        if result is not None:
            self._enqueue_ready(head.correlation_id, result)
        return None

    def _raw_token(self, session: Session, token: bytes) -> asyncio.Future[None] | None:
        """A SASL token after SaslHandshake v0: answered with the server's raw token (after
        the responses before it); the last one ends raw mode, a failure closes."""
        outcome = session.authenticate(token)
        if isinstance(outcome, Awaitable):
            task = asyncio.ensure_future(self._raw_answer(session, outcome))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return task
        self._raw_reply(session, outcome)
        return None

    async def _raw_answer(self, session: Session, outcome: Awaitable[Outcome]) -> None:
        self._raw_reply(session, await outcome)

    def _raw_reply(self, session: Session, outcome: Outcome) -> None:
        if outcome.error is not None:  # Kafka's v0: no error message, the connection closes
            session.raw_tokens = False
            return
        if session.state is not State.AUTHENTICATE:
            session.raw_tokens = False
        if self.transport is not None and not self._closed:
            self._write([SIZE.pack(len(outcome.token)) + outcome.token])

    def _enqueue_ready(self, correlation_id: int, response: Any) -> None:
        if not self._queue and self.transport is not None:
            self._write(encode_response(correlation_id, response))
            return
        slot = _Slot()
        slot.chunks = encode_response(correlation_id, response)
        slot.done = True
        self._queue.append(slot)
        self._drain()

    async def _await(self, slot: _Slot, correlation_id: int, awaitable: Any) -> None:
        try:
            response = await awaitable
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("request %d from %s failed", correlation_id, self.peer)
            self.close("internal error")
            return
        slot.chunks = encode_response(correlation_id, response) if response is not None else []
        slot.done = True
        self._drain()

    def _write(self, chunks: list[Any]) -> None:
        if self._writer is not None:
            self._writer.write(chunks)
            return
        assert self.transport is not None
        if any(isinstance(chunk, FileRegion) for chunk in chunks):
            try:
                chunks = [c.read() if isinstance(c, FileRegion) else c for c in chunks]
            except OSError as exc:
                release(chunks)
                self.close(f"reading the answer's records failed: {exc.strerror or exc}")
                return
        self.transport.writelines(chunks)

    def _drain(self) -> None:
        queue = self._queue
        while queue and queue[0].done:
            slot = queue.popleft()
            if not slot.chunks:
                continue
            if self.transport is not None and not self._closed:
                self._write(slot.chunks)
            else:
                release(slot.chunks)
        if self.transport is not None and not self._closed:
            self._update_reading()
        if not queue and self.on_answered is not None:
            self.on_answered()


class EndpointConnection(KafkaConnection):
    """A connection through a private endpoint's listener: its bytes, both ways, are
    metered (``endpoint_bytes``, by endpoint)."""

    endpoint = ""

    def buffer_updated(self, nbytes: int) -> None:
        self.broker.usage.meter.endpoint(self.endpoint, nbytes)
        super().buffer_updated(nbytes)

    def _write(self, chunks: list[Any]) -> None:
        self.broker.usage.meter.endpoint(self.endpoint, sum(len(c) for c in chunks))
        super()._write(chunks)


class KafkaServer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connections: set[KafkaConnection] = set()
        self.memory = RequestMemory(broker.config.get_int("queued.max.request.bytes"))
        self.server: asyncio.Server | None = None
        config = broker.config
        self.security = Security(config, config.listen_host, config.listen_port, broker.metadata)
        self.servers: list[asyncio.Server] = []
        """One per listener (``listeners``), the one at --listen (``server``) first."""

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self.security.listeners:
            server = await loop.create_server(
                lambda listener=listener: self._connection(listener),
                listener.host,
                listener.port,
                reuse_address=True,
                backlog=1024,
                ssl=self.security.tls_context(listener),
            )
            self.servers.append(server)
        self.server = self.servers[0]

    def _connection(self, listener: Listener) -> KafkaConnection:
        endpoint = endpoint_of(listener.name)
        if endpoint:
            connection: KafkaConnection = EndpointConnection(
                self.broker, self.connections, self.memory
            )
            connection.endpoint = endpoint  # type: ignore[attr-defined]
        else:
            connection = KafkaConnection(self.broker, self.connections, self.memory)
        connection.session = self.security.session(listener)
        return connection

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop accepting and reading; let the requests already read be answered, for at
        most ``shutdown.requests.drain.ms`` (after a controlled shutdown their partitions
        have moved: a waiting acks=all write is answered NOT_LEADER_OR_FOLLOWER naming the
        new leader, rather than by a closed connection); then close every connection."""
        for server in self.servers:
            server.close()
        for conn in list(self.connections):
            conn.stop_reading()
        answered = asyncio.Event()

        def check() -> None:
            if not any(c.answering for c in self.connections):
                answered.set()

        for conn in list(self.connections):
            conn.on_answered = check
        check()
        with contextlib.suppress(TimeoutError):
            drain_s = self.broker.config.get_seconds("shutdown.requests.drain.ms")
            await asyncio.wait_for(answered.wait(), drain_s)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self.servers:
            await server.wait_closed()
