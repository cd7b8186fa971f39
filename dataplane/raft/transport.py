"""How Raft messages travel between nodes: a Protocol and its TCP implementation.

Raft tolerates lost, duplicated and reordered messages, so the transport is best effort:
``send`` never blocks and never fails; a message to an unreachable peer is dropped (the
leader retransmits on its next heartbeat). TCP frames are ``codec`` frames (length-prefixed).
Each node listens on its own address; it opens one outbound connection per peer and
receives on the connections peers open to it. So a node can send only to peers whose
listening address it knows: a learner needs the voters' addresses (from configuration, it
answers the leader over its own connection to it) and its own; the leader learns the
learners' addresses at run time (``set_address`` / ``set_addresses``, which
``RaftServer.set_learners`` calls).

With a ``secret`` (the inter-broker password, when the inter-broker listener is secured) a
node proves it holds it before a peer reads any frame from it: the accepting side sends a
random 32-byte nonce and the connecting side answers HMAC-SHA256(secret, label | nonce);
a wrong answer closes the connection (logged), so a process that can reach the port cannot
vote or append without the cluster's credentials.

A frame written to a connection whose peer died behind a network partition (its reset
never delivered) sits in the kernel's retransmission backoff, seconds apart, after the
partition heals; every frame behind it waits too, and a leader's appends stall though the
peer is back. With ``unacked_timeout_ms`` (``controller.quorum.request.timeout.ms`` in a
broker) the kernel drops such a connection once its bytes stay unacknowledged that long,
and the next frame opens a new one.

``LocalTransport`` is for a lone voter without learners: it listens nowhere and sends
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
import socket
from collections import deque
from collections.abc import Callable, Mapping
from typing import Protocol

from dataplane.raft.codec import MAX_FRAME, CodecError, decode, encode
from dataplane.raft.types import Message

log = logging.getLogger(__name__)

NONCE_BYTES = 32
PROOF_LABEL = b"sluice-raft-peer-v1"


def proof(secret: bytes, nonce: bytes) -> bytes:
    """The answer to ``nonce`` that only a holder of ``secret`` can give."""
    return hmac.new(secret, PROOF_LABEL + nonce, hashlib.sha256).digest()


Address = tuple[str, int]


class Transport(Protocol):
    async def start(self, deliver: Callable[[Message], None]) -> None:
        """Begin receiving; every message addressed to this node goes to ``deliver``."""

    def send(self, message: Message) -> None:
        """Queue ``message`` for ``message.dst``; never blocks, may drop."""

    def set_address(self, node_id: int, address: Address | None) -> None:
        """Where ``node_id`` listens from now on (None: forget it, drop its connection)."""

    async def close(self) -> None: ...


class LocalTransport:
    """The transport of a lone voter: no peers, no port. ``send`` drops (and counts)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.dropped = 0

    async def start(self, deliver: Callable[[Message], None]) -> None:
        return None

    def send(self, message: Message) -> None:
        self.dropped += 1

    def set_address(self, node_id: int, address: Address | None) -> None:
        return None

    def set_addresses(self, addresses: Mapping[int, Address]) -> None:
        return None

    async def close(self) -> None:
        return None


class TcpTransport:
    """Length-prefixed ``codec`` frames over TCP."""

    def __init__(
        self,
        node_id: int,
        addresses: Mapping[int, Address],
        *,
        queue_limit: int = 10_000,
        connect_timeout: float = 1.0,
        secret: bytes | None = None,
        unacked_timeout_ms: int | None = None,
        backoff: tuple[float, float] = (0.02, 0.5),
    ) -> None:
        self.node_id = node_id
        self.backoff = backoff
        """Seconds between attempts to reconnect to a peer not heard from: the first wait,
        doubled after each failure up to the second."""
        self.secret = secret
        self.unacked_timeout_ms = unacked_timeout_ms
        self.connections_lost = 0
        """Outbound connections that failed (refused, reset, or dropped as stalled)."""
        self.addresses = dict(addresses)
        self.queue_limit = queue_limit
        self.connect_timeout = connect_timeout
        self._deliver: Callable[[Message], None] | None = None
        self._server: asyncio.Server | None = None
        self._peers: dict[int, _Peer] = {}
        self._inbound: set[asyncio.StreamWriter] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.dropped = 0

    async def start(self, deliver: Callable[[Message], None]) -> None:
        self._deliver = deliver
        host, port = self.addresses[self.node_id]
        self._server = await asyncio.start_server(self._serve, host, port)

    def send(self, message: Message) -> None:
        peer = self._peers.get(message.dst)
        if peer is None:
            address = self.addresses.get(message.dst)
            if address is None:
                self.dropped += 1
                return
            peer = self._peers[message.dst] = _Peer(self, address)
        peer.push(encode(message))

    def set_address(self, node_id: int, address: Address | None) -> None:
        """Set (or, with None, forget) where ``node_id`` listens. A changed or forgotten
        peer's outbound connection and queued frames are dropped. This node's own address
        cannot change (it is listening on it): it is left alone."""
        if node_id == self.node_id or self.addresses.get(node_id) == address:
            return
        if address is None:
            self.addresses.pop(node_id, None)
        else:
            self.addresses[node_id] = address
        peer = self._peers.pop(node_id, None)
        if peer is not None:
            task = asyncio.get_running_loop().create_task(peer.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def set_addresses(self, addresses: Mapping[int, Address]) -> None:
        """Replace the whole address book (this node's own entry is kept as it is)."""
        for node_id in [n for n in self.addresses if n not in addresses]:
            self.set_address(node_id, None)
        for node_id, address in addresses.items():
            self.set_address(node_id, address)

    async def close(self) -> None:
        self._stopping = True
        if self._server is not None:
            # Stop accepting, then give connections accepted just before a few loop turns
            # to reach _serve (which now closes them at once), and only then close the
            # server: on Python 3.11 a connection whose transport is built after
            # Server.close() is leaked (Server._attach asserts), a ResourceWarning.
            loop = asyncio.get_running_loop()
            for sock in self._server.sockets:
                with contextlib.suppress(Exception):  # loops without remove_reader
                    loop.remove_reader(sock.fileno())
            for _ in range(10):
                await asyncio.sleep(0)
            self._server.close()
        for peer in self._peers.values():
            await peer.close()
        self._peers = {}
        for task in list(self._closing):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # Closing a connection ends its reader with EOF (cancelling the handler task
        # would make asyncio log an error on Python 3.11).
        for writer in list(self._inbound):
            writer.close()
        for _ in range(100):
            if not self._inbound:
                break
            await asyncio.sleep(0.001)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            writer.close()
            return
        self._inbound.add(writer)
        try:
            if self.secret is not None and not await self._challenge(reader, writer):
                return
            while True:
                head = await reader.readexactly(4)
                size = int.from_bytes(head, "big")
                if size > MAX_FRAME:
                    log.warning("raft: frame of %d bytes refused, closing", size)
                    return
                message = decode(await reader.readexactly(size))
                if message.dst == self.node_id and self._deliver is not None:
                    if (peer := self._peers.get(message.src)) is not None:
                        peer.heard()
                    self._deliver(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        except CodecError as exc:
            log.warning("raft: malformed frame (%s), closing the connection", exc)
        finally:
            self._inbound.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _challenge(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """True when the connecting side proved it holds the secret."""
        assert self.secret is not None
        nonce = secrets.token_bytes(NONCE_BYTES)
        writer.write(nonce)
        try:
            async with asyncio.timeout(self.connect_timeout * 5):
                answer = await reader.readexactly(hashlib.sha256().digest_size)
        except TimeoutError:
            answer = b""
        if hmac.compare_digest(answer, proof(self.secret, nonce)):
            return True
        peer = writer.get_extra_info("peername")
        log.warning("raft: a connection from %s did not prove the cluster's secret, closed", peer)
        return False


class _Peer:
    """One outbound connection, reconnected with backoff; frames queue while it is down."""

    def __init__(self, transport: TcpTransport, address: Address) -> None:
        self.transport = transport
        self.address = address
        self.queue: deque[bytes] = deque()
        self.wakeup = asyncio.Event()
        self.alive = asyncio.Event()
        """Set when the peer was heard from: a reconnection waiting out its backoff tries
        at once (a restarted peer may be back long before a backoff ends)."""
        self.task = asyncio.get_running_loop().create_task(self._run())

    def _bound_unacked(self, sock: socket.socket | None) -> None:
        """TCP_USER_TIMEOUT (Linux) on a new connection; see the module docstring."""
        timeout_ms = self.transport.unacked_timeout_ms
        option = getattr(socket, "TCP_USER_TIMEOUT", None)
        if sock is not None and timeout_ms and option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, timeout_ms)

    def push(self, frame: bytes) -> None:
        if len(self.queue) >= self.transport.queue_limit:
            self.queue.popleft()
            self.transport.dropped += 1
        self.queue.append(frame)
        self.wakeup.set()

    def heard(self) -> None:
        self.alive.set()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def _run(self) -> None:
        backoff = self.transport.backoff[0]
        while True:
            writer: asyncio.StreamWriter | None = None
            closed: asyncio.Future[bytes] | None = None
            try:
                # asyncio.timeout, not wait_for: on 3.11 a wait_for cancelled just as the
                # connection completes loses (and leaks) it.
                async with asyncio.timeout(self.transport.connect_timeout):
                    reader, connected = await asyncio.open_connection(*self.address)
                    writer = connected
                    self._bound_unacked(connected.get_extra_info("socket"))
                    if self.transport.secret is not None:
                        nonce = await reader.readexactly(NONCE_BYTES)
                        connected.write(proof(self.transport.secret, nonce))
                backoff = self.transport.backoff[0]
                # the peer never writes on this connection: a read that returns is its close
                # (a restarted peer's old connection; written to, it would swallow frames)
                closed = asyncio.ensure_future(reader.read(1))
                while True:
                    if not self.queue:
                        self.wakeup.clear()
                        woken = asyncio.ensure_future(self.wakeup.wait())
                        try:
                            await asyncio.wait((closed, woken), return_when=asyncio.FIRST_COMPLETED)
                        finally:
                            woken.cancel()
                    if connected.is_closing() or closed.done():
                        raise ConnectionResetError("connection closed by the peer")
                    frames = b"".join(self.queue)
                    self.queue.clear()
                    connected.write(frames)
                    await connected.drain()
            except Exception as exc:  # OSError, or RuntimeError from uvloop
                # The peer is down: what was queued is stale by the time it is back.
                log.debug("raft: connection to %s lost: %r", self.address, exc)
                self.transport.connections_lost += 1
                self.transport.dropped += len(self.queue)
                self.queue.clear()
                self.alive.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):
                        await self.alive.wait()
                backoff = min(backoff * 2, self.transport.backoff[1])
            finally:
                if closed is not None:
                    closed.cancel()
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()
