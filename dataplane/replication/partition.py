"""One partition replica on this broker: leader or follower, as the metadata image says.

As leader it tracks each follower's log end offset (learned from the follower's fetches),
keeps the high watermark at the smallest log end offset of the ISR (the "maximal" ISR while a
change is in flight: the current members and those asked for, as Kafka does since KIP-497, so a
follower being added never joins behind the high watermark), asks the controller
to shrink the ISR when a follower lags more than ``replica.lag.time.max.ms`` and to expand
it when a follower has caught up, and completes acks=all writes once the high watermark
covers them. As follower it only holds the log; the fetcher fills it.

It also owns the partition's long-polling fetches (Kafka keeps them in the fetch purgatory,
``DelayedFetch``, keyed by partition): :class:`FetchWaiters` is the log's ``on_change``
hook, so an append, a high-watermark advance, a truncation or the log closing (the topic
deleted, the replica moved away, shutdown) wakes every fetch waiting on the partition; each
then reads again and decides whether it has enough. A fetch waits on the ``Partition`` it
resolved, for as long as it waits, even if the replica manager has dropped it meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wire.errors import (
    FencedLeaderEpoch,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    OffsetNotAvailable,
    RequestTimedOut,
    UnknownLeaderEpoch,
)

if TYPE_CHECKING:
    from dataplane.cluster.image import PartitionState
    from dataplane.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

_WAITER_PRUNE = 64
"""Waiters kept before cancelled ones are dropped (fetches cancel the futures they left)."""


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1
    caught_up_at: float = 0.0
    """Monotonic time the follower last had everything the leader had."""
    last_fetch_at: float = 0.0
    leader_end_at_last_fetch: int = 0


class FetchWaiters:
    """Futures of long-polling fetches, all resolved by the next :meth:`wake`."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    def __len__(self) -> int:
        return len(self._futures)

    def new_future(self) -> asyncio.Future[None]:
        """A future resolved by the next wake. Callers may cancel it."""
        if len(self._futures) >= _WAITER_PRUNE:
            self._futures = [f for f in self._futures if not f.done()]
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futures.append(future)
        return future

    def wake(self) -> None:
        if self._futures:
            futures, self._futures = self._futures, []
            for future in futures:
                if not future.done():
                    future.set_result(None)


class Partition:
    def __init__(self, plog: PartitionLog, node_id: int) -> None:
        self.plog = plog
        self.fetch_waiters = FetchWaiters()
        plog.on_change = self.fetch_waiters.wake
        self.node_id = node_id
        self.state: PartitionState | None = None
        self.is_leader = False
        self.epoch_start_offset = 0
        """The log end offset when this replica last became leader."""
        self.followers: dict[int, FollowerState] = {}
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        """acks=all writes: (end offset, min.insync.replicas, future)."""
        self.pending_isr: tuple[int, ...] = ()
        """The ISR asked of the controller, until the answer shows in the metadata image."""
        self._state_changed = asyncio.Event()

    @property
    def topic(self) -> str:
        return self.plog.topic

    @property
    def index(self) -> int:
        return self.plog.partition

    @property
    def leader_epoch(self) -> int:
        return -1 if self.state is None else self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return () if self.state is None else self.state.isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR and, while a change is in flight, the members asked for: the replicas the
        high watermark waits for. A follower is counted from the moment the leader asks to add
        it (it may be in the ISR the controller commits, and may then be elected); one being
        removed is counted until the removal is committed."""
        return tuple(dict.fromkeys((*self.isr, *self.pending_isr)))

    def _new_state(self) -> None:
        self._state_changed.set()
        self._state_changed = asyncio.Event()

    async def wait_state_change(self, timeout: float) -> bool:
        """Until the metadata image gives this partition a new state; False on timeout."""
        changed = self._state_changed
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def ask_isr(self, isr: list[int]) -> None:
        self.pending_isr = tuple(isr)

    def isr_request_failed(self) -> None:
        self.pending_isr = ()
        self.maybe_advance_high_watermark()

    # ------------------------------------------------------------------ transitions

    def become_leader(self, state: PartitionState) -> None:
        new_term = (
            not self.is_leader
            or self.state is None
            or (self.state.leader_epoch != state.leader_epoch)
        )
        if new_term:
            # A term starts whole or not at all: when the log cannot record the epoch (a
            # full disk), this replica must not lead with its previous term's followers and
            # offsets. The soak found such a half leader taking writes at the new epoch and
            # acknowledging records its followers did not have. The replica manager retries.
            self.is_leader = False
            try:
                self.plog.become_leader(state.leader_epoch)
            except BaseException:
                self.state = None
                raise
            self.state = state
            self.is_leader = True
            self.plog.auto_high_watermark = False
            self.epoch_start_offset = self.plog.log_end_offset
            now = time.monotonic()
            self.followers = {
                b: FollowerState(caught_up_at=now) for b in state.replicas if b != self.node_id
            }
            log.info(
                "%s: leader at epoch %d, isr %s, log end %d",
                self.plog.name,
                state.leader_epoch,
                list(state.isr),
                self.plog.log_end_offset,
            )
        else:
            self.state = state
            now = time.monotonic()
            for b in state.replicas:
                if b != self.node_id and b not in self.followers:
                    self.followers[b] = FollowerState(caught_up_at=now)
            for b in list(self.followers):
                if b not in state.replicas:
                    del self.followers[b]
        self.pending_isr = ()
        self._new_state()
        self.maybe_advance_high_watermark()

    def become_follower(self, state: PartitionState) -> None:
        was_leader = self.is_leader
        self.state = state
        self.is_leader = False
        self.pending_isr = ()
        self._new_state()
        self.followers = {}
        self.plog.auto_high_watermark = False
        self.plog.leader_epoch = max(self.plog.leader_epoch, state.leader_epoch)
        if was_leader:
            log.info(
                "%s: follower of %d at epoch %d", self.plog.name, state.leader, state.leader_epoch
            )
        self._fail_waiters(
            NotLeaderOrFollower(f"broker {self.node_id} no longer leads {self.plog.name}")
        )

    def stop(self) -> None:
        self.is_leader = False
        self._fail_waiters(NotLeaderOrFollower(f"{self.plog.name} is gone from this broker"))

    # ------------------------------------------------------------------ leader checks

    @property
    def high_watermark_known(self) -> bool:
        """False on a new leader until its high watermark reaches the start of its epoch
        (KIP-207): a follower learns the high watermark one fetch late, so right after an
        election it may be below records the previous leader had acknowledged."""
        return self.plog.high_watermark >= self.epoch_start_offset

    def check_high_watermark_known(self) -> None:
        if not self.high_watermark_known:
            raise OffsetNotAvailable(
                f"the high watermark of {self.plog.name} ({self.plog.high_watermark}) is behind "
                f"the start of leader epoch {self.leader_epoch} ({self.epoch_start_offset}); retry"
            )

    def check_leader(self, client_epoch: int = -1) -> None:
        """Raise unless this replica leads (at the client's epoch, when it sends one)."""
        if not self.is_leader or self.state is None:
            raise NotLeaderOrFollower(
                f"broker {self.node_id} is not the leader of {self.plog.name}"
            )
        if client_epoch >= 0:
            if client_epoch < self.state.leader_epoch:
                raise FencedLeaderEpoch(
                    f"epoch {client_epoch} is older than {self.state.leader_epoch}"
                )
            if client_epoch > self.state.leader_epoch:
                raise UnknownLeaderEpoch(
                    f"epoch {client_epoch} is newer than {self.state.leader_epoch}"
                )

    def check_min_isr(self, min_isr: int) -> None:
        if len(self.isr) < min_isr:
            raise NotEnoughReplicas(
                f"{self.plog.name} has {len(self.isr)} in-sync replica(s) "
                f"{list(self.isr)}, fewer than min.insync.replicas={min_isr}"
            )

    # ------------------------------------------------------------------ followers' progress

    def record_follower_fetch(self, replica: int, fetch_offset: int, now: float) -> None:
        follower = self.followers.get(replica)
        if follower is None:
            return
        end = self.plog.log_end_offset
        if fetch_offset >= end:
            follower.caught_up_at = now
        elif fetch_offset >= follower.leader_end_at_last_fetch:
            follower.caught_up_at = max(follower.caught_up_at, follower.last_fetch_at)
        follower.log_end_offset = fetch_offset
        follower.last_fetch_at = now
        follower.leader_end_at_last_fetch = end
        self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> None:
        if not self.is_leader or self.state is None:
            return
        hw = self.plog.log_end_offset
        for b in self.maximal_isr:
            if b == self.node_id:
                continue
            follower = self.followers.get(b)
            if follower is None:
                continue
            hw = min(hw, follower.log_end_offset)
        if hw > self.plog.high_watermark:
            self.plog.advance_high_watermark(hw)
        self._complete_waiters()

    def isr_to_expand(self) -> list[int]:
        """Followers outside the ISR that have caught up to the high watermark."""
        if not self.is_leader or self.state is None:
            return []
        hw = self.plog.high_watermark
        return [
            b
            for b, f in self.followers.items()
            if b not in self.state.isr and f.log_end_offset >= hw and f.log_end_offset >= 0
        ]

    def isr_to_shrink(self, now: float, lag_max_s: float) -> list[int]:
        if not self.is_leader or self.state is None:
            return []
        out = []
        for b in self.state.isr:
            f = self.followers.get(b)
            if b == self.node_id or f is None:
                continue
            if f.log_end_offset < self.plog.log_end_offset and now - f.caught_up_at > lag_max_s:
                out.append(b)
        return out

    # ------------------------------------------------------------------ long-polling fetches

    def new_data_future(self) -> asyncio.Future[None]:
        """A future resolved when the log next changes (append, high-watermark advance,
        truncation, close). Callers may cancel it."""
        return self.fetch_waiters.new_future()

    async def wait_for_data(self, timeout: float) -> None:
        """Wait until the log changes or ``timeout`` seconds pass."""
        future = self.fetch_waiters.new_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(future, timeout)

    # ------------------------------------------------------------------ acks=all

    def wait_replicated(
        self, end_offset: int, timeout: float, min_isr: int
    ) -> asyncio.Future[None]:
        """Resolves once the high watermark reaches ``end_offset`` (the next offset after a
        write), or fails: NotLeaderOrFollower, RequestTimedOut, NotEnoughReplicasAfterAppend."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        if self.plog.high_watermark >= end_offset:
            self._resolve(future, min_isr)
            return future
        entry = (end_offset, min_isr, future)
        self._waiters.append(entry)

        def expire() -> None:
            if not future.done():
                future.set_exception(
                    RequestTimedOut(
                        f"{self.plog.name}: not replicated to the ISR {list(self.isr)} "
                        f"within {timeout * 1000:.0f} ms"
                    )
                )

        handle = loop.call_later(timeout, expire)
        future.add_done_callback(lambda _: handle.cancel())
        future.add_done_callback(lambda _: self._forget(entry))
        return future

    def _forget(self, entry: tuple[int, int, asyncio.Future[None]]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(entry)

    def _resolve(self, future: asyncio.Future[None], min_isr: int) -> None:
        if future.done():
            return
        if len(self.isr) < min_isr:
            future.set_exception(
                NotEnoughReplicasAfterAppend(
                    f"{self.plog.name}: the ISR {list(self.isr)} shrank below "
                    f"min.insync.replicas={min_isr} while the write waited"
                )
            )
        else:
            future.set_result(None)

    def _complete_waiters(self) -> None:
        if not self._waiters:
            return
        hw = self.plog.high_watermark
        for end, min_isr, future in list(self._waiters):
            if end <= hw:
                self._resolve(future, min_isr)

    def _fail_waiters(self, exc: Exception) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, future in waiters:
            if not future.done():
                future.set_exception(exc)
