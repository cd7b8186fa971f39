"""A Raft node whose state machine cannot apply a committed entry stops, and says so.

Found by fuzzing the metadata log (tests/fuzz): an entry the image could not apply raised
inside the Raft server's loop task, which died without a word; the broker kept running
with a metadata image that no longer moved. Now the node stops, pending proposals fail,
and ``on_failure`` tells its owner (a broker halts, as Kafka's fatal fault handler does)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dataplane.raft.errors import RaftClosed
from dataplane.raft.server import RaftServer
from dataplane.raft.transport import LocalTransport


class Picky:
    """Applies anything but ``b"poison"``."""

    def __init__(self) -> None:
        self.applied: list[bytes] = []

    def apply(self, index: int, payload: bytes) -> None:
        if payload == b"poison":
            raise ValueError("cannot apply this entry")
        self.applied.append(payload)

    def snapshot(self) -> bytes:
        return b"".join(self.applied)

    def restore(self, data: bytes) -> None:
        self.applied = [data]


async def test_an_entry_that_cannot_be_applied_stops_the_node(tmp_path: Path) -> None:
    machine = Picky()
    failures: list[Exception] = []
    server = RaftServer(1, [1], tmp_path, machine, LocalTransport(1), on_failure=failures.append)
    await server.start()
    try:
        await server.wait_for_leader(10)
        await server.propose(b"fine")
        with pytest.raises((RaftClosed, asyncio.TimeoutError)):
            await asyncio.wait_for(server.propose(b"poison"), 10)
        assert len(failures) == 1
        assert "cannot apply this entry" in str(failures[0])
        with pytest.raises(RaftClosed):
            await server.propose(b"after")
        assert machine.applied == [b"fine"]
    finally:
        await server.close()
