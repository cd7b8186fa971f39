"""The asyncio driver: a ``RaftNode`` with a real clock, real storage and a transport.

One task runs the node's Readies one at a time: persist (snapshot, log, hard state; one
fsync for all the entries, in a worker thread), then send the messages, then restore /
apply, then ``advance``. Events (messages, ticks, proposals) keep arriving on the event
loop while a Ready is being fsynced; they all land in the next Ready, so the number of
fsyncs per second stays bounded however many proposals come in (group commit).

The application gives a ``StateMachine``; ``propose`` resolves once its entry is applied.

Learners: ``RaftServer(..., learners=...)`` and ``set_learners({id: (host, port)})``, which
updates the node's learner set and the transport's address book. A learner is started like
a voter, with the voters' addresses and its own (it never campaigns: its id is not a voter).
``on_state_change`` is called on the event loop whenever the leader, the term or the role
changed (after the Ready that changed it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dataplane.raft.core import RaftConfig, RaftNode, Ready, Role
from dataplane.raft.errors import CommitUnknown, NotLeader, ProposalDropped, RaftClosed
from dataplane.raft.storage import RaftStorage
from dataplane.raft.transport import Address, Transport
from dataplane.raft.types import EntryKind, Message

log = logging.getLogger(__name__)

_Seen = tuple[int | None, int, Role]
"""What ``on_state_change`` watches: leader id, term, role."""


class StateMachine(Protocol):
    """The replicated application state. Calls come from the event loop, in log order."""

    def apply(self, index: int, payload: bytes) -> None:
        """Apply the committed entry at ``index`` (deterministically)."""

    def snapshot(self) -> bytes:
        """The whole state, as ``restore`` reads it."""

    def restore(self, data: bytes) -> None:
        """Replace the whole state by a snapshot's."""


def choose_voters(brokers: Collection[int]) -> list[int]:
    """The voter set for a cluster: 3 voters from 3 brokers up, otherwise 1 (the lowest
    ids, so every broker computes the same set)."""
    ordered = sorted(brokers)
    return ordered[:3] if len(ordered) >= 3 else ordered[:1]


@dataclass(frozen=True)
class ServerConfig:
    tick_ms: float = 50.0
    election_ticks: int = 10
    """Election timeout 500-1000 ms with the default tick."""
    heartbeat_ticks: int = 2
    """Heartbeat every 100 ms with the default tick."""
    snapshot_entries: int = 10_000
    """Snapshot the state machine (and compact the log) after this many applied entries."""
    max_append_entries: int = 512
    max_append_bytes: int = 1 << 20
    quick_first_election: bool = True
    """A (re)started node's first election timeout is 1 to E ticks, not E to 2E: a restarted
    voter of a cluster that compound faults left without a leader campaigns at once (the
    soak's restarted brokers waited for a controller to be elected); pre-vote keeps it from
    disturbing a live leader, whose voters are in their lease and refuse it."""

    def raft_config(self) -> RaftConfig:
        return RaftConfig(
            election_ticks=self.election_ticks,
            heartbeat_ticks=self.heartbeat_ticks,
            max_append_entries=self.max_append_entries,
            max_append_bytes=self.max_append_bytes,
            quick_first_election=self.quick_first_election,
        )


class RaftServer:
    def __init__(
        self,
        node_id: int,
        voters: Collection[int],
        directory: Path,
        state_machine: StateMachine,
        transport: Transport,
        *,
        config: ServerConfig | None = None,
        rng: random.Random | None = None,
        learners: Collection[int] | Mapping[int, Address] = (),
        on_state_change: Callable[[], None] | None = None,
        on_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        """``learners``: ids, or ``{id: (host, port)}`` to also tell the transport where
        they listen (as ``set_learners`` does). ``on_state_change``: see the module doc.
        ``on_failure``: called once the node has stopped because its log could not be
        written (a full or failed disk) or an entry could not be applied: a broker halts
        then, as Kafka's fatal fault handler does."""
        self.on_failure = on_failure
        self.node_id = node_id
        self.voters = sorted(voters)
        self.learners: frozenset[int] = frozenset(learners) - set(self.voters)
        self._learner_addresses: dict[int, Address] = {}
        if isinstance(learners, Mapping):
            self._learner_addresses = {
                i: a for i, a in learners.items() if i in self.learners and i != node_id
            }
        self.on_state_change = on_state_change
        self.directory = Path(directory)
        self.state_machine = state_machine
        self.transport = transport
        self.config = config or ServerConfig()
        self._rng = rng or random.Random()  # noqa: S311 - election jitter, not crypto
        self._node: RaftNode | None = None
        self._storage: RaftStorage | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"raft-{node_id}-fsync")
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._pending: dict[int, tuple[int, asyncio.Future[int]]] = {}
        self._leader_changed = asyncio.Event()
        self._seen: _Seen = (None, 0, Role.FOLLOWER)
        self._closed: BaseException | None = None
        self.fsync_rounds = 0

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        storage = self._storage = await asyncio.to_thread(RaftStorage, self.directory)
        if storage.snapshot.index:
            self.state_machine.restore(storage.snapshot.data)
        self._node = RaftNode(
            self.node_id,
            self.voters,
            rng=self._rng,
            config=self.config.raft_config(),
            hard_state=storage.hard_state,
            snapshot=storage.snapshot,
            entries=storage.entries,
            learners=self.learners,
        )
        storage.entries = []  # the node holds them now
        node = self._node
        self._seen = (node.leader_id, node.term, node.role)
        if node.voters == {self.node_id}:
            node.tick()  # a lone voter elects itself at once: propose works after start()
            self._wake.set()
        for peer, address in self._learner_addresses.items():
            self.transport.set_address(peer, address)
        await self.transport.start(self._on_message)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()), loop.create_task(self._ticker())]

    async def close(self) -> None:
        if self._closed is None:
            self._closed = RaftClosed("server closed")
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.transport.close()
        self._fail_pending(RaftClosed("server closed"))
        self._executor.shutdown(wait=True)
        if self._storage is not None:
            self._storage.close()

    @property
    def node(self) -> RaftNode:
        if self._node is None:
            raise RaftClosed("server not started")
        return self._node

    @property
    def leader_id(self) -> int | None:
        return self.node.leader_id

    @property
    def term(self) -> int:
        return self.node.term

    @property
    def is_leader(self) -> bool:
        return self.node.role is Role.LEADER

    @property
    def applied_index(self) -> int:
        return self.node.applied_index

    @property
    def role(self) -> str:
        """The role as text: leader, follower, pre-candidate, candidate, or learner for a
        node whose id is not a voter (whether or not it was told it is a learner yet)."""
        node = self.node
        return "learner" if not node.is_voter else node.role.value

    def set_learners(self, learners: Mapping[int, Address]) -> None:
        """Replace the learner set by ``learners`` (id -> Raft listening address). Voters
        and this node's own id keep their addresses; a removed learner's address is
        forgotten and its connection dropped. Callable before ``start`` and at any time on
        the event loop (also from ``StateMachine.apply``) on any node."""
        voters = set(self.voters)
        ids = frozenset(learners) - voters
        addresses = {i: learners[i] for i in ids if i != self.node_id}
        if self._node is not None:
            for peer in self._learner_addresses.keys() - addresses.keys():
                self.transport.set_address(peer, None)
            for peer, address in addresses.items():
                self.transport.set_address(peer, address)
            self._node.set_learners(ids)
            self._wake.set()
        self.learners = ids
        self._learner_addresses = addresses

    # --- application API ----------------------------------------------------------------

    async def propose(self, payload: bytes) -> int:
        """Replicate ``payload``; return its index once committed and applied here.

        Raises ``NotLeader`` (with a leader hint) if this node is not the leader,
        ``ProposalDropped`` if a new leader overwrote the entry, ``CommitUnknown`` if the
        outcome cannot be known here, ``RaftClosed`` if the server stopped.
        """
        return (await self.propose_many([payload]))[0]

    async def propose_many(self, payloads: Sequence[bytes]) -> list[int]:
        if self._closed is not None:
            raise RaftClosed(str(self._closed))
        node = self.node
        indexes = node.propose_many(payloads)
        loop = asyncio.get_running_loop()
        futures = []
        for index in indexes:
            future: asyncio.Future[int] = loop.create_future()
            self._pending[index] = (node.term, future)
            futures.append(future)
        self._wake.set()
        return list(await asyncio.gather(*futures))

    async def wait_for_leader(self, timeout: float) -> int:
        """The leader's id, once this node knows one."""
        async with asyncio.timeout(timeout):
            while self.node.leader_id is None:
                self._leader_changed.clear()
                await self._leader_changed.wait()
        leader = self.node.leader_id
        assert leader is not None
        return leader

    async def transfer_leadership(self, to: int, timeout: float = 5.0) -> None:
        """Hand leadership to ``to``; returns once this node learns that ``to`` leads."""
        self.node.transfer_leadership(to)
        self._wake.set()
        async with asyncio.timeout(timeout):
            while self.node.leader_id != to:
                self._leader_changed.clear()
                await self._leader_changed.wait()

    def leader_gone(self, leader: int) -> bool:
        """``RaftNode.leader_gone``: campaign now if this voter follows ``leader``."""
        campaigning = self.node.leader_gone(leader)
        self._wake.set()
        return campaigning

    # --- the loop -----------------------------------------------------------------------

    def _on_message(self, message: Message) -> None:
        if self._node is not None and self._closed is None:
            self._node.step(message)
            self._wake.set()

    async def _ticker(self) -> None:
        interval = self.config.tick_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.node.tick()
            self._wake.set()

    def _observe(self, node: RaftNode, seen: _Seen) -> _Seen:
        """Signal a change of leader, term or role; return the new state."""
        now = (node.leader_id, node.term, node.role)
        if now == seen:
            return seen
        if now[0] != seen[0]:
            self._leader_changed.set()
        why = ""
        if seen[2] is Role.LEADER and now[2] is Role.FOLLOWER and now[1] == seen[1]:
            why = " (stepped down: no quorum heard within the election timeout)"
        log.info(
            "raft %d: %s at term %d, leader %s%s",
            self.node_id,
            self.role,
            now[1],
            "none" if now[0] is None else now[0],
            why,
        )
        if self.on_state_change is not None:
            try:
                self.on_state_change()
            except Exception:
                log.exception("raft: on_state_change failed")
        return now

    async def _run(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an entry the state machine cannot apply: a bug
            log.exception("raft: node %d stops", self.node_id)
            self._stop_on(exc)

    def _stop_on(self, exc: Exception) -> None:
        self._closed = exc
        self._fail_pending(RaftClosed(f"raft stopped: {exc}"))
        if self.on_failure is not None:
            self.on_failure(exc)

    async def _loop(self) -> None:
        node = self.node
        storage = self._storage
        assert storage is not None
        loop = asyncio.get_running_loop()
        seen = self._seen
        while True:
            await self._wake.wait()
            self._wake.clear()
            while node.has_ready():
                rd = node.ready()
                if rd.must_persist:
                    persist = functools.partial(
                        storage.persist,
                        snapshot=rd.snapshot,
                        truncate_from=rd.truncate_from,
                        entries=rd.entries,
                        hard_state=rd.hard_state,
                    )
                    try:
                        await loop.run_in_executor(self._executor, persist)
                    except OSError as exc:
                        log.exception("raft: storage failed, node %d stops", self.node_id)
                        self._stop_on(exc)
                        return
                    self.fsync_rounds += 1
                for m in rd.messages:
                    self.transport.send(m)
                self._apply(rd)
                node.advance(rd)
                self._maybe_snapshot(node)
                seen = self._observe(node, seen)
            # Stepping down (check-quorum) changes the role without a Ready.
            seen = self._observe(node, seen)

    def _apply(self, rd: Ready) -> None:
        if rd.restore is not None:
            snap = rd.restore
            self.state_machine.restore(snap.data)
            for index in [i for i in self._pending if i <= snap.index]:
                term, future = self._pending.pop(index)
                if future.done():
                    continue
                if index == snap.index and term == snap.term:
                    future.set_result(index)
                else:
                    future.set_exception(CommitUnknown(f"entry {index} folded into a snapshot"))
        for e in rd.committed:
            if e.kind is EntryKind.DATA:
                self.state_machine.apply(e.index, e.payload)
            pending = self._pending.pop(e.index, None)
            if pending is None or pending[1].done():
                continue
            if pending[0] == e.term:
                pending[1].set_result(e.index)
            else:
                pending[1].set_exception(
                    ProposalDropped(f"entry {e.index} was overwritten by term {e.term}")
                )

    def _maybe_snapshot(self, node: RaftNode) -> None:
        if node.applied_index - node.snapshot.index >= self.config.snapshot_entries:
            node.compact(node.applied_index, self.state_machine.snapshot())
            self._wake.set()

    def _fail_pending(self, exc: Exception) -> None:
        pending, self._pending = self._pending, {}
        for _, future in pending.values():
            if not future.done():
                future.set_exception(exc)


__all__ = [
    "CommitUnknown",
    "NotLeader",
    "ProposalDropped",
    "RaftClosed",
    "RaftServer",
    "ServerConfig",
    "StateMachine",
    "choose_voters",
]
