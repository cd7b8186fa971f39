"""The quorum controller: the one broker (the Raft leader) that decides metadata changes.

It runs on every voter and acts only while its Raft node leads. Every decision is a list of
records committed to the metadata log; nothing changes until the commit, and every broker
(this one included) learns the result by replaying the log into its image. Decisions are
made one at a time (``lock``), against an image that holds everything committed before
(a new controller first commits an empty entry of its own term).

What it decides:
- broker registration (a new epoch), heartbeats and fencing: a broker silent for
  ``broker.session.timeout.ms`` is fenced — it leaves every ISR (unless it is the last
  member) and a new leader is elected from the ISR (never outside it unless
  ``unclean.leader.election.enable``);
- topics, partitions, replica placement, configs, producer-id blocks;
- ISR changes asked for by partition leaders (AlterPartition), checked against the
  partition's leader epoch and partition epoch;
- preferred-leader elections once the preferred replica is back in the ISR;
- reassignments: add the target replicas, wait for them to join the ISR, drop the others;
- remote-tier metadata sent by partition leaders (a segment's copy started / finished, its
  deletion, the log start offset), checked against the partition's leader and epoch; and
  the deletion of a deleted topic's objects (``remote_cleanup``, a callback the broker
  provides), retried until it succeeds, then recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from dataplane.cluster import records as r
from dataplane.cluster.changes import Changes
from dataplane.cluster.image import MetadataImage, PartitionState
from dataplane.raft.errors import NotLeader, RaftError
from tiered.remote_segment import COPY_FINISHED, COPY_STARTED, DELETE_STARTED, RemoteSegment
from wire.errors import (
    BrokerError,
    BrokerNotAvailable,
    FencedLeaderEpoch,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidUpdateVersion,
    NoReassignmentInProgress,
    NotController,
    StaleBrokerEpoch,
    UnknownTopicOrPartition,
)

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.raft.server import RaftServer

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class IsrChange:
    """One partition's ISR change, as its leader asks for it (AlterPartition)."""

    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]


PRODUCER_ID_LIMIT = 2**63 - 1
ACTIVATION_WAIT_S = 10.0


class QuorumController:
    def __init__(self, image: MetadataImage, raft: RaftServer, config: BrokerConfig) -> None:
        self.image = image
        self.raft = raft
        self.config = config
        self.lock = asyncio.Lock()
        self._deadlines: dict[int, float] = {}
        """Broker id -> monotonic time its session ends, while this controller is active."""
        self._ready = asyncio.Event()
        self._term = -1
        self._tasks: list[asyncio.Task[None]] = []
        self._last_other_leader: int | None = None
        """The last other node seen leading: an election usually means it died."""
        self.remote_cleanup: Callable[[str, str], Awaitable[None]] | None = None
        """Deletes every object of a deleted topic (topic id, name); set by the broker."""

    # ------------------------------------------------------------------ activation

    @property
    def active(self) -> bool:
        return self.raft.is_leader and self._ready.is_set() and self._term == self.raft.term

    def on_raft_change(self) -> None:
        """Called after every Raft role/term/leader change."""
        leader = self.raft.leader_id
        if leader is not None and leader != self.raft.node_id:
            self._last_other_leader = leader
        if self.raft.is_leader and self._term != self.raft.term:
            self._term = self.raft.term
            self._ready.clear()
            self._cancel_tasks()
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._activate(self._term))]
        elif not self.raft.is_leader and self._term != -1:
            log.info("controller inactive (term %d)", self.raft.term)
            self._term = -1
            self._ready.clear()
            self._cancel_tasks()

    async def _activate(self, term: int) -> None:
        while self.raft.is_leader and self.raft.term == term:
            try:
                await self.raft.propose(r.encode([]))
                break
            except RaftError as exc:
                log.info("controller activation retry: %s", exc)
                await asyncio.sleep(0.05)
        if not (self.raft.is_leader and self.raft.term == term):
            return
        timeout = self._session_timeout()
        now = time.monotonic()
        self._deadlines = dict.fromkeys(self.image.brokers, now + timeout)
        previous = self._last_other_leader
        if previous is not None and previous in self._deadlines:
            # the broker that led before this election has most likely died: it must
            # heartbeat within a few intervals or be fenced, instead of a whole session
            interval = self.config.get_seconds("broker.heartbeat.interval.ms")
            self._deadlines[previous] = now + min(timeout, max(4 * interval, 0.5))
        self._ready.set()
        log.info("controller active (term %d, %d brokers)", term, len(self.image.brokers))
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._fence_loop()))
        self._tasks.append(loop.create_task(self._preferred_leader_loop()))
        self._tasks.append(loop.create_task(self._remote_cleanup_loop()))

    def _cancel_tasks(self) -> None:
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self._tasks = []

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_active(self, timeout: float) -> None:
        """Wait until this controller is active; NotController if it is not the leader."""
        if not self.raft.is_leader:
            raise NotController(f"broker {self.raft.node_id} is not the active controller")
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            raise NotController("the controller is still starting; retry") from None
        if not self.active:
            raise NotController(f"broker {self.raft.node_id} is not the active controller")

    async def commit(self, records: Sequence[r.Record]) -> int:
        """Commit ``records`` to the metadata log; they are applied to the image on return.
        Returns the entry's index."""
        if not self.active:
            raise NotController(f"broker {self.raft.node_id} is not the active controller")
        try:
            return await self.raft.propose(r.encode(list(records)))
        except NotLeader as exc:
            raise NotController(str(exc)) from exc
        except RaftError as exc:
            raise NotController(f"metadata commit failed: {exc}; retry") from exc

    async def decide(self, decision: Callable[[Changes], T | Awaitable[T]]) -> T:
        """The one path for a decision: under the lock, against an image that holds every
        earlier decision, ``decision(changes)`` reads what it needs and records changes;
        they commit as one entry before this returns its answer. Reading and committing are
        one step: no other decision runs in between, and nothing read before the lock is
        used. On failure nothing is committed and the changes' follow-ups are dropped."""
        async with self.lock:
            await self.wait_active(ACTIVATION_WAIT_S)
            changes = Changes(self)
            try:
                answer = decision(changes)
                if isinstance(answer, Awaitable):
                    answer = await answer
                if changes.records:
                    await self.commit(changes.records)
            except BaseException:
                changes.discard_after()
                raise
        for follow_up in changes.after:
            await follow_up
        return answer

    def _session_timeout(self) -> float:
        return self.config.get_seconds("broker.session.timeout.ms")

    # ------------------------------------------------------------------ producer ids

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """A block of producer ids for ``broker_id`` (KIP-730): (first id, length). The block
        is in the metadata log before it is returned, so no other broker, restart or later
        controller hands out any of its ids."""
        async with self.lock:
            await self.wait_active(ACTIVATION_WAIT_S)
            known = self.image.brokers.get(broker_id)
            if known is None or known.epoch != broker_epoch or known.fenced:
                raise StaleBrokerEpoch(
                    f"broker {broker_id} epoch {broker_epoch} is not registered and unfenced"
                )
            size = self.config.get_int("producer.id.block.size")
            start = self.image.next_producer_id
            if start > PRODUCER_ID_LIMIT - size:
                raise BrokerError("producer ids are exhausted")
            await self.commit([r.ProducerIds(start + size, broker_id)])
            log.info("producer ids %d-%d for broker %d", start, start + size - 1, broker_id)
            return start, size

    # ------------------------------------------------------------------ brokers

    async def register(  # noqa: PLR0917 - the fields of a registration
        self,
        broker_id: int,
        host: str,
        port: int,
        raft_host: str,
        raft_port: int,
        incarnation: str,
        endpoints: dict[str, list[Any]] | None = None,
    ) -> int:
        """Register (or re-register) a broker; its new epoch. ``endpoints``: every Kafka
        listener's advertised [host, port] by name."""
        asked = time.monotonic()
        async with self.lock:
            await self.wait_active(5)
            locked = time.monotonic()
            known = self.image.brokers.get(broker_id)
            if known is not None and known.incarnation == incarnation and not known.fenced:
                self._deadlines[broker_id] = time.monotonic() + self._session_timeout()
                return known.epoch
            if known is not None and not known.fenced:
                # A new incarnation: the process that held the old registration is gone (its
                # waiting writes, its high watermark). Leadership moves at once to the rest of
                # the ISR, as if its session had expired; the new process catches up as a
                # follower and the preferred-leader check gives its partitions back.
                fenced = self.fence_records(broker_id)
                log.info(
                    "broker %d restarted (new incarnation): fencing the old one "
                    "(%d partition changes)",
                    broker_id,
                    len(fenced) - 1,
                )
                await self.commit(fenced)
            epoch = self.raft.node.last_index + 1
            records: list[r.Record] = [
                r.RegisterBroker(
                    broker_id,
                    epoch,
                    host,
                    port,
                    raft_host,
                    raft_port,
                    incarnation,
                    dict(endpoints or {}),
                )
            ]
            records += self._elect_offline(broker_id)
            # the session starts now: a deadline left by an earlier incarnation must not
            # fence this one while the registration commits
            self._deadlines[broker_id] = time.monotonic() + self._session_timeout()
            await self.commit(records)
            self._deadlines[broker_id] = time.monotonic() + self._session_timeout()
            log.info(
                "registered broker %d at %s:%d (epoch %d; %.2f s for the controller's lock, "
                "%.2f s to commit)",
                broker_id,
                host,
                port,
                epoch,
                locked - asked,
                time.monotonic() - locked,
            )
            return self.image.brokers[broker_id].epoch

    def heartbeat(self, broker_id: int, epoch: int) -> bool:
        """Extend a broker's session; True if the broker is fenced (it must re-register)."""
        if not self.active:
            raise NotController(f"broker {self.raft.node_id} is not the active controller")
        known = self.image.brokers.get(broker_id)
        if known is None or known.epoch != epoch:
            raise StaleBrokerEpoch(f"broker {broker_id} epoch {epoch} is not current")
        if known.fenced:
            return True
        self._deadlines[broker_id] = time.monotonic() + self._session_timeout()
        return False

    async def _fence_loop(self) -> None:
        interval = max(0.02, self._session_timeout() / 30)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            await self._repair_fenced()
            for broker_id, info in list(self.image.brokers.items()):
                if info.fenced:
                    continue
                deadline = self._deadlines.setdefault(broker_id, now + self._session_timeout())
                if now >= deadline:
                    with contextlib.suppress(NotController):
                        await self.fence(broker_id, "its session expired", expired_only=True)

    async def fence(
        self,
        broker_id: int,
        why: str,
        *,
        expired_only: bool = False,
        incarnation: str | None = None,
    ) -> bool:
        """Fence ``broker_id``; True if this call fenced it. With ``expired_only``, only if
        its session is still expired once the lock is held (a registration or heartbeat may
        have renewed it meanwhile); with ``incarnation``, only if its registration is that
        process's (a restarted broker's new registration is left alone)."""
        async with self.lock:
            await self.wait_active(5)
            info = self.image.brokers.get(broker_id)
            if info is None or info.fenced:
                return False
            if expired_only and time.monotonic() < self._deadlines.get(broker_id, 0.0):
                return False
            if incarnation is not None and info.incarnation != incarnation:
                return False
            records = self.fence_records(broker_id)
            log.info(
                "fencing broker %d: %s (%d partition changes)", broker_id, why, len(records) - 1
            )
            await self.commit(records)
            return True

    async def _repair_fenced(self) -> None:
        """Partitions still led by, or (beyond the last member) in-sync with, a fenced or
        unregistered broker get the change fencing should have made (a change decided
        against a stale image is dropped on apply; this decides it again)."""
        if all(not b.fenced for b in self.image.brokers.values()):
            return  # nothing fenced: nothing can still name a fenced broker
        async with self.lock:
            if not self.active:
                return
            records: list[r.Record] = []
            for state in self.image.partitions.values():
                dead = [b for b in state.isr if not self._live(b)]
                if state.leader >= 0 and not self._live(state.leader):
                    dead.append(state.leader)
                for b in dict.fromkeys(dead):
                    if b == state.leader or len(state.isr) > 1:
                        records.append(self._without(state, b))
                        break
            if records:
                log.info("repairing %d partition(s) that still name fenced brokers", len(records))
                with contextlib.suppress(NotController):
                    await self.commit(records)

    def fence_records(self, broker_id: int) -> list[r.Record]:
        """Fence a broker: out of every ISR, a new leader where it led."""
        records: list[r.Record] = [r.FenceBroker(broker_id)]
        for state in self.image.partitions.values():
            if broker_id in state.isr or state.leader == broker_id:
                records.append(self._without(state, broker_id))
        return records

    def _live(self, broker_id: int) -> bool:
        info = self.image.brokers.get(broker_id)
        return info is not None and not info.fenced

    def _elect(self, state: PartitionState, isr: Sequence[int]) -> int:
        for replica in state.replicas:
            if replica in isr and self._live(replica) and replica not in state.removing:
                return replica
        for replica in state.replicas:
            if replica in isr and self._live(replica):
                return replica
        return -1

    def _record(
        self,
        state: PartitionState,
        *,
        replicas: Iterable[int] | None = None,
        isr: Iterable[int] | None = None,
        leader: int | None = None,
        adding: Iterable[int] | None = None,
        removing: Iterable[int] | None = None,
    ) -> r.Partition:
        new_leader = state.leader if leader is None else leader
        return r.Partition(
            topic_id=str(self.image.topics[state.topic].topic_id),
            partition=state.partition,
            replicas=list(state.replicas if replicas is None else replicas),
            isr=list(state.isr if isr is None else isr),
            leader=new_leader,
            leader_epoch=state.leader_epoch + (1 if new_leader != state.leader else 0),
            partition_epoch=state.partition_epoch + 1,
            adding=list(state.adding if adding is None else adding),
            removing=list(state.removing if removing is None else removing),
        )

    def _without(self, state: PartitionState, broker_id: int) -> r.Partition:
        isr = [b for b in state.isr if b != broker_id] or [broker_id]
        leader = state.leader
        if leader in (broker_id, -1):
            leader = self._elect(state, [b for b in isr if b != broker_id])
            if leader == -1 and self._unclean(state.topic):
                candidates = [b for b in state.replicas if b != broker_id and self._live(b)]
                if candidates:
                    leader = candidates[0]
                    isr = [leader]
                    log.warning(
                        "unclean election of broker %d for %s-%d: records may be lost",
                        leader,
                        state.topic,
                        state.partition,
                    )
        return self._record(state, isr=isr, leader=leader)

    def _unclean(self, topic: str) -> bool:
        info = self.image.topics.get(topic)
        raw = None if info is None else info.configs.get("unclean.leader.election.enable")
        if raw is None:
            return self.config.get_bool("unclean.leader.election.enable")
        return raw.strip().lower() == "true"

    def _elect_offline(self, broker_id: int) -> list[r.Record]:
        """Partitions without a leader that the (re)registered broker can lead."""
        out: list[r.Record] = []
        for state in self.image.partitions.values():
            if state.leader == -1 and broker_id in state.isr:
                out.append(self._record(state, leader=broker_id))
        return out

    # ------------------------------------------------------------------ topics

    def place(
        self, name: str, partitions: Iterable[int], replication_factor: int
    ) -> dict[int, list[int]]:
        """Replica lists for new partitions: round robin over live brokers from a per-topic
        start, so leaders and followers spread evenly."""
        live = [b.broker_id for b in self.image.live_brokers()]
        if not live:
            raise BrokerNotAvailable("no live broker is registered yet; retry")
        if replication_factor > len(live):
            raise InvalidReplicationFactor(
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                f"{len(live)} broker(s) are registered."
            )
        n = len(live)
        start = zlib.crc32(name.encode()) % n
        out: dict[int, list[int]] = {}
        for p in partitions:
            # Kafka's rack-unaware assignment: the first replica round robin, the others
            # at a shift that changes every n partitions, never the same broker twice.
            first = (start + p) % n
            shift = (start + p // n) % max(1, n - 1)
            replicas = [live[first]]
            for j in range(replication_factor - 1):
                replicas.append(live[(first + 1 + (shift + j) % (n - 1)) % n])
            out[p] = replicas
        return out

    def check_assignment(self, replicas: Sequence[int]) -> None:
        if not replicas:
            raise InvalidReplicaAssignment(
                "The manual partition assignment includes an empty replica list."
            )
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(
                "The manual partition assignment includes the same broker more than once."
            )
        for broker_id in replicas:
            if broker_id not in self.image.brokers:
                raise InvalidReplicaAssignment(
                    f"The manual partition assignment includes broker {broker_id}, but no such "
                    "broker is registered."
                )

    def new_partition(self, topic_id: str, partition: int, replicas: Sequence[int]) -> r.Partition:
        isr = [b for b in replicas if self._live(b)] or list(replicas)
        leader = next((b for b in replicas if self._live(b)), -1)
        return r.Partition(topic_id, partition, list(replicas), isr, leader, 0, 0)

    # ------------------------------------------------------------------ partitions

    async def alter_partitions(
        self, leader_id: int, changes: Sequence[IsrChange]
    ) -> list[PartitionState | BrokerError]:
        """ISR changes asked for by one partition leader, as one AlterPartition carries
        them: each checked on its own (its refusal in its place in the answer), the
        accepted ones committed together as one entry (a leader that got its followers
        back after a fault asks for dozens at once; one commit each kept every other
        decision, a restarted broker's registration among them, waiting behind them)."""
        async with self.lock:
            await self.wait_active(5)
            refused: dict[int, BrokerError] = {}
            records: list[r.Record] = []
            seen: set[tuple[str, int]] = set()
            for i, change in enumerate(changes):
                try:
                    if (change.topic, change.partition) in seen:
                        raise InvalidRequest(f"{change.topic}-{change.partition} asked twice")
                    seen.add((change.topic, change.partition))
                    records.append(self._isr_record(leader_id, change))
                except BrokerError as exc:
                    refused[i] = exc
            if records:
                await self.commit(records)
            return [
                refused[i] if i in refused else self._partition_now(change.topic, change.partition)
                for i, change in enumerate(changes)
            ]

    def _partition_now(self, topic: str, partition: int) -> PartitionState:
        state = self.image.partition(topic, partition)
        assert state is not None  # just committed; topics go only by decisions, under the lock
        return state

    def _isr_record(self, leader_id: int, change: IsrChange) -> r.Record:
        """The record of one ISR change, or the reason it is refused."""
        state = self._led_by(change.topic, change.partition, leader_id, change.leader_epoch)
        if change.partition_epoch != state.partition_epoch:
            raise InvalidUpdateVersion(
                f"partition epoch {change.partition_epoch} is not {state.partition_epoch}"
            )
        isr = [b for b in dict.fromkeys(change.isr) if b in state.replicas]
        if leader_id not in isr:
            isr.insert(0, leader_id)
        for b in isr:
            if b not in state.isr and not self._live(b):
                raise InvalidUpdateVersion(f"broker {b} is fenced and cannot join the ISR")
        if state.adding and all(b in isr for b in state.adding):
            return self._complete_reassignment(state, isr)
        return self._record(state, isr=isr)

    # ------------------------------------------------------------------ remote tier

    async def commit_remote(
        self, leader_id: int, topic: str, partition: int, leader_epoch: int, records: list[r.Record]
    ) -> int:
        """Remote-tier records from the partition's leader at ``leader_epoch``.

        A leader that lost its leadership is refused (FencedLeaderEpoch), so a zombie never
        records a copy; a copy finishes or a deletion starts only for a segment the metadata
        knows, so each segment's states follow copy_started -> copy_finished ->
        delete_started -> deleted (a copy that never finished may go straight to deletion).
        """
        async with self.lock:
            await self.wait_active(5)
            self._led_by(topic, partition, leader_id, leader_epoch)
            topic_id = str(self.image.topics[topic].topic_id)
            remote = self.image.remote_log(topic, partition)
            known = {} if remote is None else dict(remote.segments)
            for rec in records:
                self._check_remote(rec, topic_id, partition, known)
            return await self.commit(records)

    @staticmethod
    def _check_remote(
        rec: r.Record, topic_id: str, partition: int, known: dict[str, RemoteSegment]
    ) -> None:
        if isinstance(rec, r.RemoteSegment):
            segment = RemoteSegment.from_dict(rec.segment)
            if (segment.topic_id, segment.partition) != (topic_id, partition):
                raise InvalidRequest("a remote segment record names another partition")
            before = known.get(segment.segment_id)
            allowed = {
                COPY_STARTED: (None,),
                COPY_FINISHED: (COPY_STARTED,),
                DELETE_STARTED: (COPY_STARTED, COPY_FINISHED, DELETE_STARTED),
            }.get(segment.state, ())
            if (None if before is None else before.state) not in allowed:
                raise InvalidRequest(
                    f"remote segment {segment.segment_id}: {segment.state} after "
                    f"{None if before is None else before.state}"
                )
            known[segment.segment_id] = segment
        elif isinstance(rec, r.RemoteSegmentDeleted):
            if (rec.topic_id, rec.partition) != (topic_id, partition):
                raise InvalidRequest("a remote segment record names another partition")
            before = known.pop(rec.segment_id, None)
            if before is not None and before.state != DELETE_STARTED:
                raise InvalidRequest(
                    f"remote segment {rec.segment_id}: deleted before its deletion started"
                )
        elif isinstance(rec, r.RemoteLogStart):
            if (rec.topic_id, rec.partition) != (topic_id, partition):
                raise InvalidRequest("a remote log start record names another partition")
        else:
            raise InvalidRequest(f"{type(rec).__name__} is not a remote-tier record")

    async def _remote_cleanup_loop(self) -> None:
        """Delete the objects of deleted topics, then record it; retried with backoff while
        the object store fails (the pending list is in the image: a new controller goes on)."""
        backoff = 1.0
        while True:
            await asyncio.sleep(backoff)
            cleanup = self.remote_cleanup
            pending = dict(self.image.remote_cleanup)
            if cleanup is None or not pending:
                continue
            try:
                for topic_id, name in pending.items():
                    await cleanup(topic_id, name)
                    async with self.lock:
                        await self.commit([r.RemoteTopicDeleted(topic_id)])
                    log.info("deleted the remote objects of topic %s (%s)", name, topic_id)
                backoff = 1.0
            except NotController:
                return
            except Exception as exc:  # the object store: retried
                backoff = min(backoff * 2, 30.0)
                log.warning(
                    "deleting remote objects of deleted topics failed: %s; retrying in %.0f s",
                    exc,
                    backoff,
                )

    def _led_by(
        self, topic: str, partition: int, leader_id: int, leader_epoch: int
    ) -> PartitionState:
        """The partition's state, if ``leader_id`` leads it at ``leader_epoch``."""
        state = self.image.partition(topic, partition)
        if state is None:
            raise UnknownTopicOrPartition(f"unknown partition {topic}-{partition}")
        if leader_id != state.leader or leader_epoch != state.leader_epoch:
            raise FencedLeaderEpoch(
                f"broker {leader_id} epoch {leader_epoch} does not lead {topic}-{partition} "
                f"(leader {state.leader}, epoch {state.leader_epoch})"
            )
        return state

    def _complete_reassignment(self, state: PartitionState, isr: Sequence[int]) -> r.Partition:
        replicas = [b for b in state.replicas if b not in state.removing]
        new_isr = [b for b in isr if b not in state.removing] or replicas[:1]
        leader = state.leader
        if leader in state.removing or leader not in new_isr:
            target = PartitionState(
                state.topic, state.partition, tuple(replicas), tuple(new_isr), -1, 0, 0
            )
            leader = self._elect(target, new_isr)
        log.info(
            "reassignment of %s-%d complete: replicas %s", state.topic, state.partition, replicas
        )
        return self._record(
            state, replicas=replicas, isr=new_isr, leader=leader, adding=(), removing=()
        )

    def reassignment(
        self, topic: str, partition: int, target: Sequence[int] | None
    ) -> r.Partition | None:
        """The record that starts (``target``) or cancels (None) moving a partition; None
        when nothing changes. Target replicas join first; once they are all in the ISR the
        leader's AlterPartition completes the move (``_complete_reassignment``)."""
        state = self.image.partition(topic, partition)
        if state is None:
            raise UnknownTopicOrPartition(f"unknown partition {topic}-{partition}")
        if target is None:
            if not state.adding and not state.removing:
                raise NoReassignmentInProgress(f"no reassignment of {topic}-{partition}")
            original = [b for b in state.replicas if b not in state.adding]
            isr = [b for b in state.isr if b in original] or original[:1]
            leader = state.leader if state.leader in original else self._elect(state, isr)
            return self._record(
                state, replicas=original, isr=isr, leader=leader, adding=(), removing=()
            )
        self.check_assignment(target)
        current = [b for b in state.replicas if b not in state.adding]
        adding = [b for b in target if b not in current]
        removing = [b for b in current if b not in target]
        if not adding and not removing:
            if list(target) != list(state.replicas):
                return self._record(state, replicas=target, adding=(), removing=())
            return None
        replicas = list(target) + [b for b in current if b not in target]
        if adding:
            return self._record(state, replicas=replicas, adding=adding, removing=removing)
        pending = PartitionState(
            state.topic,
            state.partition,
            tuple(replicas),
            state.isr,
            state.leader,
            state.leader_epoch,
            state.partition_epoch,
            (),
            tuple(removing),
        )
        return self._complete_reassignment(pending, state.isr)

    def _preferred_record(self, state: PartitionState) -> r.Record | None:
        """Leadership back to the preferred replica, if it is live and in the ISR."""
        preferred = state.preferred
        if state.leader == preferred or state.adding or state.removing:
            return None
        if preferred not in state.isr or not self._live(preferred):
            return None
        return self._record(state, leader=preferred)

    async def _preferred_leader_loop(self) -> None:
        """Every ``leader.imbalance.check.interval.seconds``, every partition whose preferred
        replica is back in its ISR is given back to it, all in one entry (one commit each
        held every other decision behind dozens of them after a broker came back)."""
        interval = self.config.get_int("leader.imbalance.check.interval.seconds")
        while True:
            await asyncio.sleep(interval)
            if not self.config.get_bool("auto.leader.rebalance.enable"):
                continue
            async with self.lock:
                if not self.active:
                    continue
                moves = [
                    (state, record)
                    for state in self.image.partitions.values()
                    if (record := self._preferred_record(state)) is not None
                ]
                if not moves:
                    continue
                with contextlib.suppress(NotController):
                    await self.commit([record for _, record in moves])
                    log.info(
                        "preferred leaders elected for %d partition(s): %s",
                        len(moves),
                        ", ".join(f"{s.topic}-{s.partition}->{s.preferred}" for s, _ in moves[:8])
                        + (" ..." if len(moves) > 8 else ""),
                    )
