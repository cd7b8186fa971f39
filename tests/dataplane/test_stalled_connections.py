"""Connections between brokers that stop moving are dropped and opened again.

A peer that died behind a network partition never delivers its reset: bytes sent to it sit
in the kernel's retransmission backoff (seconds apart, for up to 15 minutes), and every
frame behind them waits, so a Raft leader's appends or a follower's fetches stall after
the partition heals. The soak found a 10-second stall of this kind. Two bounds now apply:
TCP_USER_TIMEOUT on Raft and inter-broker connections, and a request that times out
closes its connection (as Kafka's NetworkClient does).

The blackhole test builds a network namespace of its own (a veth pair, an nftables rule
in the namespace) and removes it after; it needs root and ``nft`` (``make test`` installs
nftables)."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from dataplane.config import BrokerConfig
from dataplane.raft.transport import TcpTransport
from dataplane.raft.types import AppendRequest, Entry
from tests.support.processes import free_port
from wire.client import Channel, ConnectFailed

SINK = """
import socket, sys, threading
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
def drain(conn):
    while conn.recv(65536):
        pass
while True:
    conn, _ = server.accept()
    print("accepted", flush=True)
    threading.Thread(target=drain, args=(conn,), daemon=True).start()
"""
"""A peer that accepts connections, reads and discards, and says when it accepts."""


PROBE = ApiVersionsRequest(client_software_name="t", client_software_version="1")


def run(*args: str, ns: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", ns] if ns else []
    subprocess.run([*prefix, *args], check=True, capture_output=True, text=True)


class Namespace:
    """A network namespace joined to this one by a veth pair (10.213.N.1 here, .2 there)."""

    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.name = f"slt-{tag}"
        self.link = f"slt{tag}"
        subnet = int(tag, 16) % 250 + 1
        self.here = f"10.213.{subnet}.1"
        self.there = f"10.213.{subnet}.2"

    def create(self) -> None:
        run("ip", "netns", "add", self.name)
        run(
            "ip",
            "link",
            "add",
            self.link,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            self.name,
        )
        run("ip", "addr", "add", f"{self.here}/30", "dev", self.link)
        run("ip", "link", "set", self.link, "up")
        run("ip", "addr", "add", f"{self.there}/30", "dev", "eth0", ns=self.name)
        run("ip", "link", "set", "eth0", "up", ns=self.name)
        run("ip", "link", "set", "lo", "up", ns=self.name)

    def blackhole(self, on: bool) -> None:
        """Drop every packet the namespace receives (on) or none (off)."""
        subprocess.run(
            ["ip", "netns", "exec", self.name, "nft", "delete", "table", "inet", "stall"],
            capture_output=True,
            check=False,
        )
        if on:
            script = (
                "table inet stall {\n  chain input {\n"
                "    type filter hook input priority 0; policy drop;\n  }\n}\n"
            )
            subprocess.run(
                ["ip", "netns", "exec", self.name, "nft", "-f", "-"],
                input=script,
                text=True,
                check=True,
                capture_output=True,
            )

    def remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.link], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a network namespace and drop its packets")
    if shutil.which("nft") is None or shutil.which("ip") is None:
        pytest.skip("needs ip and nft (make test installs nftables; apt-get was not available)")
    ns = Namespace()
    try:
        ns.create()
        yield ns
    finally:
        ns.remove()


class Sink:
    """The SINK script, run inside the namespace."""

    def __init__(self, ns: Namespace, port: int) -> None:
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns.name, sys.executable, "-c", SINK, ns.there, str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.next_line() == "listening"

    def next_line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def heartbeat(term: int) -> AppendRequest:
    """An append of one 1 KiB entry from node 1 to node 2."""
    entry = Entry(term=term, index=term, payload=b"x" * 1024)
    return AppendRequest(
        src=1, dst=2, term=term, prev_index=0, prev_term=0, entries=(entry,), commit=0
    )


async def wait_until(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:g} s")
        await asyncio.sleep(0.05)


async def test_a_raft_connection_into_a_blackhole_is_dropped_and_opened_again(
    namespace: Namespace,
) -> None:
    port = free_port()
    sink = Sink(namespace, port)
    transport = TcpTransport(
        1,
        {1: ("127.0.0.1", free_port()), 2: (namespace.there, port)},
        unacked_timeout_ms=500,
    )
    await transport.start(lambda message: None)
    loop = asyncio.get_running_loop()
    try:
        transport.send(heartbeat(1))
        assert await loop.run_in_executor(None, sink.next_line) == "accepted"
        namespace.blackhole(True)
        # frames go out and are never acknowledged; without the bound the kernel would
        # keep retrying this connection for about 15 minutes
        term = 2

        def stalled() -> bool:
            nonlocal term
            term += 1
            transport.send(heartbeat(term))
            return transport.connections_lost > 0

        await wait_until(stalled, 30, "the stalled connection was not dropped")
        namespace.blackhole(False)
        transport.send(heartbeat(term + 1))
        line = await asyncio.wait_for(loop.run_in_executor(None, sink.next_line), 30)
        assert line == "accepted"  # a new connection reached the peer
    finally:
        namespace.blackhole(False)
        await transport.close()
        sink.stop()


async def test_an_inter_broker_connection_carries_the_bound() -> None:
    """The same bound is set on a Channel's socket, and a request that times out closes
    its connection: the next one opens a new connection."""
    accepted: list[asyncio.StreamWriter] = []
    closed = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        while await reader.read(65536):
            pass  # reads requests, answers none
        closed.set()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    channel = Channel("127.0.0.1", port, client_id="test", unacked_timeout_ms=1234)
    try:
        await channel.connect()
        writer = channel._writer
        assert writer is not None
        sock: socket.socket = writer.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 1234
        with pytest.raises(TimeoutError):
            await channel.request(PROBE, timeout=0.2)
        await asyncio.wait_for(closed.wait(), 10)  # the server saw its connection end
        assert channel.timeouts == 1
        with pytest.raises(TimeoutError):
            await channel.request(PROBE, timeout=0.2)
        assert len(accepted) == 2
    finally:
        await channel.close()
        server.close()
        await server.wait_closed()


async def test_a_request_bounds_its_connection_attempt_by_its_own_timeout(
    namespace: Namespace,
) -> None:
    """A request's timeout covers opening its connection. A restarted broker asks the
    voters in turn for the controller, giving each guess one election timeout; one whose
    SYN was lost (a healing partition, a lossy link) held the registration for the
    kernel's retransmission, a second later (the soak's start-up lines: a first guess
    answered after 1.0 s where 0.5 s was given), or for the channel's connect timeout.
    A second request waiting for that same connection attempt is bounded alike."""
    port = free_port()
    sink = Sink(namespace, port)
    namespace.blackhole(True)
    channel = Channel(namespace.there, port, client_id="test", connect_timeout=600)
    try:
        outcomes = await asyncio.wait_for(
            asyncio.gather(
                channel.request(PROBE, timeout=0.3),
                channel.request(PROBE, timeout=0.3),
                return_exceptions=True,
            ),
            60,  # far beyond the requests' own bound: before, they waited for 600 s
        )
        assert all(isinstance(x, ConnectFailed) for x in outcomes), outcomes
    finally:
        namespace.blackhole(False)
        await channel.close()
        sink.stop()


def test_the_bounds_have_config_keys() -> None:
    config = BrokerConfig.build(data_dir=str(Path("/nonexistent")), listen="127.0.0.1:0")
    assert config.get_int("controller.quorum.request.timeout.ms") == 2000
    assert config.get_int("inter.broker.unacked.timeout.ms") == 3000


async def test_a_channel_tells_when_the_broker_ends_its_connection() -> None:
    """``on_peer_close`` runs when the broker's side closes the connection (a dead
    process's kernel does), not when this side drops it after a timeout."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        while await reader.read(65536):
            pass
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    channel = Channel("127.0.0.1", port, client_id="test")
    closes: list[int] = []
    channel.on_peer_close = lambda: closes.append(1)
    try:
        with pytest.raises(TimeoutError):
            await channel.request(PROBE, timeout=0.2)  # this side drops the connection
        await asyncio.sleep(0.1)
        assert closes == []
        pending = asyncio.ensure_future(channel.request(PROBE, timeout=30))
        await wait_until(lambda: len(accepted) == 2, 10, "the second connection")
        accepted[1].close()  # the broker's side ends it
        with pytest.raises(OSError):
            await pending
        assert closes == [1]
    finally:
        await channel.close()
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
