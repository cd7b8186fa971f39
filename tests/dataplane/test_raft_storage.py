"""Raft storage (files, recovery, compaction), the message codec, and the asyncio driver."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from dataplane.raft.codec import CodecError, decode, encode
from dataplane.raft.errors import CommitUnknown, NotLeader, ProposalDropped, StorageCorrupt
from dataplane.raft.server import RaftServer, ServerConfig, choose_voters
from dataplane.raft.storage import LOG_FILE, STATE_FILE, RaftStorage
from dataplane.raft.transport import Address, LocalTransport, TcpTransport
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


async def eventually(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll ``cond`` (other servers' state: no event to wait on); generous, not a timing
    assertion."""
    for _ in range(int(timeout / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    assert cond()


async def propose_to_leader(servers: list[RaftServer], payload: bytes) -> RaftServer:
    """Propose through whichever server leads (leadership may move under a slow machine);
    the test payloads are idempotent, so a retry after an unknown outcome is harmless."""
    async with asyncio.timeout(20):
        while True:
            for s in servers:
                if s.is_leader:
                    try:
                        await s.propose(payload)
                    except (NotLeader, ProposalDropped, CommitUnknown):
                        continue
                    return s
            await asyncio.sleep(0.02)


async def test_lone_voter_with_local_transport(tmp_path: Path) -> None:
    """One voter, no learners: no port, commits after its own fsync; on_state_change."""
    kv = KV()
    changes: list[tuple[str, int, int | None]] = []

    def make() -> RaftServer:
        server: RaftServer

        def changed() -> None:
            changes.append((server.role, server.term, server.leader_id))

        server = RaftServer(
            7, [7], tmp_path, kv, LocalTransport(7), config=FAST, on_state_change=changed
        )
        return server

    server = make()
    await server.start()
    try:
        assert await server.wait_for_leader(10) == 7
        indexes = [await server.propose(b"k%d=%d" % (n, n)) for n in range(30)]
        assert indexes == sorted(indexes)
        assert server.applied_index >= indexes[-1]
        assert changes[-1] == ("leader", server.term, 7)
        assert isinstance(server.transport, LocalTransport)
        assert server.transport.dropped == 0  # nothing to send to anybody
    finally:
        await server.close()
    kv.data.clear()
    changes.clear()
    server = make()
    await server.start()
    try:
        assert kv.data[b"k15"] == b"15"  # from its snapshot (at index 20 or later)
        await server.propose(b"again=1")
        assert kv.data[b"k29"] == b"29"
        assert changes[-1][0] == "leader"
    finally:
        await server.close()


def learner_server(
    i: int,
    voters: dict[int, Address],
    own: Address,
    directory: Path,
    kv: KV,
    *,
    changes: list[tuple[str, int | None]] | None = None,
    told: bool,
) -> RaftServer:
    """A learner knows the voters' addresses and its own, nothing else."""
    server: RaftServer

    def changed() -> None:
        if changes is not None:
            changes.append((server.role, server.leader_id))

    server = RaftServer(
        i,
        voters,
        directory,
        kv,
        TcpTransport(i, {**voters, i: own}),
        config=FAST,
        learners=[i] if told else (),
        on_state_change=changed,
    )
    return server


async def test_one_voter_and_a_learner_over_tcp(tmp_path: Path) -> None:
    a1, a2 = ("127.0.0.1", free_port()), ("127.0.0.1", free_port())
    kv1, kv2 = KV(), KV()
    changes: list[tuple[str, int | None]] = []
    voter = RaftServer(
        1, [1], tmp_path / "n1", kv1, TcpTransport(1, {1: a1}), config=FAST, learners={2: a2}
    )
    learner = learner_server(2, {1: a1}, a2, tmp_path / "n2", kv2, changes=changes, told=True)
    await voter.start()
    await learner.start()
    try:
        assert learner.role == "learner"
        assert await voter.wait_for_leader(10) == 1
        await asyncio.gather(*(voter.propose(b"k%d=%d" % (n, n)) for n in range(50)))
        await eventually(lambda: kv2.data == kv1.data)
        assert await learner.wait_for_leader(10) == 1
        assert ("learner", 1) in changes
        with pytest.raises(NotLeader) as info:
            await learner.propose(b"x=1")
        assert info.value.leader_id == 1
        with pytest.raises(ValueError, match="not a voter"):
            await voter.transfer_leadership(2)
        # restart the learner from its own disk; the voter keeps committing meanwhile
        await learner.close()
        await voter.propose(b"while=down")
        kv2 = KV()
        learner = learner_server(2, {1: a1}, a2, tmp_path / "n2", kv2, told=True)
        await learner.start()
        assert kv2.data[b"k15"] == b"15"  # restored from its own snapshot, before any message
        await voter.propose(b"last=1")
        await eventually(lambda: kv2.data.get(b"last") == b"1")
        assert kv2.data == kv1.data
        assert learner.applied_index == voter.applied_index
        assert learner.role == "learner"
        assert learner.term == voter.term
    finally:
        await learner.close()
        await voter.close()


async def test_three_voters_and_a_learner_added_later(tmp_path: Path) -> None:
    ids = [1, 2, 3]
    voters = {i: ("127.0.0.1", free_port()) for i in ids}
    own = ("127.0.0.1", free_port())
    kvs = {i: KV() for i in [*ids, 4]}
    servers = {
        i: RaftServer(i, ids, tmp_path / f"n{i}", kvs[i], TcpTransport(i, voters), config=FAST)
        for i in ids
    }
    # not yet told it is a learner: it must simply wait
    learner = learner_server(4, voters, own, tmp_path / "n4", kvs[4], told=False)
    for s in [*servers.values(), learner]:
        await s.start()
    try:
        leader_id = await servers[1].wait_for_leader(10)
        leader = servers[leader_id]
        await asyncio.gather(*(leader.propose(b"k%d=%d" % (n, n)) for n in range(60)))
        assert learner.leader_id is None
        assert kvs[4].data == {}
        assert learner.role == "learner"
        # registered: every node is told (the leader's log is compacted: a snapshot)
        for s in [*servers.values(), learner]:
            s.set_learners({4: own})
        assert learner.node.is_learner
        await eventually(lambda: kvs[4].data == kvs[leader_id].data)
        assert (tmp_path / "n4" / "raft.snapshot").exists()
        # leadership moves; the learner follows the new leader
        term = learner.term
        other = next(i for i in ids if i != leader_id)
        await leader.transfer_leadership(other)
        voter_list = list(servers.values())
        leader = await propose_to_leader(voter_list, b"after=transfer")
        await eventually(lambda: kvs[4].data.get(b"after") == b"transfer")
        await eventually(
            lambda: (
                learner.leader_id in servers
                and servers[learner.leader_id].is_leader
                and learner.term > term
            )
        )
        # the learner restarts from its own disk
        await learner.close()
        await propose_to_leader(voter_list, b"while=down")
        kvs[4] = KV()
        learner = learner_server(4, voters, own, tmp_path / "n4", kvs[4], told=True)
        await learner.start()
        assert kvs[4].data  # its own snapshot
        leader = await propose_to_leader(voter_list, b"last=1")
        await eventually(lambda: kvs[4].data.get(b"last") == b"1")
        await eventually(lambda: kvs[4].data == kvs[leader.node_id].data)
        assert learner.role == "learner"
        # removed: the voters forget its address (and connection)
        for s in servers.values():
            s.set_learners({})
        for s in servers.values():
            assert isinstance(s.transport, TcpTransport)
            assert 4 not in s.transport.addresses
            assert s.transport.addresses == voters
        assert not leader.node.learners
    finally:
        for s in [*servers.values(), learner]:
            await s.close()


async def test_a_message_after_the_peer_restarted_reaches_its_new_process() -> None:
    """The peer restarted since the last frame sent to it: its old connection is seen closed
    at once (the peer never writes on it) and the next message goes out on a new one. It
    used to be written into the dead connection and lost: a vote request lost so was an
    election timeout (0.5-1 s) after a controller's kill."""
    addresses: dict[int, Address] = {1: ("127.0.0.1", free_port()), 2: ("127.0.0.1", free_port())}
    sender = TcpTransport(1, addresses)
    first: list[Message] = []
    peer = TcpTransport(2, addresses)
    await sender.start(lambda message: None)
    await peer.start(first.append)
    again: list[Message] = []
    restarted = TcpTransport(2, addresses)
    try:
        sender.send(VoteRequest(1, 2, 1, 0, 0))
        for _ in range(1000):
            if first:
                break
            await asyncio.sleep(0.01)
        assert first == [VoteRequest(1, 2, 1, 0, 0)]
        await peer.close()
        await restarted.start(again.append)
        for _ in range(1000):  # the sender notices the close without sending anything
            if sender.connections_lost:
                break
            await asyncio.sleep(0.01)
        assert sender.connections_lost == 1
        sender.send(VoteRequest(1, 2, 2, 0, 0, transfer=True))
        for _ in range(1000):
            if again:
                break
            await asyncio.sleep(0.01)
        assert again == [VoteRequest(1, 2, 2, 0, 0, transfer=True)]
    finally:
        await sender.close()
        await restarted.close()


async def test_a_peer_heard_from_is_reconnected_at_once_not_after_the_backoff() -> None:
    """A node whose connection attempts to a peer failed waits a growing backoff before the
    next (0.5 s at most). When the peer's own messages arrive, it is back: the waiting
    attempt is made at once, so the leader's next append reaches a restarted voter without
    waiting out the backoff (the soak's restarted brokers replayed their registration up
    to 1.9 s after the controller answered it). The backoff here is 10 minutes: only being
    heard from can end it within the test."""
    addresses: dict[int, Address] = {1: ("127.0.0.1", free_port()), 2: ("127.0.0.1", free_port())}
    sender = TcpTransport(1, addresses, backoff=(600, 600))
    received: list[Message] = []
    peer = TcpTransport(2, addresses)
    await sender.start(lambda message: None)
    try:
        sender.send(VoteRequest(1, 2, 1, 0, 0))  # refused: nobody listens yet
        for _ in range(1000):
            if sender.connections_lost:
                break
            await asyncio.sleep(0.01)
        assert sender.connections_lost == 1
        await peer.start(received.append)
        sender.send(VoteRequest(1, 2, 2, 0, 0))  # queued behind the 10-minute backoff
        peer.send(VoteRequest(2, 1, 2, 0, 0))  # the peer speaks: it is back
        for _ in range(3000):
            if received:
                break
            await asyncio.sleep(0.01)
        assert received == [VoteRequest(1, 2, 2, 0, 0)]
    finally:
        await sender.close()
        await peer.close()
