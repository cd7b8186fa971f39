"""Bounded memory against hostile or broken clients (issue 15): the bytes of large frames the
broker holds are capped by queued.max.request.bytes (a connection over the cap is not read
until memory is given back: backpressure, not growth), and max.connections.per.ip caps the
connections of one address.

Before the cap, six connections each sending 90 MB of a 100 MB frame took a broker from
80 MB to 696 MB resident."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from tests.conftest import BrokerProcess
from tests.support.raw_client import RawClient

MIB = 1024 * 1024
CAP = 64 * MIB
FRAME = 40 * MIB
SENDERS = 6
PER_IP = 12


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker per test: connections held back by the cap keep their slot until the
    broker reads from them again (a paused socket does not see its peer close), as
    Kafka's muted channels do."""
    settings = {"queued.max.request.bytes": str(CAP), "max.connections.per.ip": str(PER_IP)}
    proc = BrokerProcess(tmp_path / "data", settings).start()
    yield proc
    proc.stop()
    proc.kill()


def api_versions_ok(bootstrap: str) -> bool:
    with RawClient(bootstrap) as client:
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        return bool(client.request(request).error_code == ErrorCode.none)


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        lines = status.read().splitlines()
    for line in lines:
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def connect(bootstrap: str) -> socket.socket:
    host, _, port = bootstrap.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_large_frames_in_flight_are_capped(capped: BrokerProcess) -> None:
    assert capped.proc is not None
    pid = capped.proc.pid
    before = rss(pid)
    chunk = b"\0" * MIB
    senders = []
    try:
        for _ in range(SENDERS):
            s = connect(capped.bootstrap)
            s.setblocking(False)
            senders.append([s, struct.pack(">i", FRAME), FRAME - MIB])
        # write 39 MB of each 40 MB frame, as far as each connection takes it (until no
        # connection has taken anything for 2 s)
        deadline = time.monotonic() + 60
        last_progress = time.monotonic()
        while time.monotonic() < deadline and any(left > 0 for _, _, left in senders):
            if time.monotonic() - last_progress > 2:
                break
            progressed = False
            for entry in senders:
                s, head, left = entry
                if left <= 0:
                    continue
                data = head + chunk[: min(MIB, left)] if head else chunk[: min(MIB, left)]
                try:
                    sent = s.send(data)
                except BlockingIOError:
                    continue
                progressed = True
                used = min(sent, len(head))
                entry[1] = head[used:]
                entry[2] = left - (sent - used)
            if progressed:
                last_progress = time.monotonic()
            else:
                time.sleep(0.05)
        stuck = sum(1 for _, _, left in senders if left > 0)
        time.sleep(1)
        grown = rss(pid) - before
        # at most CAP (or one frame when nothing else is held) of frames, plus slack for
        # kernel-to-buffer copies; without the cap: SENDERS x FRAME = 240 MiB
        assert grown < CAP + FRAME // 2, f"resident memory grew {grown / MIB:.0f} MiB"
        assert stuck >= SENDERS - CAP // FRAME, "the senders over the cap were not held back"
        # the broker keeps answering others
        assert api_versions_ok(capped.bootstrap)
    finally:
        for s, _, _ in senders:
            s.close()
    assert api_versions_ok(capped.bootstrap)


def test_connections_per_address_are_capped(capped: BrokerProcess) -> None:
    held = [connect(capped.bootstrap) for _ in range(PER_IP)]
    try:
        time.sleep(0.5)
        extra = connect(capped.bootstrap)
        extra.settimeout(10)
        assert extra.recv(1) == b"", "the connection over max.connections.per.ip stays open"
        extra.close()
        held.pop().close()
        time.sleep(0.5)
        assert api_versions_ok(capped.bootstrap), "a freed slot is usable again"
    finally:
        for s in held:
            s.close()
