"""The replica manager: reconciles this broker's partition replicas to the metadata image.

After every applied metadata entry it opens the logs of partitions this broker is a
replica of, makes each one leader or follower at the image's leader epoch, points the
followers' fetchers at their leaders, and closes and deletes replicas it no longer holds
(a topic deleted, a reassignment completed). A periodic check asks the controller to
shrink the ISR of partitions it leads (followers lagging over ``replica.lag.time.max.ms``)
or to expand it (followers that caught up).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dataplane.cluster.image import Delta
from dataplane.replication.fetcher import ReplicaFetcher
from dataplane.replication.partition import Partition
from wire.errors import BrokerError, NotLeaderOrFollower, UnknownTopicOrPartition

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage
    from dataplane.cluster.member import ClusterMember
    from dataplane.config import BrokerConfig
    from dataplane.log.manager import LogManager
    from dataplane.replication.fetcher import SnapshotSource

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ISR_CHECK_INTERVAL = 0.1
ISR_ANSWER_WAIT = 2.0
"""Seconds an ISR change waits to show in the metadata image before it counts as refused."""
SLOW_ROLE = 0.05
"""Taking a replica role that blocks the event loop this long (s) is logged."""
ROLE_RETRY_INTERVAL = 1.0
"""Seconds between attempts to take a replica role that failed (a full disk): without them a
follower that could not open its log would wait for the partition's next metadata change."""


class ReplicaManager:
    def __init__(
        self, config: BrokerConfig, image: MetadataImage, logs: LogManager, cluster: ClusterMember
    ) -> None:
        self.config = config
        self.image = image
        self.logs = logs
        self.cluster = cluster
        self.node_id = image.node_id
        self.snapshot_source: SnapshotSource | None = None
        """Where a follower starting at its leader's local log start finds the producer
        state (the remote tier, when this broker has one; set by the broker)."""
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.channels = cluster.new_channels("replica")
        self._task: asyncio.Task[None] | None = None
        self._isr_requests: dict[TopicPartition, asyncio.Task[None]] = {}
        self._failed_roles: set[TopicPartition] = set()
        """Partitions whose replica role could not be taken; retried every
        ROLE_RETRY_INTERVAL until it is (or the metadata no longer asks for it)."""
        self.active = False
        self._lost: dict[int, float] = {}
        """Leaders whose fetch connection the peer closed, and when (monotonic)."""
        self._fence_waiters: set[asyncio.Future[None]] = set()
        """Resolved at every metadata change (``wait_for_fences``)."""

    # ------------------------------------------------------------------ lost leaders

    def _leader_lost(self, leader_id: int) -> None:
        """The fetch connection to ``leader_id`` was closed by its side: its process may
        have died. Until its fence (or ``metadata.leader.loss.wait.ms``) a Metadata answer
        naming it waits (``lost_leaders``)."""
        wait_ms = self.config.get_int("metadata.leader.loss.wait.ms")
        broker = self.image.brokers.get(leader_id)
        if wait_ms <= 0 or broker is None or broker.fenced:
            return
        self._lost[leader_id] = time.monotonic()
        log.info(
            "broker %d closed its fetch connection (exited?): Metadata answers naming it "
            "leader wait up to %d ms for its fence",
            leader_id,
            wait_ms,
        )

    def lost_leaders(self) -> dict[int, float]:
        """Leaders lost within ``metadata.leader.loss.wait.ms`` and not fenced since:
        broker id -> the monotonic time until which an answer naming it may wait."""
        wait = self.config.get_int("metadata.leader.loss.wait.ms") / 1000
        now = time.monotonic()
        found = {}
        for broker_id, at in list(self._lost.items()):
            broker = self.image.brokers.get(broker_id)
            if now - at >= wait or broker is None or broker.fenced:
                del self._lost[broker_id]
            else:
                found[broker_id] = at + wait
        return found

    async def wait_for_fences(self, leaders: set[int], until: float) -> None:
        """Wait until none of ``leaders`` is a live (unfenced) broker of the image, or
        ``until`` (monotonic)."""
        while True:
            brokers = self.image.brokers
            if not any((b := brokers.get(i)) is not None and not b.fenced for i in leaders):
                return
            left = until - time.monotonic()
            if left <= 0:
                return
            changed = asyncio.get_running_loop().create_future()
            self._fence_waiters.add(changed)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed, left)
            finally:
                self._fence_waiters.discard(changed)

    # ------------------------------------------------------------------ lookups

    def leader(self, topic: str, partition: int, client_epoch: int = -1) -> Partition:
        """The partition if this broker leads it; UnknownTopicOrPartition or
        NotLeaderOrFollower (and the epoch errors) otherwise."""
        part = self.partitions.get((topic, partition))
        if part is None:
            if (topic, partition) in self.image.partitions:
                raise NotLeaderOrFollower(
                    f"broker {self.node_id} holds no replica of {topic}-{partition}"
                )
            raise UnknownTopicOrPartition(f"unknown partition {topic}-{partition}")
        part.check_leader(client_epoch)
        return part

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._isr_loop())

    async def stop(self) -> None:
        tasks = [t for t in {self._task, *self._isr_requests.values()} if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        await self.channels.close()
        for part in self.partitions.values():
            part.stop()

    # ------------------------------------------------------------------ reconcile

    def activate(self) -> None:
        """Take the replica roles the image gives this broker. Called once the broker has
        replayed the metadata log up to its own registration: earlier entries are history
        (a restarted broker must not act as the leader it once was)."""
        self.active = True
        self.on_metadata(Delta(restored=True))

    def on_metadata(self, delta: Delta) -> None:
        for waiter in self._fence_waiters:
            if not waiter.done():
                waiter.set_result(None)
        if not self.active:
            return
        image = self.image
        for info in delta.removed:
            for p in range(info.partitions):
                self._drop((info.name, p), delete=False)
        if delta.restored:
            keys = set(image.partitions) | set(self.partitions)
        else:
            keys = set(delta.partitions)
            if delta.brokers:
                # a leader's address may have changed (re-registration after a restart)
                keys |= {k for k, part in self.partitions.items() if not part.is_leader}
        for key in sorted(keys):
            self._take_role(key)

    def _take_role(self, key: TopicPartition) -> None:
        """Reconcile ``key``; a failure is logged (at error level the first time) and the
        partition retried every ROLE_RETRY_INTERVAL by the ISR loop."""
        retry = key in self._failed_roles
        began = time.monotonic()
        try:
            self._reconcile(key)
        except (BrokerError, OSError) as exc:
            self._failed_roles.add(key)
            if retry:
                log.debug("%s-%d: replica role still failing: %s", *key, exc)
            else:
                log.error(
                    "%s-%d: cannot take the replica role (retried every %.0f s): %s",
                    *key,
                    ROLE_RETRY_INTERVAL,
                    exc,
                )
            return
        self._failed_roles.discard(key)
        if retry:
            log.info("%s-%d: replica role taken on a retry", *key)
        took = time.monotonic() - began
        if took >= SLOW_ROLE:  # the event loop waited: a restarting broker's start did too
            log.info("%s-%d: taking the replica role took %.0f ms", *key, took * 1000)

    def _reconcile(self, key: TopicPartition) -> None:
        image = self.image
        state = image.partitions.get(key)
        if state is None or self.node_id not in state.replicas:
            self._drop(key, delete=state is not None or key[0] in image.topics)
            return
        part = self.partitions.get(key)
        if part is None:
            plog = self.logs.open_partition(*key)
            part = self.partitions[key] = Partition(plog, self.node_id)
        if state.leader == self.node_id:
            self._unfollow(key)
            part.become_leader(state)
            return
        part.become_follower(state)
        leader = image.brokers.get(state.leader)
        if state.leader < 0 or leader is None or leader.fenced:
            self._unfollow(key)
            return
        fetcher = self.fetchers.get(state.leader)
        address = (leader.host, leader.port)
        if fetcher is None or fetcher.channel.address != address:
            if fetcher is not None:
                self._retire(state.leader)
            channel = self.channels.get(f"fetch-{state.leader}", *address)
            channel.on_peer_close = lambda leader=state.leader: self._leader_lost(leader)
            fetcher = self.fetchers[state.leader] = ReplicaFetcher(self, state.leader, channel)
        for other_id, other in self.fetchers.items():
            if other_id != state.leader:
                other.unfollow(key)
        fetcher.follow(part, state.leader_epoch)

    def _retire(self, leader_id: int) -> None:
        fetcher = self.fetchers.pop(leader_id, None)
        if fetcher is not None:
            asyncio.get_running_loop().create_task(fetcher.stop())

    def _unfollow(self, key: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.unfollow(key)

    def _drop(self, key: TopicPartition, *, delete: bool) -> None:
        self._unfollow(key)
        part = self.partitions.pop(key, None)
        if part is None:
            return
        part.stop()
        if delete:
            log.info("%s-%d: no longer a replica here; deleting the local copy", *key)
            asyncio.get_running_loop().create_task(self.logs.remove_partition(*key))

    # ------------------------------------------------------------------ ISR upkeep

    async def _isr_loop(self) -> None:
        next_role_retry = 0.0
        while True:
            await asyncio.sleep(ISR_CHECK_INTERVAL)
            if self._failed_roles and time.monotonic() >= next_role_retry:
                next_role_retry = time.monotonic() + ROLE_RETRY_INTERVAL
                for key in sorted(self._failed_roles):
                    self._take_role(key)
            if self.cluster.epoch < 0:
                continue
            now = time.monotonic()
            batch: list[tuple[TopicPartition, Partition, list[int]]] = []
            for key, part in list(self.partitions.items()):
                if not part.is_leader or part.state is None or key in self._isr_requests:
                    continue
                lag = self.config.get_seconds("replica.lag.time.max.ms")
                shrink = part.isr_to_shrink(now, lag)
                # as Kafka's (KIP-841), a fenced broker is not proposed: the controller would
                # refuse it, and a stopping broker still fetches until it is gone
                expand = [b for b in part.isr_to_expand() if self._may_join_isr(b)]
                if not shrink and not expand:
                    continue
                isr = list(dict.fromkeys([b for b in part.state.isr if b not in shrink] + expand))
                part.ask_isr(isr)
                batch.append((key, part, isr))
            if batch:  # one AlterPartition for all of them, as Kafka's AlterPartitionManager
                task = asyncio.get_running_loop().create_task(self._alter_isrs(batch))
                for key, _, _ in batch:
                    self._isr_requests[key] = task

    def _may_join_isr(self, broker_id: int) -> bool:
        known = self.image.brokers.get(broker_id)
        return known is not None and not known.fenced

    async def _alter_isrs(self, batch: list[tuple[TopicPartition, Partition, list[int]]]) -> None:
        asked = [(key, part, part.state, isr) for key, part, isr in batch]
        try:
            for key, _, state, isr in asked:
                if state is not None:
                    log.info("%s-%d: asking to change ISR %s -> %s", *key, list(state.isr), isr)
            sent = [(state, isr) for _, _, state, isr in asked if state is not None]
            answers: Iterator[Exception | None]
            try:
                answers = iter(await self.cluster.alter_partitions(sent))
            except (BrokerError, OSError, TimeoutError) as exc:
                answers = iter([exc] * len(sent))
            waits, refused = [], 0
            for key, part, state, _ in asked:
                if state is None:
                    continue
                refusal = next(answers)
                if refusal is not None:
                    log.info("%s-%d: ISR change failed: %s", *key, refusal)
                    refused += 1
                    if part.state is state:
                        part.isr_request_failed()
                elif part.state is state:
                    waits.append(self._until_answer(part, state))
            # the outcome arrives through the metadata image; the maximal ISR holds until then
            await asyncio.gather(*waits)
            if refused:
                await asyncio.sleep(0.2)
        finally:
            for key, _, _ in batch:
                self._isr_requests.pop(key, None)

    @staticmethod
    async def _until_answer(part: Partition, state: object) -> None:
        """Until the accepted change shows in the image; a refused one (the image moved on
        without it) drops the maximal ISR."""
        if part.state is state and not await part.wait_state_change(ISR_ANSWER_WAIT):
            part.isr_request_failed()
