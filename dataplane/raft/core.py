"""The Raft state machine, sans I/O: events in, effects out.

``RaftNode`` has no clock, no sockets, no files and no randomness of its own (the election
timeout is drawn from an injected RNG). A driver feeds it events:

- ``step(message)``        a message from another node,
- ``tick()``               one unit of logical time (the driver decides how long a tick is),
- ``propose(payload)``     an application write (leader only),
- ``compact(index, data)`` the application took a snapshot at ``index``,
- ``transfer_leadership(to)``,
- ``leader_gone(leader)``   the driver learned from outside that ``leader`` is gone,
- ``set_learners(ids)``    the learner set changed,

and collects effects with ``ready()``, which hands out, in the order they must happen:

1. ``snapshot`` to write, then ``truncate_from`` (drop stored entries >= it), then
   ``entries`` to append, then ``hard_state`` (term, vote) to write — and make all of it
   durable (fsync);
2. only then send ``messages``: a vote or an append acknowledgement in a Ready depends on
   state persisted by that Ready or an earlier one;
3. ``restore`` the state machine from a snapshot installed from the leader, if any, then
   apply ``committed`` entries in order;
4. call ``advance(ready)``, which tells the node what is now durable (a leader counts its
   own log towards a commit only once it is durable).

Events may arrive between ``ready()`` and ``advance()`` (while the driver fsyncs); Readies
must be processed one at a time, in order.

The algorithm is Raft as in Ongaro's thesis, with the refinements etcd/raft uses:
pre-vote (§9.6), check-quorum with a follower lease (a voter that heard from a leader in
the last election timeout ignores vote requests, unless they come from a leader transfer),
leader transfer by TimeoutNow (§3.10), a NOOP entry at the start of each term, fast log
backtracking by conflicting term, pipelined replication with a probe state, and
retransmission on heartbeats (messages may be lost, reordered or duplicated).

Learners (non-voting members, like etcd's): the leader replicates to them as to any follower
and they apply the committed log, but never vote, campaign or count towards commit, election
or check-quorum. The learner set is data (``set_learners``, any time, on any node); the voter
set is fixed. A node whose id is not a voter never campaigns, knowing it is a learner or not.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dataplane.raft.errors import NotLeader
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


class Rng(Protocol):
    """The randomness a node needs (``random.Random`` fits)."""

    def randrange(self, stop: int, /) -> int: ...


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True)
class RaftConfig:
    """Timing in ticks and batching limits."""

    election_ticks: int = 10
    """Election timeout: a follower campaigns after a random wait in [E, 2E) ticks without
    hearing from a leader; a leader steps down (check-quorum) if it did not hear from a
    quorum within E ticks; a follower's lease is E ticks."""
    heartbeat_ticks: int = 2
    max_append_entries: int = 512
    """Most entries in one AppendEntries."""
    max_append_bytes: int = 1 << 20
    """Most payload bytes in one AppendEntries (at least one entry is always sent)."""
    pre_vote: bool = True
    check_quorum: bool = True
    quick_first_election: bool = False
    """First timeout in [1, E] ticks, not [E, 2E) (etcd's initial election tick advance)."""

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_ticks < self.election_ticks:
            raise ValueError("need 0 < heartbeat_ticks < election_ticks")
        if self.max_append_entries < 1:
            raise ValueError("max_append_entries must be at least 1")


@dataclass(frozen=True)
class Ready:
    """Effects to carry out, in field order (see the module docstring)."""

    snapshot: Snapshot | None
    truncate_from: int | None
    entries: tuple[Entry, ...]
    hard_state: HardState | None
    messages: tuple[Message, ...]
    restore: Snapshot | None
    committed: tuple[Entry, ...]

    @property
    def must_persist(self) -> bool:
        return bool(
            self.snapshot is not None
            or self.truncate_from is not None
            or self.entries
            or self.hard_state is not None
        )


class _Replication(enum.Enum):
    PROBE = 0
    """Next is a guess: at most one append in flight until the follower answers."""
    REPLICATE = 1
    """Follower is in step: appends are pipelined, ``next`` moves as they are sent."""
    SNAPSHOT = 2
    """A snapshot is in flight; resent if unanswered for an election timeout."""


@dataclass
class _Progress:
    match: int = 0
    next: int = 1
    state: _Replication = _Replication.PROBE
    probe_sent: bool = False
    active: bool = False
    """Heard from since the last check-quorum."""
    acked: bool = False
    """``match`` moved since the last heartbeat."""
    snapshot_index: int = 0
    snapshot_ticks: int = 0


@dataclass
class _Votes:
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


class RaftNode:
    """One Raft participant. See the module docstring for the protocol with its driver."""

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        *,
        rng: Rng,
        config: RaftConfig | None = None,
        hard_state: HardState | None = None,
        snapshot: Snapshot | None = None,
        entries: Sequence[Entry] = (),
        learners: Iterable[int] = (),
    ) -> None:
        """Start from durable state: the hard state, the snapshot and the log after it.

        ``learners`` are the non-voting members the leader replicates to (ids that are also
        voters are ignored)."""
        self.id = node_id
        self.voters = frozenset(voters)
        if not self.voters:
            raise ValueError("the voter set is empty")
        self.learners = frozenset(learners) - self.voters
        self.config = config or RaftConfig()
        self._rng = rng
        hs = hard_state or HardState()
        self._snap = snapshot or Snapshot()
        self._log: list[Entry] = list(entries)
        for offset, entry in enumerate(self._log):
            if entry.index != self._snap.index + 1 + offset:
                raise ValueError("log entries do not follow the snapshot contiguously")
        # A crash between writing entries and the hard state can leave entries of a later
        # term than the stored one: the term never goes backwards.
        self.term = max(hs.term, self.last_term)
        self.vote = hs.vote if hs.term == self.term else None
        self.leader_id: int | None = None
        self.role = Role.FOLLOWER
        self.commit_index = self._snap.index
        self.applied_index = self._snap.index
        self._stable = self.last_index
        self._unstable_from = self.last_index + 1
        self._truncate_from: int | None = None
        self._snap_unstable: Snapshot | None = None
        self._restore: Snapshot | None = None
        self._hs_handed = HardState(hs.term, hs.vote)
        self._msgs: list[Message] = []
        self._votes = _Votes()
        self._progress: dict[int, _Progress] = {}
        self._bcast_pending = False
        self._transferee: int | None = None
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._randomized_timeout = 0
        self._reset_timer()
        if self.config.quick_first_election:
            self._randomized_timeout -= self.config.election_ticks - 1

    # --- log ----------------------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        return self._snap

    @property
    def first_index(self) -> int:
        return self._snap.index + 1

    @property
    def last_index(self) -> int:
        return self._snap.index + len(self._log)

    @property
    def last_term(self) -> int:
        return self._log[-1].term if self._log else self._snap.term

    @property
    def is_voter(self) -> bool:
        return self.id in self.voters

    @property
    def is_learner(self) -> bool:
        """This node is a known learner (a non-voter not yet told it is one is neither)."""
        return self.id in self.learners

    @property
    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def transferee(self) -> int | None:
        return self._transferee

    def term_at(self, index: int) -> int | None:
        """Term of the entry at ``index``; None when compacted away or beyond the log."""
        offset = index - self._snap.index
        if offset == 0:
            return self._snap.term
        if offset < 0 or offset > len(self._log):
            return None
        return self._log[offset - 1].term

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Entries with lo <= index <= hi that are in memory (not compacted)."""
        base = self._snap.index + 1
        return self._log[max(lo, base) - base : max(hi + 1 - base, 0)]

    def _truncate(self, index: int) -> None:
        """Drop entries >= index (never committed ones)."""
        assert index > self.commit_index, "truncating a committed entry"
        del self._log[index - self._snap.index - 1 :]
        self._stable = min(self._stable, index - 1)
        if index < self._unstable_from:
            self._unstable_from = index
            if self._truncate_from is None or index < self._truncate_from:
                self._truncate_from = index

    def _find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest index <= ``index`` whose term is <= ``term``, and its term."""
        index = min(index, self.last_index)
        while index > self._snap.index:
            t = self._log[index - self._snap.index - 1].term
            if t <= term:
                return index, t
            index -= 1
        return index, self.term_at(index) or 0

    # --- the driver interface -----------------------------------------------------------

    def has_ready(self) -> bool:
        return bool(
            self._msgs
            or self._bcast_pending
            or self._snap_unstable is not None
            or self._truncate_from is not None
            or self._unstable_from <= self.last_index
            or self._hs_handed.term != self.term
            or self._hs_handed.vote != self.vote
            or self._restore is not None
            or self.commit_index > self.applied_index
        )

    def ready(self) -> Ready:
        """Hand out every pending effect (see the module docstring for their order)."""
        if self._bcast_pending:
            self._bcast_pending = False
            if self.role is Role.LEADER:
                for peer in self._progress:
                    self._send_append(peer, allow_empty=False)
        hard_state = None
        if self._hs_handed.term != self.term or self._hs_handed.vote != self.vote:
            hard_state = self._hs_handed = HardState(self.term, self.vote)
        entries = tuple(self.entries(self._unstable_from, self.last_index))
        self._unstable_from = self.last_index + 1
        committed: tuple[Entry, ...] = ()
        upto = min(self.commit_index, self.last_index)
        if upto > self.applied_index:
            committed = tuple(self.entries(self.applied_index + 1, upto))
            self.applied_index = upto
        ready = Ready(
            snapshot=self._snap_unstable,
            truncate_from=self._truncate_from,
            entries=entries,
            hard_state=hard_state,
            messages=tuple(self._msgs),
            restore=self._restore,
            committed=committed,
        )
        self._snap_unstable = self._truncate_from = self._restore = None
        self._msgs = []
        return ready

    def advance(self, ready: Ready) -> None:
        """Everything ``ready`` asked to persist is durable now."""
        stable = self._stable
        if ready.snapshot is not None and ready.snapshot.index <= self.last_index:
            stable = max(stable, min(ready.snapshot.index, self._snap.index))
        if ready.entries:
            last = ready.entries[-1]
            if self.term_at(last.index) == last.term:
                stable = max(stable, last.index)
        if stable != self._stable:
            self._stable = stable
            if self.role is Role.LEADER and self._maybe_commit():
                # Our own fsync completed the quorum (always so with a lone voter): tell
                # the followers and learners now rather than at the next heartbeat.
                for peer in self._progress:
                    self._send_commit(peer)

    def tick(self) -> None:
        if self.role is Role.LEADER:
            self._tick_leader()
        else:
            self._election_elapsed += 1
            if self.id in self.voters and self._election_elapsed >= self._randomized_timeout:
                self._reset_timer()
                self._hup(transfer=False)

    def propose(self, payload: bytes) -> int:
        """Append ``payload`` to the log; return its index (leader only)."""
        return self.propose_many([payload])[0]

    def propose_many(self, payloads: Sequence[bytes]) -> list[int]:
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id)
        if self._transferee is not None:
            raise NotLeader(self._transferee, "leadership transfer in progress")
        first = self.last_index + 1
        self._log.extend(Entry(self.term, first + i, p) for i, p in enumerate(payloads))
        self._bcast_pending = True
        return list(range(first, self.last_index + 1))

    def compact(self, index: int, data: bytes) -> None:
        """The application's state after applying ``index`` is ``data``: make it the
        snapshot and drop the log up to ``index``."""
        if index <= self._snap.index:
            return
        if index > self.applied_index:
            raise ValueError(f"snapshot at {index} is beyond the applied index")
        term = self.term_at(index)
        assert term is not None
        del self._log[: index - self._snap.index]
        self._snap = self._snap_unstable = Snapshot(index, term, data)

    def transfer_leadership(self, to: int) -> None:
        """Hand leadership to the voter ``to`` (ValueError for a learner or a stranger)."""
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id)
        if to not in self.voters:
            raise ValueError(f"node {to} is not a voter")
        if to == self.id:
            self._transferee = None
            return
        self._transferee = to
        self._election_elapsed = 0
        progress = self._progress[to]
        if progress.match == self.last_index:
            self._send(TimeoutNow(self.id, to, self.term))
        else:
            self._send_append(to, allow_empty=False)

    def leader_gone(self, leader: int) -> bool:
        """Told from outside that the node ``leader`` is gone (its supervisor saw its
        process exit): a voter that follows it campaigns now, as on TimeoutNow (no pre-vote;
        voters still in their lease of that leader grant the vote), instead of after an
        election timeout. As safe as any election: a vote still needs an up-to-date log, and
        a leader that is not gone after all steps down at the higher term. True if this
        node campaigns; False when it leads, is not a voter or follows another leader."""
        if self.role is Role.LEADER or self.id not in self.voters or self.leader_id != leader:
            return False
        self._hup(transfer=True)
        return True

    def set_learners(self, ids: Iterable[int]) -> None:
        """Replace the learner set (voters in ``ids`` are ignored). Any node, any time: a
        leader starts replicating to new learners (probing from its last index down, or
        sending its snapshot if their log is behind it) and forgets removed ones; other
        nodes only record the set."""
        learners = frozenset(ids) - self.voters
        if learners == self.learners:
            return
        self.learners = learners
        if self.role is not Role.LEADER:
            return
        for peer in [p for p in self._progress if p not in self.voters and p not in learners]:
            del self._progress[peer]
        for peer in sorted(learners - self._progress.keys()):
            self._progress[peer] = _Progress(next=self.last_index + 1)
            self._send_append(peer, allow_empty=True)

    # --- timers and roles ---------------------------------------------------------------

    def _reset_timer(self) -> None:
        self._election_elapsed = 0
        if self.voters == {self.id}:
            # A lone voter needs nobody's vote: no reason to wait for a rival's heartbeat.
            self._randomized_timeout = 1
            return
        election = self.config.election_ticks
        self._randomized_timeout = election + self._rng.randrange(election)

    def _tick_leader(self) -> None:
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        if self._election_elapsed >= self.config.election_ticks:
            self._election_elapsed = 0
            if self.config.check_quorum:
                active = 1 + sum(
                    1 for peer, p in self._progress.items() if p.active and peer in self.voters
                )
                for p in self._progress.values():
                    p.active = False
                if active < self.quorum:
                    self._become_follower(self.term, None)
                    return
            self._transferee = None
        if self._heartbeat_elapsed >= self.config.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self._heartbeat()

    def _become_follower(self, term: int, leader: int | None) -> None:
        if term != self.term:
            self.term = term
            self.vote = None
        self.role = Role.FOLLOWER
        self.leader_id = leader
        self._progress = {}
        self._transferee = None
        self._bcast_pending = False
        self._reset_timer()

    def _hup(self, *, transfer: bool) -> None:
        if self.role is Role.LEADER or self.id not in self.voters:
            return
        self._campaign(pre_vote=self.config.pre_vote and not transfer, transfer=transfer)

    def _campaign(self, *, pre_vote: bool, transfer: bool) -> None:
        self._votes = _Votes()
        self.leader_id = None
        self._reset_timer()
        if pre_vote:
            self.role = Role.PRE_CANDIDATE
            vote_term = self.term + 1
        else:
            self.role = Role.CANDIDATE
            self.term += 1
            self.vote = self.id
            vote_term = self.term
        if self._poll(self.id, granted=True):
            return
        for peer in sorted(self.voters - {self.id}):
            self._send(
                VoteRequest(
                    self.id,
                    peer,
                    vote_term,
                    self.last_index,
                    self.last_term,
                    pre_vote=pre_vote,
                    transfer=transfer,
                )
            )

    def _poll(self, voter: int, *, granted: bool) -> bool:
        """Count a vote; win or lose the election when decided. True if decided."""
        if voter in self._votes.granted or voter in self._votes.rejected:
            return False
        (self._votes.granted if granted else self._votes.rejected).add(voter)
        if len(self._votes.granted) >= self.quorum:
            if self.role is Role.PRE_CANDIDATE:
                self._campaign(pre_vote=False, transfer=False)
            else:
                self._become_leader()
            return True
        if len(self._votes.rejected) > len(self.voters) - self.quorum:
            self._become_follower(self.term, None)
            return True
        return False

    def _become_leader(self) -> None:
        self.role = Role.LEADER
        self.leader_id = self.id
        self._transferee = None
        self._heartbeat_elapsed = 0
        self._election_elapsed = 0
        nxt = self.last_index + 1
        peers = sorted((self.voters | self.learners) - {self.id})
        self._progress = {p: _Progress(next=nxt) for p in peers}
        self._log.append(Entry(self.term, nxt, b"", EntryKind.NOOP))
        self._bcast_pending = True

    # --- messages -----------------------------------------------------------------------

    def _send(self, message: Message) -> None:
        self._msgs.append(message)

    def step(self, m: Message) -> None:  # noqa: C901, PLR0912 - the Raft state machine's step, as in the paper
        """Handle a message from another node."""
        if m.dst != self.id or m.src == self.id:
            return
        if isinstance(m, VoteRequest) and self.id not in self.voters:
            return  # a learner never votes (voters do not ask it; this is a stray message)
        if m.term > self.term:
            if isinstance(m, VoteRequest):
                in_lease = (
                    self.config.check_quorum
                    and self.leader_id is not None
                    and self._election_elapsed < self.config.election_ticks
                )
                if in_lease and not m.transfer:
                    return
                if not m.pre_vote:
                    self._become_follower(m.term, None)
            elif isinstance(m, VoteResponse) and m.pre_vote and m.granted:
                pass  # pre-votes are granted at the term we would campaign in
            elif isinstance(m, AppendRequest | SnapshotRequest):
                self._become_follower(m.term, m.src)
            else:
                self._become_follower(m.term, None)
        elif m.term < self.term:
            if isinstance(m, AppendRequest | SnapshotRequest) and (
                self.config.check_quorum or self.config.pre_vote
            ):
                # Tell a stale leader about the newer term (otherwise it never learns it
                # from us: we ignore its appends and our votes do not reach it).
                self._send(AppendResponse(self.id, m.src, self.term, success=False))
            elif isinstance(m, VoteRequest) and m.pre_vote:
                self._send(VoteResponse(self.id, m.src, self.term, granted=False, pre_vote=True))
            return

        if isinstance(m, VoteRequest):
            self._handle_vote(m)
        elif isinstance(m, VoteResponse):
            self._handle_vote_response(m)
        elif isinstance(m, AppendRequest):
            if self._accept_leader(m.src):
                self._handle_append(m)
        elif isinstance(m, SnapshotRequest):
            if self._accept_leader(m.src):
                self._handle_snapshot(m)
        elif isinstance(m, AppendResponse):
            if self.role is Role.LEADER:
                self._handle_append_response(m)
        elif isinstance(m, TimeoutNow) and self.role is Role.FOLLOWER:
            self._hup(transfer=True)

    def _accept_leader(self, leader: int) -> bool:
        if self.role is Role.LEADER:
            return False  # cannot happen: one leader per term
        if self.role is not Role.FOLLOWER:
            self._become_follower(self.term, leader)
        self.leader_id = leader
        self._election_elapsed = 0
        return True

    def _handle_vote(self, m: VoteRequest) -> None:
        last_term = self.last_term
        up_to_date = m.last_term > last_term or (
            m.last_term == last_term and m.last_index >= self.last_index
        )
        can_vote = (
            self.vote == m.src
            or (self.vote is None and self.leader_id is None)
            or (m.pre_vote and m.term > self.term)
        )
        if can_vote and up_to_date:
            self._send(VoteResponse(self.id, m.src, m.term, granted=True, pre_vote=m.pre_vote))
            if not m.pre_vote:
                self.vote = m.src
                self._election_elapsed = 0
        else:
            self._send(VoteResponse(self.id, m.src, self.term, granted=False, pre_vote=m.pre_vote))
            if m.transfer and not up_to_date and self.role is Role.FOLLOWER:
                # the candidate was told the leader is gone (or is a transferee), but this
                # log is the longer one: it campaigns itself now, not after a timeout
                self._hup(transfer=True)

    def _handle_vote_response(self, m: VoteResponse) -> None:
        if m.src not in self.voters:
            return
        if m.pre_vote:
            if self.role is not Role.PRE_CANDIDATE:
                return
            if m.granted and m.term != self.term + 1:
                return  # from an earlier pre-campaign
        elif self.role is not Role.CANDIDATE:
            return
        self._poll(m.src, granted=m.granted)

    def _handle_append(self, m: AppendRequest) -> None:
        if m.prev_index < self.commit_index:
            self._send(
                AppendResponse(self.id, m.src, self.term, True, match_index=self.commit_index)
            )
            return
        if self.term_at(m.prev_index) != m.prev_term:
            hint, hint_term = self._find_conflict_by_term(m.prev_index, m.prev_term)
            self._send(
                AppendResponse(
                    self.id,
                    m.src,
                    self.term,
                    False,
                    reject_index=m.prev_index,
                    hint_index=hint,
                    hint_term=hint_term,
                )
            )
            return
        entries = m.entries
        last_new = m.prev_index + len(entries)
        if entries:
            last = self.last_index
            for pos, entry in enumerate(entries):
                if entry.index > last:
                    self._log.extend(entries[pos:])
                    break
                if self.term_at(entry.index) != entry.term:
                    self._truncate(entry.index)
                    self._log.extend(entries[pos:])
                    break
        commit = min(m.commit, last_new)
        self.commit_index = max(self.commit_index, commit)
        self._send(AppendResponse(self.id, m.src, self.term, True, match_index=last_new))

    def _handle_snapshot(self, m: SnapshotRequest) -> None:
        snap = m.snapshot
        if snap.index <= self.commit_index:
            match = self.commit_index
        elif self.term_at(snap.index) == snap.term:
            # We hold that entry: the log up to it matches; just commit it.
            self.commit_index = match = snap.index
        else:
            self._snap = self._snap_unstable = self._restore = snap
            self._log = []
            self.commit_index = self.applied_index = match = snap.index
            self._stable = min(self._stable, snap.index)
            self._unstable_from = snap.index + 1
            if self._truncate_from is None or self._truncate_from > snap.index + 1:
                self._truncate_from = snap.index + 1
        self._send(AppendResponse(self.id, m.src, self.term, True, match_index=match))

    # --- leader -------------------------------------------------------------------------

    def _maybe_commit(self) -> bool:
        """Commit what a quorum of voters holds durably (learners do not count)."""
        voters = (p.match for peer, p in self._progress.items() if peer in self.voters)
        matches = sorted([self._stable, *voters])
        candidate = matches[len(matches) - self.quorum]
        if candidate > self.commit_index and self.term_at(candidate) == self.term:
            self.commit_index = candidate
            return True
        return False

    def _send_append(self, peer: int, *, allow_empty: bool) -> None:
        pr = self._progress[peer]
        if pr.state is _Replication.SNAPSHOT:
            return
        if pr.state is _Replication.PROBE and pr.probe_sent:
            return
        prev = pr.next - 1
        prev_term = self.term_at(prev)
        if prev_term is None:
            self._send_snapshot(peer)
            return
        entries = self._batch_from(pr.next)
        if not entries and not allow_empty:
            return
        self._send(
            AppendRequest(self.id, peer, self.term, prev, prev_term, entries, self.commit_index)
        )
        if pr.state is _Replication.REPLICATE:
            if entries:
                pr.next = entries[-1].index + 1
        else:
            pr.probe_sent = True

    def _batch_from(self, index: int) -> tuple[Entry, ...]:
        base = self._snap.index + 1
        lo = index - base
        hi = min(len(self._log), lo + self.config.max_append_entries)
        if lo >= hi:
            return ()
        budget = self.config.max_append_bytes
        end = lo
        while end < hi:
            budget -= len(self._log[end].payload)
            if budget < 0 and end > lo:
                break
            end += 1
        return tuple(self._log[lo:end])

    def _send_snapshot(self, peer: int) -> None:
        pr = self._progress[peer]
        pr.state = _Replication.SNAPSHOT
        pr.snapshot_index = self._snap.index
        pr.snapshot_ticks = 0
        self._send(SnapshotRequest(self.id, peer, self.term, self._snap))

    def _send_commit(self, peer: int) -> None:
        """Tell ``peer`` the new commit index: with new entries if there are any to send,
        otherwise in an empty append at its match index (which it surely holds)."""
        pr = self._progress[peer]
        if pr.state is _Replication.REPLICATE and pr.next <= self.last_index:
            self._send_append(peer, allow_empty=False)
            return
        prev_term = self.term_at(pr.match)
        if pr.state is _Replication.REPLICATE and prev_term is not None:
            self._send(
                AppendRequest(self.id, peer, self.term, pr.match, prev_term, (), self.commit_index)
            )

    def _heartbeat(self) -> None:
        last = self.last_index
        for peer, pr in self._progress.items():
            if pr.state is _Replication.SNAPSHOT:
                pr.snapshot_ticks += self.config.heartbeat_ticks
                if pr.snapshot_ticks >= self.config.election_ticks:
                    self._send_snapshot(peer)
                continue
            prev_term = self.term_at(pr.match)
            if (pr.match < last and not pr.acked) or prev_term is None:
                # Nothing acknowledged for a heartbeat interval: resend from the match.
                pr.next = pr.match + 1
                pr.probe_sent = False
                self._send_append(peer, allow_empty=True)
            else:
                self._send(
                    AppendRequest(
                        self.id, peer, self.term, pr.match, prev_term, (), self.commit_index
                    )
                )
            pr.acked = False

    def _handle_append_response(self, m: AppendResponse) -> None:
        pr = self._progress.get(m.src)
        if pr is None:
            return
        pr.active = True
        if not m.success:
            if m.reject_index <= pr.match:
                return  # stale, or from a lower term
            probe, _ = self._find_conflict_by_term(m.hint_index, m.hint_term)
            pr.next = max(pr.match + 1, min(m.reject_index, probe + 1))
            pr.state = _Replication.PROBE
            pr.probe_sent = False
            self._send_append(m.src, allow_empty=True)
            return
        if m.match_index > pr.match:
            pr.match = m.match_index
            pr.acked = True
        pr.probe_sent = False
        if pr.state is _Replication.SNAPSHOT:
            if pr.match < pr.snapshot_index:
                return
            pr.state = _Replication.PROBE
        if pr.state is _Replication.PROBE:
            pr.state = _Replication.REPLICATE
            pr.next = pr.match + 1
        pr.next = max(pr.next, pr.match + 1)
        if self._maybe_commit():
            for peer in self._progress:
                self._send_commit(peer)
        elif pr.match < self.last_index:
            self._send_append(m.src, allow_empty=False)
        if self._transferee == m.src and pr.match == self.last_index:
            self._send(TimeoutNow(self.id, m.src, self.term))
