"""Unit tests of the sans-I/O Raft core: scripted scenarios on a synchronous network."""

from __future__ import annotations

import random

import pytest

from dataplane.raft.core import RaftConfig, RaftNode, Role
from dataplane.raft.errors import NotLeader
from dataplane.raft.types import (
    AppendRequest,
    AppendResponse,
    Entry,
    EntryKind,
    HardState,
    Message,
    SnapshotRequest,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from tests.dataplane.test_raft_simulation import Durable

CONFIG = RaftConfig(election_ticks=10, heartbeat_ticks=2)


class Net:
    """Nodes exchanging messages instantly; links can be cut; crashes keep durable state."""

    def __init__(self, size: int, config: RaftConfig = CONFIG, *, learners: int = 0) -> None:
        """``size`` voters (ids 1..size), then ``learners`` learners."""
        self.ids = list(range(1, size + learners + 1))
        self.voters = self.ids[:size]
        self.learners = self.ids[size:]
        self.config = config
        self.durable = {i: Durable() for i in self.ids}
        self.nodes: dict[int, RaftNode] = {}
        self.down: set[int] = set()
        self.cut: set[frozenset[int]] = set()
        self.applied: dict[int, list[bytes]] = {i: [] for i in self.ids}
        self.sent: list[Message] = []
        for i in self.ids:
            self.restart(i)

    def restart(self, i: int) -> None:
        d = self.durable[i]
        self.nodes[i] = RaftNode(
            i,
            self.voters,
            learners=self.learners,
            rng=random.Random(i),
            config=self.config,
            hard_state=d.hard_state,
            snapshot=d.snapshot,
            entries=list(d.entries),
        )
        self.down.discard(i)

    def crash(self, i: int) -> None:
        self.down.add(i)

    def isolate(self, i: int) -> None:
        self.cut |= {frozenset((i, j)) for j in self.ids if j != i}

    def set_learners(self, learners: list[int]) -> None:
        self.learners = learners
        for node in self.nodes.values():
            node.set_learners(learners)
        self.pump()

    def heal(self) -> None:
        self.cut = set()

    def pump(self) -> None:
        """Run every node's Readies and deliver messages until the network is quiet."""
        queue: list[Message] = []
        while True:
            for i in self.ids:
                node = self.nodes[i]
                while i not in self.down and node.has_ready():
                    rd = node.ready()
                    self.durable[i].persist_log(rd)
                    self.durable[i].persist_hard_state(rd)
                    queue.extend(rd.messages)
                    self.applied[i].extend(
                        e.payload for e in rd.committed if e.kind is EntryKind.DATA
                    )
                    node.advance(rd)
            if not queue:
                return
            batch, queue = queue, []
            for m in batch:
                self.sent.append(m)
                if m.dst not in self.down and frozenset((m.src, m.dst)) not in self.cut:
                    self.nodes[m.dst].step(m)

    def tick(self, i: int, n: int = 1) -> None:
        for _ in range(n):
            if i not in self.down:
                self.nodes[i].tick()
            self.pump()

    def tick_all(self, n: int = 1) -> None:
        for _ in range(n):
            for i in self.ids:
                if i not in self.down:
                    self.nodes[i].tick()
            self.pump()

    def elect(self, i: int) -> None:
        """Make ``i`` campaign now (its timer runs out) and win."""
        self.tick(i, 2 * self.config.election_ticks)
        assert self.nodes[i].role is Role.LEADER, self.nodes[i].role

    def leaders(self) -> list[int]:
        return [i for i in self.ids if i not in self.down and self.nodes[i].role is Role.LEADER]


def test_single_node_commits_at_once() -> None:
    net = Net(1)
    net.elect(1)
    index = net.nodes[1].propose(b"x")
    net.pump()
    assert net.nodes[1].commit_index == index
    assert net.applied[1] == [b"x"]


def test_three_nodes_elect_replicate_and_apply() -> None:
    net = Net(3)
    net.elect(1)
    for n in range(5):
        net.nodes[1].propose(b"v%d" % n)
    net.pump()
    net.tick_all(2)  # a heartbeat carries the commit index
    for i in net.ids:
        assert net.applied[i] == [b"v%d" % n for n in range(5)]
    with pytest.raises(NotLeader) as info:
        net.nodes[2].propose(b"no")
    assert info.value.leader_id == 1


def test_vote_once_per_term_and_only_for_up_to_date_logs() -> None:
    net = Net(3)
    node = net.nodes[1]
    node.step(VoteRequest(2, 1, 5, last_index=0, last_term=0))
    node.step(VoteRequest(3, 1, 5, last_index=0, last_term=0))
    rd = node.ready()
    grants = [(m.dst, m.granted) for m in rd.messages if isinstance(m, VoteResponse)]
    assert grants == [(2, True), (3, False)]
    assert rd.hard_state is not None
    assert (rd.hard_state.term, rd.hard_state.vote) == (5, 2)
    # a candidate whose log is behind ours gets no vote
    net2 = Net(3)
    net2.elect(1)
    net2.nodes[1].propose(b"x")
    net2.pump()
    voter = net2.nodes[2]
    voter.step(VoteRequest(3, 2, 9, last_index=0, last_term=0, transfer=True))  # no lease
    replies = [m for m in voter.ready().messages if isinstance(m, VoteResponse)]
    assert replies
    assert not replies[0].granted


def test_term_and_vote_survive_a_restart() -> None:
    """The raftos bug: a restart cleared the vote, so a node voted twice in one term."""
    net = Net(3)
    net.nodes[1].step(VoteRequest(2, 1, 7, last_index=0, last_term=0))
    net.pump()
    net.crash(1)
    net.restart(1)
    node = net.nodes[1]
    assert (node.term, node.vote) == (7, 2)
    node.step(VoteRequest(3, 1, 7, last_index=0, last_term=0))
    replies = [m for m in node.ready().messages if isinstance(m, VoteResponse)]
    assert [(m.dst, m.granted) for m in replies] == [(3, False)]


def test_votes_are_sent_only_with_the_hard_state_they_depend_on() -> None:
    node = Net(3).nodes[1]
    node.step(VoteRequest(2, 1, 3, last_index=0, last_term=0))
    rd = node.ready()
    assert rd.hard_state is not None
    assert rd.hard_state.vote == 2
    assert rd.messages  # the driver persists rd.hard_state before sending these


def test_pre_vote_does_not_disrupt_a_stable_leader() -> None:
    net = Net(3)
    net.elect(1)
    term = net.nodes[1].term
    net.isolate(3)
    net.tick(3, 100)  # alone, node 3 keeps pre-campaigning but never bumps its term
    assert net.nodes[3].term == term
    assert net.nodes[3].role is Role.PRE_CANDIDATE
    net.heal()
    net.tick_all(5)
    assert net.leaders() == [1]
    assert net.nodes[1].term == term
    assert all(net.nodes[i].term == term for i in net.ids)


def test_without_pre_vote_an_isolated_node_disrupts() -> None:
    """The counterpart: what pre-vote prevents."""
    net = Net(3, RaftConfig(election_ticks=10, heartbeat_ticks=2, pre_vote=False))
    net.elect(1)
    term = net.nodes[1].term
    net.isolate(3)
    net.tick(3, 100)
    assert net.nodes[3].term > term + 1


def test_check_quorum_makes_an_isolated_leader_step_down() -> None:
    net = Net(3)
    net.elect(1)
    net.isolate(1)
    net.tick(1, CONFIG.election_ticks * 2)
    assert net.nodes[1].role is Role.FOLLOWER
    with pytest.raises(NotLeader):
        net.nodes[1].propose(b"x")


def test_followers_in_lease_ignore_a_disruptive_candidate() -> None:
    net = Net(3)
    net.elect(1)
    term = net.nodes[1].term
    follower = net.nodes[2]
    follower.step(VoteRequest(3, 2, term + 5, follower.last_index, follower.last_term))
    assert follower.term == term
    assert not follower.ready().messages


def test_leader_transfer() -> None:
    net = Net(3)
    net.elect(1)
    net.nodes[1].propose(b"x")
    net.pump()
    net.nodes[1].transfer_leadership(3)
    net.pump()
    assert net.leaders() == [3]
    assert net.nodes[3].term == net.nodes[1].term
    with pytest.raises(NotLeader):
        net.nodes[1].propose(b"y")
    net.nodes[3].propose(b"y")
    net.pump()
    net.tick_all(2)
    assert net.applied[2] == [b"x", b"y"]


def test_a_follower_told_its_leader_is_gone_campaigns_at_once() -> None:
    """The supervisor saw the leader's process exit: the follower it tells campaigns with
    no tick (no election timeout), and the other follower, still in its lease of the dead
    leader, grants the vote (as after TimeoutNow); what was committed stays."""
    net = Net(3)
    net.elect(1)
    net.nodes[1].propose(b"x")
    net.pump()
    net.tick_all(2)
    net.crash(1)
    term = net.nodes[1].term
    assert not net.nodes[3].leader_gone(2)  # not its leader: nothing happens
    assert net.nodes[3].leader_id == 1
    assert net.nodes[3].leader_gone(1)
    net.pump()
    assert net.leaders() == [3]
    assert net.nodes[3].term == term + 1
    net.nodes[3].propose(b"y")
    net.pump()
    net.tick_all(2)
    assert net.applied[2] == [b"x", b"y"]


def test_a_longer_log_campaigns_when_a_stale_one_is_told_the_leader_is_gone() -> None:
    """The follower told that the leader is gone missed its last entries: the other
    follower refuses its vote and, its log being the longer one, campaigns at once."""
    net = Net(3)
    net.elect(1)
    net.cut.add(frozenset((1, 3)))
    net.nodes[1].propose(b"x")
    net.pump()
    assert net.nodes[3].last_index < net.nodes[2].last_index
    net.crash(1)
    net.heal()
    assert net.nodes[3].leader_gone(1)
    net.pump()
    assert net.leaders() == [2]
    net.tick_all(2)
    assert net.applied[3] == [b"x"]


def test_leader_gone_is_ignored_by_the_leader_and_by_learners() -> None:
    net = Net(3, learners=1)
    net.elect(1)
    assert not net.nodes[1].leader_gone(1)
    assert not net.nodes[4].leader_gone(1)
    net.pump()
    assert net.leaders() == [1]


def test_leader_refuses_proposals_while_transferring() -> None:
    net = Net(3)
    net.elect(1)
    net.isolate(2)
    net.nodes[1].transfer_leadership(2)
    with pytest.raises(NotLeader, match="transfer"):
        net.nodes[1].propose(b"x")
    net.tick(1, CONFIG.election_ticks)  # the transfer times out
    net.heal()
    net.pump()
    net.nodes[1].propose(b"x")


def test_old_term_entries_commit_only_through_a_current_term_entry() -> None:
    """Raft's figure 8: a leader must not commit an earlier term's entry by counting its
    replicas; it commits it with the first entry of its own term."""
    node = RaftNode(
        1,
        [1, 2, 3, 4, 5],
        rng=random.Random(1),
        config=CONFIG,
        hard_state=HardState(3, None),
        entries=[Entry(1, 1, b"a"), Entry(2, 2, b"b")],
    )
    for _ in range(2 * CONFIG.election_ticks):
        node.tick()
        if node.role is Role.PRE_CANDIDATE:
            break
    for voter in (2, 3):
        node.step(VoteResponse(voter, 1, 4, granted=True, pre_vote=True))
    assert node.role is Role.CANDIDATE
    for voter in (2, 3):
        node.step(VoteResponse(voter, 1, 4, granted=True))
    assert node.role is Role.LEADER
    node.advance(node.ready())  # its NOOP (term 4, index 3) is durable
    assert node.term_at(3) == 4
    for voter in (2, 3):
        node.step(AppendResponse(voter, 1, 4, True, match_index=2))
    assert node.commit_index == 0  # a majority holds index 2, but it is of term 2
    for voter in (2, 3):
        node.step(AppendResponse(voter, 1, 4, True, match_index=3))
    assert node.commit_index == 3


# --- learners -----------------------------------------------------------------------------


def test_learner_never_campaigns() -> None:
    net = Net(3, learners=2)
    net.elect(1)
    net.isolate(4)
    learner = net.nodes[4]
    term = learner.term
    net.tick(4, 10 * CONFIG.election_ticks)
    assert learner.role is Role.FOLLOWER
    assert learner.term == term
    assert not [m for m in net.sent if m.src == 4 and isinstance(m, VoteRequest)]
    # nor does a non-voter that was not told it is a learner, nor one told to campaign
    stranger = RaftNode(9, [1, 2, 3], rng=random.Random(9), config=CONFIG)
    assert not stranger.is_learner
    stranger.step(TimeoutNow(1, 9, 1))
    for _ in range(10 * CONFIG.election_ticks):
        stranger.tick()
    assert stranger.role is Role.FOLLOWER
    assert stranger.term == 1
    assert not stranger.ready().messages


def test_learner_does_not_vote() -> None:
    net = Net(3, learners=1)
    learner = net.nodes[4]
    assert learner.is_learner
    learner.step(VoteRequest(2, 4, 5, last_index=9, last_term=4))
    learner.step(VoteRequest(2, 4, 5, last_index=9, last_term=4, pre_vote=True))
    assert (learner.term, learner.vote) == (0, None)
    assert not learner.has_ready()
    # and voters never ask it
    net.elect(2)
    assert net.leaders() == [2]
    assert all(m.dst in net.voters for m in net.sent if isinstance(m, VoteRequest))


def test_learner_follows_and_applies() -> None:
    net = Net(3, learners=2)
    net.elect(1)
    for n in range(5):
        net.nodes[1].propose(b"v%d" % n)
    net.pump()
    net.tick_all(2)
    for i in (4, 5):
        assert net.applied[i] == [b"v%d" % n for n in range(5)]
        assert net.nodes[i].leader_id == 1
    # a newer leader is followed as well
    net.nodes[1].transfer_leadership(2)
    net.pump()
    net.nodes[2].propose(b"after")
    net.pump()
    net.tick_all(2)
    assert net.nodes[4].leader_id == 2
    assert net.nodes[4].term == net.nodes[2].term
    assert net.applied[4][-1] == b"after"


def test_commit_does_not_count_learners() -> None:
    """3 voters + 2 learners: both learners acknowledging is not a quorum."""
    net = Net(3, learners=2)
    net.elect(1)
    net.tick_all(2)
    leader = net.nodes[1]
    commit = leader.commit_index
    net.cut |= {frozenset((1, 2)), frozenset((1, 3))}
    index = leader.propose(b"x")
    net.pump()
    net.tick(1, CONFIG.heartbeat_ticks)
    assert net.nodes[4].last_index == net.nodes[5].last_index == index  # both acked it
    assert leader.commit_index == commit
    assert net.applied[4] == net.applied[5] == []
    # one voter more is a quorum (leader + 2); the learners learn the commit
    net.cut.discard(frozenset((1, 2)))
    net.tick(1, CONFIG.heartbeat_ticks)
    assert leader.commit_index == index
    net.tick(1, CONFIG.heartbeat_ticks)
    assert net.applied[4] == net.applied[5] == [b"x"]


def test_commit_counts_voters_even_with_more_learners() -> None:
    """The counting itself: learner acks at the new index do not move the commit."""
    net = Net(3, learners=2)
    net.elect(1)
    net.tick_all(2)
    leader = net.nodes[1]
    index = leader.propose(b"x")
    leader.advance(leader.ready())  # durable on the leader; the appends are "lost"
    term = leader.term
    for learner in (4, 5):
        leader.step(AppendResponse(learner, 1, term, True, match_index=index))
    assert leader.commit_index < index
    leader.step(AppendResponse(2, 1, term, True, match_index=index))
    assert leader.commit_index == index


def test_check_quorum_ignores_learners() -> None:
    net = Net(3, learners=2)
    net.elect(1)
    net.cut |= {frozenset((1, 2)), frozenset((1, 3))}  # the learners still answer
    net.tick(1, 2 * CONFIG.election_ticks)
    assert net.nodes[1].role is Role.FOLLOWER
    # a lone voter stays leader with every learner down (it is its own quorum)
    lone = Net(1, learners=2)
    lone.elect(1)
    lone.crash(2)
    lone.crash(3)
    lone.tick(1, 5 * CONFIG.election_ticks)
    assert lone.leaders() == [1]
    lone.nodes[1].propose(b"alone")
    lone.pump()
    assert lone.applied[1] == [b"alone"]


def test_leader_transfer_to_a_learner_is_refused() -> None:
    net = Net(3, learners=1)
    net.elect(1)
    with pytest.raises(ValueError, match="not a voter"):
        net.nodes[1].transfer_leadership(4)
    assert net.nodes[1].transferee is None
    net.nodes[1].propose(b"still leading")


def test_set_learners_replicates_to_a_new_learner_from_its_log() -> None:
    net = Net(3, learners=1)  # node 4 runs but nobody counts it as a learner yet
    net.set_learners([])
    net.elect(1)
    for n in range(5):
        net.nodes[1].propose(b"v%d" % n)
    net.pump()
    net.tick_all(2)
    assert net.nodes[4].last_index == 0
    assert not [m for m in net.sent if m.dst == 4]
    net.set_learners([4])
    net.tick_all(2)
    assert net.applied[4] == [b"v%d" % n for n in range(5)]
    # removed: the leader forgets it
    net.set_learners([])
    sent = len(net.sent)
    net.nodes[1].propose(b"more")
    net.pump()
    net.tick_all(2 * CONFIG.election_ticks)
    assert not [m for m in net.sent[sent:] if m.dst == 4]
    assert net.applied[4][-1] == b"v4"
    assert net.leaders() == [1]


def test_set_learners_sends_the_snapshot_when_the_log_is_compacted() -> None:
    net = Net(3, learners=1)
    net.set_learners([])
    net.elect(1)
    for n in range(5):
        net.nodes[1].propose(b"v%d" % n)
    net.pump()
    net.tick_all(2)
    leader = net.nodes[1]
    leader.compact(leader.applied_index, b"image")
    net.pump()
    leader.propose(b"after")
    net.pump()
    net.set_learners([4])
    net.tick_all(2)
    snaps = [m for m in net.sent if isinstance(m, SnapshotRequest) and m.dst == 4]
    assert [m.snapshot.data for m in snaps] == [b"image"]
    learner = net.nodes[4]
    assert learner.snapshot.index == leader.snapshot.index
    assert net.applied[4] == [b"after"]  # the rest came in the snapshot
    assert learner.applied_index == leader.applied_index == leader.last_index
    assert net.durable[4].snapshot.data == b"image"
    appends = [m for m in net.sent if isinstance(m, AppendRequest) and m.dst == 4]
    assert appends  # the probe, then the entries after the snapshot


def test_a_restarted_voter_of_a_leaderless_cluster_campaigns_within_one_election_timeout() -> None:
    """With ``quick_first_election`` (the brokers' setting) a node's first timeout is drawn
    from 1..E ticks instead of E..2E: after compound faults left no leader, a restarted
    voter campaigns at once instead of after up to two election timeouts. Without it, none
    of 20 differently seeded nodes campaigns within E ticks; with it, every one does, and
    pre-vote still keeps it from unseating a live leader."""
    quick = RaftConfig(election_ticks=10, heartbeat_ticks=2, quick_first_election=True)

    def campaigns_within(config: RaftConfig, seed: int, ticks: int) -> bool:
        node = RaftNode(1, [1, 2, 3], rng=random.Random(seed), config=config)
        for _ in range(ticks):
            node.tick()
            if node.role is not Role.FOLLOWER:
                return True
        return False

    assert not any(campaigns_within(CONFIG, seed, CONFIG.election_ticks - 1) for seed in range(20))
    assert all(campaigns_within(quick, seed, quick.election_ticks) for seed in range(20))

    net = Net(3, quick)
    net.elect(1)
    net.crash(3)
    net.restart(3)
    net.tick(3, quick.election_ticks)  # it pre-votes; 2 is in its lease of 1 and refuses
    assert net.leaders() == [1]
    assert net.nodes[1].term == net.nodes[3].term
