"""Raft storage (files, recovery, compaction), the message codec, and the asyncio driver."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dataplane.raft.codec import CodecError, decode, encode
from dataplane.raft.errors import NotLeader, StorageCorrupt
from dataplane.raft.server import RaftServer, ServerConfig, choose_voters
from dataplane.raft.storage import LOG_FILE, STATE_FILE, RaftStorage
from dataplane.raft.transport import TcpTransport
from dataplane.raft.types import (
    AppendRequest,
    AppendResponse,
    Entry,
    EntryKind,
    HardState,
    Message,
    Snapshot,
    SnapshotRequest,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from tests.conftest import free_port


def entries(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(term, i, b"p%d" % i) for i in range(lo, hi + 1)]


def test_round_trip_and_group_fsync(tmp_path: Path) -> None:
    s = RaftStorage(tmp_path)
    s.persist(entries=entries(1, 100), hard_state=HardState(3, 2))
    assert s.fsyncs == 2  # one for 100 entries, one for the hard state
    s.close()
    s = RaftStorage(tmp_path)
    assert s.hard_state == HardState(3, 2)
    assert s.entries == entries(1, 100)
    s.close()


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    s = RaftStorage(tmp_path)
    s.persist(entries=entries(1, 10))
    s.close()
    path = tmp_path / LOG_FILE
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 3)  # the last frame is torn
    s = RaftStorage(tmp_path)
    assert s.entries == entries(1, 9)
    s.persist(entries=entries(10, 12))
    s.close()
    assert RaftStorage(tmp_path).entries == entries(1, 12)


def test_corrupt_frame_ends_the_log(tmp_path: Path) -> None:
    s = RaftStorage(tmp_path)
    s.persist(entries=entries(1, 10))
    s.close()
    path = tmp_path / LOG_FILE
    data = bytearray(path.read_bytes())
    data[-2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert RaftStorage(tmp_path).entries == entries(1, 9)


def test_truncating_a_conflicting_suffix(tmp_path: Path) -> None:
    s = RaftStorage(tmp_path)
    s.persist(entries=entries(1, 10))
    s.persist(truncate_from=6, entries=entries(6, 7, term=2))
    s.close()
    assert RaftStorage(tmp_path).entries == entries(1, 5) + entries(6, 7, term=2)


def test_compaction_keeps_the_entries_after_the_snapshot(tmp_path: Path) -> None:
    s = RaftStorage(tmp_path)
    s.persist(entries=entries(1, 10))
    s.persist(snapshot=Snapshot(6, 1, b"state"), entries=entries(11, 12))
    s.close()
    s = RaftStorage(tmp_path)
    assert s.snapshot == Snapshot(6, 1, b"state")
    assert s.entries == entries(7, 12)
    s.persist(entries=entries(13, 13))
    s.close()
    assert RaftStorage(tmp_path).entries == entries(7, 13)


def test_installed_snapshot_replaces_a_divergent_log(tmp_path: Path) -> None:
    s = RaftStorage(tmp_path)
    s.persist(entries=entries(1, 10))
    s.persist(snapshot=Snapshot(8, 2, b"leader"), truncate_from=9)
    s.close()
    s = RaftStorage(tmp_path)
    assert s.entries == []
    assert s.snapshot.index == 8
    s.persist(entries=entries(9, 9, term=2))
    s.close()
    assert RaftStorage(tmp_path).entries == entries(9, 9, term=2)


def test_crash_between_snapshot_install_and_log_rewrite(tmp_path: Path) -> None:
    """The snapshot file is new, the log is still the old divergent one: it is dropped."""
    s = RaftStorage(tmp_path)
    s.persist(entries=entries(1, 10))
    s.close()
    log_bytes = (tmp_path / LOG_FILE).read_bytes()
    s = RaftStorage(tmp_path)
    s.persist(snapshot=Snapshot(8, 2, b"leader"), truncate_from=9)
    s.close()
    (tmp_path / LOG_FILE).write_bytes(log_bytes)  # as if the rewrite never happened
    s = RaftStorage(tmp_path)
    assert s.entries == []
    assert s.snapshot.index == 8


def test_damaged_hard_state_is_an_error(tmp_path: Path) -> None:
    s = RaftStorage(tmp_path)
    s.persist(hard_state=HardState(1, 1))
    s.close()
    (tmp_path / STATE_FILE).write_bytes(b"junk")
    with pytest.raises(StorageCorrupt):
        RaftStorage(tmp_path)


def test_non_contiguous_append_is_refused(tmp_path: Path) -> None:
    s = RaftStorage(tmp_path)
    with pytest.raises(ValueError, match="contiguous"):
        s.persist(entries=entries(2, 3))


MESSAGES: list[Message] = [
    VoteRequest(1, 2, 5, 10, 4, pre_vote=True, transfer=False),
    VoteRequest(1, 2, 5, 10, 4, pre_vote=False, transfer=True),
    VoteResponse(2, 1, 5, granted=True, pre_vote=True),
    AppendRequest(1, 3, 7, 9, 6, (Entry(7, 10, b"a"), Entry(7, 11, b"", EntryKind.NOOP)), 8),
    AppendRequest(1, 3, 7, 9, 6, (), 8),
    AppendResponse(3, 1, 7, False, 0, 12, 9, 6),
    AppendResponse(3, 1, 7, True, 11),
    SnapshotRequest(1, 2, 7, Snapshot(100, 6, b"image")),
    TimeoutNow(1, 2, 7),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_codec_round_trip(message: Message) -> None:
    frame = encode(message)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode(frame[4:]) == message


def test_codec_golden_vector() -> None:
    assert encode(TimeoutNow(1, 2, 7)).hex() == "00000011" + "06" + "00000001" + "00000002" + (
        "0000000000000007"
    )


@pytest.mark.parametrize("cut", [1, 5, 20, 30])
def test_codec_refuses_truncated_frames(cut: int) -> None:
    frame = encode(MESSAGES[3])[4:]
    with pytest.raises(CodecError):
        decode(frame[:-cut])


def test_codec_refuses_unknown_types() -> None:
    with pytest.raises(CodecError):
        decode(b"\x63" + bytes(20))


def test_choose_voters() -> None:
    assert choose_voters([7]) == [7]
    assert choose_voters([2, 1]) == [1]
    assert choose_voters([5, 3, 9, 1]) == [1, 3, 5]


class KV:
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}

    def apply(self, index: int, payload: bytes) -> None:
        key, _, value = payload.partition(b"=")
        self.data[key] = value

    def snapshot(self) -> bytes:
        return b"\n".join(k + b"=" + v for k, v in sorted(self.data.items()))

    def restore(self, data: bytes) -> None:
        self.data = dict(line.partition(b"=")[::2] for line in data.split(b"\n") if line)


FAST = ServerConfig(tick_ms=10, election_ticks=10, heartbeat_ticks=2, snapshot_entries=20)


async def test_servers_over_tcp(tmp_path: Path) -> None:
    ids = [1, 2, 3]
    addresses = {i: ("127.0.0.1", free_port()) for i in ids}
    kvs = {i: KV() for i in ids}

    def make(i: int) -> RaftServer:
        return RaftServer(
            i, ids, tmp_path / f"n{i}", kvs[i], TcpTransport(i, addresses), config=FAST
        )

    servers = {i: make(i) for i in ids}
    for s in servers.values():
        await s.start()
    try:
        leader_id = await servers[1].wait_for_leader(10)
        await asyncio.sleep(0.05)
        leader = servers[leader_id]
        follower = next(i for i in ids if i != leader_id)
        with pytest.raises(NotLeader):
            await servers[follower].propose(b"x=1")
        # many concurrent proposals share fsyncs
        rounds = leader.fsync_rounds
        indexes = await asyncio.gather(*(leader.propose(b"k%d=%d" % (n, n)) for n in range(200)))
        assert sorted(indexes) == list(indexes)
        assert leader.fsync_rounds - rounds < 100
        await leader.transfer_leadership(follower)
        assert await servers[follower].wait_for_leader(5) == follower
        await servers[follower].propose(b"after=transfer")
        # restart a node from disk (its log was compacted: snapshot_entries=20)
        restarted = next(i for i in ids if i != follower)
        await servers[restarted].close()
        kvs[restarted] = KV()
        servers[restarted] = make(restarted)
        await servers[restarted].start()
        await servers[follower].propose(b"last=1")
        for _ in range(500):  # polls other servers' state: no event to wait on
            if all(kv.data.get(b"last") == b"1" for kv in kvs.values()):
                break
            await asyncio.sleep(0.02)
        assert all(kv.data == kvs[follower].data for kv in kvs.values())
        assert kvs[restarted].data[b"k199"] == b"199"
        assert (tmp_path / f"n{restarted}" / "raft.snapshot").exists()
    finally:
        for s in servers.values():
            await s.close()
