"""Followers fetch from leaders: one fetcher task per leader broker, Kafka's own protocol.

For every partition it follows, a fetcher first reconciles the follower's log with the
leader's (OffsetForLeaderEpoch with the follower's latest epoch; truncate to where the
leader's log for that epoch ends), then sends Fetch requests with ``replica_id`` set to
this broker, appending what comes back as it is (offsets and epochs already assigned) and
taking the leader's high watermark (capped at its own log end). The leader learns each
follower's log end from its fetch offset, which moves the high watermark and the ISR.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_req
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from wire.errors import BrokerError, LogDirFull

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.log.partition_log import PartitionLog
    from dataplane.replication.partition import Partition
    from wire.client import Channel

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_RETRY_CODES = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
    }
)


class SnapshotSource(Protocol):
    """Producer state kept elsewhere (the remote tier): the snapshot at ``offset`` of a
    partition's log, or None."""

    async def producer_snapshot_at(self, plog: PartitionLog, offset: int) -> bytes | None: ...


class FetcherHost(Protocol):
    """What a fetcher needs of the replica manager that runs it."""

    node_id: int
    config: BrokerConfig
    snapshot_source: SnapshotSource | None


@dataclass(slots=True)
class _Followed:
    partition: Partition
    leader_epoch: int
    truncated: bool = False
    restore_at: int = -1
    """The log restarted here (the rest is remote only): producer state to restore first."""


class ReplicaFetcher:
    def __init__(self, manager: FetcherHost, leader_id: int, channel: Channel) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.channel = channel
        self.partitions: dict[TopicPartition, _Followed] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def follow(self, partition: Partition, leader_epoch: int) -> None:
        key = (partition.topic, partition.index)
        known = self.partitions.get(key)
        if known is None or known.leader_epoch != leader_epoch or known.partition is not partition:
            self.partitions[key] = _Followed(partition, leader_epoch)
            self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def unfollow(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self._changed.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ------------------------------------------------------------------ loop

    def _setting(self, key: str) -> int:
        return self.manager.config.get_int(key)

    async def _run(self) -> None:
        backoff = self._setting("replica.fetch.backoff.ms") / 1000
        while self.partitions:
            self._changed.clear()
            try:
                pending = [f for f in self.partitions.values() if not f.truncated]
                if pending:
                    await self._truncate(pending)
                for f in [f for f in self.partitions.values() if f.restore_at >= 0]:
                    await self._restore_producers(f)
                ready = [f for f in self.partitions.values() if f.truncated]
                if not ready:
                    await self._pause(backoff)
                    continue
                await self._fetch(ready)
            except (OSError, TimeoutError) as exc:
                log.debug("fetch from broker %d failed: %s", self.leader_id, exc)
                await self._pause(backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for broker %d", self.leader_id)
                await self._pause(backoff)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), seconds)

    async def _truncate(self, followed: list[_Followed]) -> None:
        """Cut each follower log back to where it agrees with the leader's."""
        by_topic: dict[str, list[_Followed]] = {}
        for f in followed:
            if f.partition.plog.latest_epoch < 0:
                f.truncated = True  # nothing written under any epoch: nothing to cut
                continue
            by_topic.setdefault(f.partition.topic, []).append(f)
        if not by_topic:
            return
        request = ofle_req.OffsetForLeaderEpochRequest(
            replica_id=BrokerId(self.manager.node_id),
            topics=tuple(
                ofle_req.OffsetForLeaderTopic(
                    topic=TopicName(topic),
                    partitions=tuple(
                        ofle_req.OffsetForLeaderPartition(
                            partition=i32(f.partition.index),
                            current_leader_epoch=i32(f.leader_epoch),
                            leader_epoch=i32(f.partition.plog.latest_epoch),
                        )
                        for f in items
                    ),
                )
                for topic, items in by_topic.items()
            ),
        )
        response = await self.channel.request(
            request, timeout=self._setting("replica.socket.timeout.ms") / 1000
        )
        for topic in response.topics:
            for result in topic.partitions:
                found = self.partitions.get((topic.topic, result.partition))
                if found is None or found.truncated:
                    continue
                f = found
                if result.error_code != ErrorCode.none:
                    log.debug(
                        "%s-%d: OffsetForLeaderEpoch: %s",
                        topic.topic,
                        result.partition,
                        result.error_code.name,
                    )
                    continue
                plog = f.partition.plog
                if result.end_offset < 0:
                    target, done = plog.high_watermark, True  # the leader knows no such epoch
                else:
                    target, done = plog.truncation_point(
                        int(result.leader_epoch), int(result.end_offset)
                    )
                target = max(target, plog.log_start_offset)
                if target < plog.log_end_offset or not done:
                    log.info(
                        "%s: truncating from %d to %d (leader %d: epoch %d ends at %d)",
                        plog.name,
                        plog.log_end_offset,
                        target,
                        self.leader_id,
                        result.leader_epoch,
                        result.end_offset,
                    )
                    plog.truncate_to(target)
                f.truncated = done  # not done: ask again with the log's new latest epoch

    async def _restore_producers(self, f: _Followed) -> None:
        """Load the producer snapshot the remote tier holds at the offset where this log
        restarted (uploaded with the segment that ends there), as Kafka's followers do, so
        idempotent producers keep their sequences if this replica becomes leader. Without
        one (or without tiered storage here) the state starts empty."""
        at, f.restore_at = f.restore_at, -1
        remote = self.manager.snapshot_source
        plog = f.partition.plog
        if remote is None or plog.log_end_offset != at:
            return
        try:
            snapshot = await remote.producer_snapshot_at(plog, at)
        except (BrokerError, OSError) as exc:
            log.warning("%s: no producer state from the remote tier: %s", plog.name, exc)
            return
        if snapshot is not None and plog.log_end_offset == at:
            plog.restore_producer_snapshot(at, snapshot)
            log.info("%s: producer state restored from the remote tier at %d", plog.name, at)

    async def _fetch(self, ready: list[_Followed]) -> None:
        by_topic: dict[str, list[_Followed]] = {}
        for f in ready:
            by_topic.setdefault(f.partition.topic, []).append(f)
        wait_ms = self._setting("replica.fetch.wait.max.ms")
        per_partition = self._setting("replica.fetch.max.bytes")
        request = fetch_req.FetchRequest(
            replica_id=BrokerId(self.manager.node_id),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=wait_ms)),
            min_bytes=i32(1),
            max_bytes=i32(self._setting("replica.fetch.response.max.bytes")),
            topics=tuple(
                fetch_req.FetchTopic(
                    topic=TopicName(topic),
                    partitions=tuple(
                        fetch_req.FetchPartition(
                            partition=i32(f.partition.index),
                            current_leader_epoch=i32(f.leader_epoch),
                            fetch_offset=i64(f.partition.plog.log_end_offset),
                            log_start_offset=i64(f.partition.plog.log_start_offset),
                            partition_max_bytes=i32(per_partition),
                        )
                        for f in items
                    ),
                )
                for topic, items in by_topic.items()
            ),
            forgotten_topics_data=(),
        )
        timeout = max(self._setting("replica.socket.timeout.ms"), wait_ms + 1000) / 1000
        fetch = asyncio.ensure_future(self.channel.request(request, timeout=timeout))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            done, _ = await asyncio.wait({fetch, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        if fetch not in done:
            fetch.add_done_callback(_consume)
            # a partition was added, removed or changed leader epoch: start over (the
            # answer to the old request is dropped; the leader only learns fetch offsets)
            if not fetch.done():
                fetch.cancel()
            return
        response = fetch.result()
        if response.error_code != ErrorCode.none:
            raise OSError(f"fetch from broker {self.leader_id}: {response.error_code.name}")
        backoff_needed = False
        for topic in response.responses:
            for part in topic.partitions:
                known = self.partitions.get((topic.topic, part.partition_index))
                if known is None:
                    continue
                if not self._apply(known, part):
                    backoff_needed = True
        if backoff_needed:
            await self._pause(self._setting("replica.fetch.backoff.ms") / 1000)

    def _apply(self, f: _Followed, part: object) -> bool:
        plog = f.partition.plog
        code = part.error_code  # type: ignore[attr-defined]
        if code == ErrorCode.offset_moved_to_tiered_storage:
            # what this replica lacks is only in the remote tier: its log starts where the
            # leader's local log does (answers to followers carry that offset)
            leader_start = int(part.log_start_offset)  # type: ignore[attr-defined]
            log.info(
                "%s: offsets below %d are in the remote tier; starting the log there",
                plog.name,
                leader_start,
            )
            plog.truncate_fully_and_start_at(leader_start)
            f.restore_at = leader_start
            return True
        if code == ErrorCode.offset_out_of_range:
            leader_start = int(part.log_start_offset)  # type: ignore[attr-defined]
            if plog.log_end_offset < leader_start:
                log.info(
                    "%s: behind the leader's log start %d; restarting there",
                    plog.name,
                    leader_start,
                )
                plog.truncate_fully_and_start_at(leader_start)
            else:
                f.truncated = False  # ahead of the leader: reconcile by epoch again
            return True
        if code in _RETRY_CODES:
            return False
        if code != ErrorCode.none:
            log.warning("%s: fetch from broker %d: %s", plog.name, self.leader_id, code.name)
            return False
        records = part.records  # type: ignore[attr-defined]
        try:
            if records:
                plog.append_replica(records)
        except BrokerError as exc:
            # a full disk is logged by the log itself, at most every few seconds
            level = logging.DEBUG if isinstance(exc, LogDirFull) else logging.WARNING
            log.log(level, "%s: cannot append fetched records: %s", plog.name, exc)
            f.truncated = False
            return False
        hw = int(part.high_watermark)  # type: ignore[attr-defined]
        plog.set_high_watermark(min(hw, plog.log_end_offset))
        leader_start = int(part.log_start_offset)  # type: ignore[attr-defined]
        if leader_start > plog.log_start_offset and leader_start <= plog.high_watermark:
            plog.delete_records_before(leader_start)
        return True


def _consume(future: asyncio.Future[object]) -> None:
    if not future.cancelled():
        future.exception()
