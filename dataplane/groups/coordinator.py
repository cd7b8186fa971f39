"""The group coordinator: what the group handlers call.

It ties together the rebalance state machines (``membership``), the committed offsets
(``offsets``) and their log (``storage``: the compacted ``__consumer_offsets`` topic):

- The coordinator of a group is the leader of its ``__consumer_offsets`` partition. When
  this broker becomes leader of a partition it replays it (offset commits, group
  metadata, tombstones) to rebuild those groups and offsets and restarts their member
  sessions; when it stops leading one, those groups are dropped here (requests for them
  get NOT_COORDINATOR and clients look the coordinator up again). The topic is created on
  the first FindCoordinator. ``stop`` cancels every timer and parked request.
- Offset commits are validated against the group (Kafka's rules: a generation and member
  for group members, generation -1 for simple consumers of an Empty group), written as
  records and then applied; with ``log.flush.policy=fsync`` the answer waits for the fsync.
- Deleting a group writes tombstones for its offsets and its metadata.

Methods raise ``wire.errors`` types for request-wide errors; per-item errors are
returned as values. The handlers map them to Kafka error codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dataplane import clock
from dataplane.cluster.image import Delta
from dataplane.coordinator_log import CoordinatorLog
from dataplane.groups.group import ClassicGroup, GroupState, Member
from dataplane.groups.membership import Membership
from dataplane.groups.offsets import CommittedOffset, OffsetStore
from dataplane.groups.records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from dataplane.groups.storage import GROUPS, OFFSETS_TOPIC, Record
from dataplane.groups.txn_offsets import PendingOffset, PendingTxnOffsets
from wire.errors import (
    BrokerError,
    CoordinatorNotAvailable,
    CorruptRecord,
    GroupIdNotFound,
    GroupSubscribedToTopic,
    IllegalGeneration,
    InvalidRequest,
    NonEmptyGroup,
    NotCoordinator,
    OffsetMetadataTooLarge,
    RebalanceInProgress,
    UnknownMemberId,
)
from wire.record_batch import TRANSACTIONAL_BIT, encode_batch
from wire.transactions import ControlType, marker_of

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage
    from dataplane.cluster.member import ClusterMember
    from dataplane.config import BrokerConfig
    from dataplane.log.manager import LogManager
    from dataplane.replication.manager import ReplicaManager

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
OFFSETS_RETENTION_CHECK_INTERVAL_MS = 600000
"""Kafka's offsets.retention.check.interval.ms default."""


@dataclass(frozen=True, slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    errors: list[BrokerError | None]
    """One per entry, in order."""
    durable: asyncio.Future[None] | None
    """Resolves when the records are fsynced (log.flush.policy=fsync), else None."""


class GroupCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        image: MetadataImage,
        cluster: ClusterMember,
        replicas: ReplicaManager,
        logs: LogManager,
    ) -> None:
        self.config = config
        self.image = image
        self.storage = CoordinatorLog(
            GROUPS, config, image=image, cluster=cluster, replicas=replicas, logs=logs
        )
        self.membership = Membership(config, self.storage)
        self.offsets = OffsetStore()
        self.txn_offsets = PendingTxnOffsets()
        self._expiry_task: asyncio.Task[None] | None = None

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.membership.groups

    @property
    def active(self) -> bool:
        return self.membership.active

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start coordinating the groups of every ``__consumer_offsets`` partition this
        broker leads; later leadership changes load and unload partitions
        (``on_metadata``)."""
        self.membership.active = True
        self.on_metadata(Delta(restored=True))
        self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop())

    def on_metadata(self, delta: Delta) -> None:
        """Load the partitions of ``__consumer_offsets`` this broker now leads; unload the
        ones it no longer leads (their groups move to the new leader)."""
        if not self.membership.active:
            return
        touched = any(t == OFFSETS_TOPIC for t, _ in delta.partitions) or any(
            info.name == OFFSETS_TOPIC for info in delta.removed
        )
        if not delta.restored and not touched:
            return
        storage = self.storage
        led = storage.led_partitions()
        for partition in sorted((storage.loaded | storage.loading) - led):
            self._unload(partition)
        for partition in sorted(led - storage.loaded - storage.loading):
            self._load(partition)

    def _load(self, partition: int) -> None:
        started = time.monotonic()
        plog = self.storage.plog(partition)
        if plog is None:
            return
        count = 0
        before = set(self.groups)
        for header, records in self.storage.replay_batches(plog):
            if header.is_control:
                self._replay_marker(partition, header.producer_id, records)
                continue
            for key, value in records:
                if header.is_transactional:
                    self._replay_pending(partition, header.producer_id, key, value)
                else:
                    self._replay(key, value)
                count += 1
        new = [g for name, g in self.groups.items() if name not in before]
        self.storage.mark_loaded(partition, functools.partial(self.membership.on_loaded, new))
        (log.info if count else log.debug)(
            "group coordinator loaded %s-%d: %d records, %d groups in %.2fs",
            OFFSETS_TOPIC,
            partition,
            count,
            len(set(self.groups) - before),
            time.monotonic() - started,
        )

    def _unload(self, partition: int) -> None:
        self.storage.unload(partition)
        self.txn_offsets.drop_partition(partition)
        gone = [
            g
            for g in list(self.groups.values())
            if self.storage.partition_for(g.group_id) == partition
        ]
        for group in gone:
            self.membership.forget(group)
        for group_id in self.offsets.groups():
            if self.storage.partition_for(group_id) == partition:
                self.offsets.remove_group(group_id)
        log.info(
            "group coordinator unloaded %s-%d (%d groups moved away)",
            OFFSETS_TOPIC,
            partition,
            len(gone),
        )

    async def stop(self) -> None:
        self.membership.shutdown()
        task, self._expiry_task = self._expiry_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _replay(self, key: bytes, value: bytes | None) -> None:
        try:
            decoded = decode_key(key)
            if isinstance(decoded, OffsetKey):
                if value is None:
                    self.offsets.delete(decoded.group, decoded.topic, decoded.partition)
                    return
                v = decode_offset_value(value)
                self.offsets.put(
                    decoded.group,
                    decoded.topic,
                    decoded.partition,
                    CommittedOffset(
                        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
                    ),
                )
                self.membership.get_or_create(decoded.group)  # a simple group, if none yet
            elif isinstance(decoded, GroupKey):
                if value is None:
                    self.groups.pop(decoded.group, None)
                else:
                    self.groups[decoded.group] = group_from_record(
                        decoded.group, decode_group_value(value)
                    )
        except CorruptRecord as exc:
            log.error("skipping unreadable %s record: %s", OFFSETS_TOPIC, exc)

    def _replay_pending(
        self, partition: int, producer_id: int, key: bytes, value: bytes | None
    ) -> None:
        """An offset record of a transaction: held until the transaction's marker."""
        try:
            decoded = decode_key(key)
            if not isinstance(decoded, OffsetKey):
                return
            committed = None
            if value is not None:
                v = decode_offset_value(value)
                committed = CommittedOffset(
                    v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
                )
        except CorruptRecord as exc:
            log.error("skipping unreadable %s record: %s", OFFSETS_TOPIC, exc)
            return
        self.txn_offsets.add(
            partition,
            producer_id,
            [PendingOffset(decoded.group, decoded.topic, decoded.partition, committed)],
        )

    def _replay_marker(self, partition: int, producer_id: int, records: list[Record]) -> None:
        try:
            marker = marker_of(*records[0]) if records else None
        except CorruptRecord as exc:
            log.error("skipping unreadable %s marker: %s", OFFSETS_TOPIC, exc)
            return
        if marker is not None:
            self.complete_transaction(partition, producer_id, marker.type is ControlType.COMMIT)

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker reached ``partition`` of ``__consumer_offsets``: its
        offsets there become visible (COMMIT) or are dropped (ABORT)."""
        for done in self.txn_offsets.complete(partition, producer_id, commit, self.offsets):
            if commit:
                self.membership.get_or_create(done.group)

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer: tuple[int, int],
        entries: list[OffsetCommitEntry],
        member: tuple[int, str, str | None] = (-1, "", None),
    ) -> CommitOutcome:
        """TxnOffsetCommit: the offsets are written as a transactional batch of ``producer``
        (id, epoch) and stay pending until the transaction's marker. ``member`` is the
        consumer's (generation, member id, instance id) of v3+, checked against the group."""
        if not self.active:
            raise CoordinatorNotAvailable()
        if not self.storage.owns(group_id):
            raise NotCoordinator()
        self._validate_txn_commit(group_id, *member)
        now = clock.now_ms()
        limit = self.config.get_int("offset.metadata.max.bytes")
        errors: list[BrokerError | None] = []
        records: list[Record] = []
        pending: list[PendingOffset] = []
        for entry in entries:
            metadata = entry.metadata
            if metadata is not None and _java_length(metadata) > limit:
                errors.append(
                    OffsetMetadataTooLarge(
                        f"commit metadata is longer than offset.metadata.max.bytes={limit}"
                    )
                )
                continue
            value = CommittedOffset(entry.offset, entry.leader_epoch, metadata or "", now, -1)
            records.append(
                (
                    encode_offset_key(group_id, entry.topic, entry.partition),
                    encode_offset_value(
                        OffsetValue(value.offset, value.leader_epoch, value.metadata, now, -1)
                    ),
                )
            )
            pending.append(PendingOffset(group_id, entry.topic, entry.partition, value))
            errors.append(None)
        durable = None
        if records:
            batch = encode_batch(
                records,
                timestamp_ms=now,
                producer_id=producer[0],
                producer_epoch=producer[1],
                attributes=TRANSACTIONAL_BIT,
            )
            durable = self.storage.append(group_id, [], batch=batch)
            self.txn_offsets.add(self.storage.partition_for(group_id), producer[0], pending)
        return CommitOutcome(errors, durable)

    # ------------------------------------------------------------------ coordinator lookup

    def find_coordinator(self, key_type: int, key: str) -> tuple[int, str, int]:
        """(node id, host, port) of the coordinator for ``key``: the leader of its
        ``__consumer_offsets`` partition. CoordinatorNotAvailable while the topic does not
        exist (``ensure_topic`` creates it) or the partition has no live leader."""
        if key_type == GROUP_KEY_TYPE:
            if not self.active:
                raise CoordinatorNotAvailable()
            return self.storage.leader_of(key)
        raise InvalidRequest(f"unknown coordinator key type {key_type}")

    # ------------------------------------------------------------------ offsets

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        entries: list[OffsetCommitEntry],
        *,
        api_version: int,
        retention_ms: int = -1,
    ) -> CommitOutcome:
        """Validate against the group, write the records, then apply them."""
        if not self.active:
            raise CoordinatorNotAvailable()
        if not self.storage.owns(group_id):
            raise NotCoordinator()
        group = self._validate_commit(group_id, generation, member_id, instance_id, api_version)
        member = group.members.get(member_id)
        if member is not None and group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self.membership.reschedule_heartbeat(group, member)  # a commit keeps the session
        now = clock.now_ms()
        expire = now + retention_ms if retention_ms != -1 else -1
        limit = self.config.get_int("offset.metadata.max.bytes")
        errors: list[BrokerError | None] = []
        records: list[Record] = []
        applied: list[tuple[OffsetCommitEntry, CommittedOffset]] = []
        for entry in entries:
            metadata = entry.metadata
            if metadata is not None and _java_length(metadata) > limit:
                errors.append(
                    OffsetMetadataTooLarge(
                        f"commit metadata is longer than offset.metadata.max.bytes={limit}"
                    )
                )
                continue
            value = CommittedOffset(entry.offset, entry.leader_epoch, metadata or "", now, expire)
            records.append(
                (
                    encode_offset_key(group_id, entry.topic, entry.partition),
                    encode_offset_value(
                        OffsetValue(value.offset, value.leader_epoch, value.metadata, now, expire)
                    ),
                )
            )
            applied.append((entry, value))
            errors.append(None)
        durable = self.storage.append(group_id, records) if records else None

        def apply(done: asyncio.Future[None] | None = None) -> None:
            # as Kafka: OffsetFetch sees a commit once it is durable (the ISR has it), never
            # before: a failover would otherwise show the group's offsets going backwards
            if done is not None and (done.cancelled() or done.exception() is not None):
                return
            for entry, value in applied:
                self.offsets.put(group_id, entry.topic, entry.partition, value)

        if durable is None:
            apply()
        else:
            durable.add_done_callback(apply)
        return CommitOutcome(errors, durable)

    def _validate_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        api_version: int,
    ) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:
                return self.membership.get_or_create(group_id)  # a simple consumer group
            if api_version >= 9:
                raise GroupIdNotFound(f"group {group_id} not found")
            raise IllegalGeneration(f"group {group_id} not found")
        if group.is_in(GroupState.DEAD):
            raise CoordinatorNotAvailable()
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return group
        if generation >= 0 or member_id or instance_id is not None:
            group.validate_member(member_id, instance_id)
            if generation != group.generation_id:
                raise IllegalGeneration(
                    f"generation {generation} is not the group's {group.generation_id}"
                )
        elif not group.is_in(GroupState.EMPTY):
            raise UnknownMemberId("only an empty group takes commits without a member id")
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            raise RebalanceInProgress("the group is completing a rebalance")
        return group

    def _validate_txn_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> None:
        """Kafka's checks of a TxnOffsetCommit (KIP-447): a producer whose consumer was
        fenced out of the group (an old generation, a member that left) cannot commit its
        offsets, so a zombie's transaction aborts. Without a member (v0-v2, or generation -1)
        any group takes the commit, as on Kafka."""
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:
                return  # the group is made when the offsets commit
            raise IllegalGeneration(f"group {group_id} not found: rejoin it, then commit")
        if group.is_in(GroupState.DEAD):
            raise CoordinatorNotAvailable()
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return
        if generation >= 0 or member_id or instance_id is not None:
            group.validate_member(member_id, instance_id)
            if generation != group.generation_id:
                raise IllegalGeneration(
                    f"generation {generation} is not the group's {group.generation_id}: "
                    "abort the transaction and rejoin the group"
                )

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, list[tuple[int, CommittedOffset | None]]]]:
        """Committed offsets of the given partitions (None: of every committed partition)."""
        if not self.active:
            raise CoordinatorNotAvailable()
        if not self.storage.owns(group_id):
            raise NotCoordinator()
        group = self.groups.get(group_id)
        known = group is not None and not group.is_in(GroupState.DEAD)
        if topics is None:
            if not known:
                return []
            return [
                (topic, list(partitions.items()))
                for topic, partitions in self.offsets.topics(group_id).items()
            ]
        return [
            (
                topic,
                [(p, self.offsets.get(group_id, topic, p) if known else None) for p in partitions],
            )
            for topic, partitions in topics
        ]

    def unstable_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of the group for the partition
        (OffsetFetch with ``require_stable`` then answers UNSTABLE_OFFSET_COMMIT)."""
        return self.txn_offsets.has_pending(group_id, topic, partition)

    # ------------------------------------------------------------------ group admin

    def list_groups(self, states: Iterable[str], types: Iterable[str]) -> list[ClassicGroup]:
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return []
        return [
            g
            for g in self.groups.values()
            if not wanted_states or g.state.value.lower() in wanted_states
        ]

    def describe_group(self, group_id: str) -> ClassicGroup:
        if not self.active:
            raise CoordinatorNotAvailable()
        if not self.storage.owns(group_id):
            raise NotCoordinator()
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            raise GroupIdNotFound(f"Group {group_id} not found.")
        return group

    def delete_groups(
        self, group_ids: list[str]
    ) -> tuple[list[BrokerError | None], list[asyncio.Future[None]]]:
        """Per-group errors, and the fsync futures of the tombstones written."""
        if not self.active:
            raise CoordinatorNotAvailable()
        errors: list[BrokerError | None] = []
        durable: list[asyncio.Future[None]] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            try:
                if not self.storage.owns(group_id):
                    raise NotCoordinator()
                if group is None or group.is_in(GroupState.DEAD):
                    raise GroupIdNotFound(f"group {group_id} not found")
                if not group.is_in(GroupState.EMPTY):
                    raise NonEmptyGroup(f"group {group_id} has members")
                future = self._delete(group)
            except BrokerError as exc:
                errors.append(exc)
                continue
            if future is not None:
                durable.append(future)
            errors.append(None)
        return errors, durable

    def _delete(self, group: ClassicGroup) -> asyncio.Future[None] | None:
        gid = group.group_id
        records: list[Record] = [
            (encode_offset_key(gid, topic, partition), None)
            for topic, partition, _ in self.offsets.entries(gid)
        ]
        records.append((encode_group_key(gid), None))
        future = self.storage.append(gid, records)
        self.offsets.remove_group(gid)
        self.membership.forget(group)
        log.info("deleted group %s", gid)
        return future

    def delete_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> tuple[list[tuple[str, list[tuple[int, BrokerError | None]]]], asyncio.Future[None] | None]:
        """OffsetDelete (KIP-496): tombstone the committed offsets of the given partitions,
        except of topics the group's consumers subscribe to (GROUP_SUBSCRIBED_TO_TOPIC).
        Raises the group-level error: GROUP_ID_NOT_FOUND for an unknown group,
        NON_EMPTY_GROUP for a group with members that is not a "consumer" group."""
        if not self.active:
            raise CoordinatorNotAvailable()
        if not self.storage.owns(group_id):
            raise NotCoordinator()
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            raise GroupIdNotFound(f"Group {group_id} not found.")
        subscribed = group.subscribed_topics()
        if not group.is_in(GroupState.EMPTY) and group.protocol_type != "consumer":
            raise NonEmptyGroup(f"The group {group_id} is not empty.")
        results: list[tuple[str, list[tuple[int, BrokerError | None]]]] = []
        doomed: list[tuple[str, int]] = []
        for topic, partitions in topics:
            outcome: list[tuple[int, BrokerError | None]] = []
            for partition in partitions:
                if subscribed is not None and topic in subscribed:
                    outcome.append((partition, GroupSubscribedToTopic()))
                    continue
                if self.offsets.get(group_id, topic, partition) is not None:
                    doomed.append((topic, partition))
                outcome.append((partition, None))
            results.append((topic, outcome))
        records: list[Record] = [(encode_offset_key(group_id, t, p), None) for t, p in doomed]
        durable = self.storage.append(group_id, records) if records else None
        for t, p in doomed:
            self.offsets.delete(group_id, t, p)
        if records:
            log.info("deleted %d committed offset(s) of group %s", len(records), group_id)
        return results, durable

    def on_topic_deleted(self, topic: str) -> None:
        """Forget every group's committed offsets of a deleted topic (tombstones), as Kafka."""
        for group_id in self.offsets.groups():
            doomed = [(t, p) for t, p, _ in self.offsets.entries(group_id) if t == topic]
            if not doomed:
                continue
            for t, p in doomed:
                self.offsets.delete(group_id, t, p)
            records: list[Record] = [(encode_offset_key(group_id, t, p), None) for t, p in doomed]
            self.storage.append_detached(group_id, records, f"offsets of deleted topic {topic}")

    # ------------------------------------------------------------------ expiry

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(OFFSETS_RETENTION_CHECK_INTERVAL_MS / 1000)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset expiry failed")

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Tombstone expired offsets, and Empty groups left without offsets; returns a count."""
        now = clock.now_ms() if now_ms is None else now_ms
        retention = self.config.get_int("offsets.retention.minutes") * 60000
        removed = 0
        for group_id in list(self.groups):
            group = self.groups[group_id]
            if group.protocol_type:
                if not group.is_in(GroupState.EMPTY):
                    continue
                state_ts = group.state_timestamp_ms
                expired = [
                    (t, p)
                    for t, p, v in self.offsets.entries(group_id)
                    if v.expired(now, state_ts if state_ts >= 0 else v.commit_timestamp, retention)
                ]
            else:
                expired = [
                    (t, p)
                    for t, p, v in self.offsets.entries(group_id)
                    if v.expired(now, v.commit_timestamp, retention)
                ]
            records: list[Record] = [(encode_offset_key(group_id, t, p), None) for t, p in expired]
            for topic, partition in expired:
                self.offsets.delete(group_id, topic, partition)
            removed += len(expired)
            if not self.offsets.has_offsets(group_id) and group.is_in(GroupState.EMPTY):
                records.append((encode_group_key(group_id), None))
                self.membership.forget(group)
            if records:
                self.storage.append_detached(group_id, records, "expiry tombstones")
        if removed:
            log.info("expired %d committed offsets", removed)
        return removed


def _java_length(text: str) -> int:
    """Length in UTF-16 code units, as Java's String.length()."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def group_from_record(group_id: str, value: GroupValue) -> ClassicGroup:
    """Rebuild a group from its metadata record: Stable with its members, or Empty."""
    group = ClassicGroup(
        group_id,
        state=GroupState.STABLE if value.members else GroupState.EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader,
        state_timestamp_ms=value.current_state_timestamp,
    )
    for m in value.members:
        group.add(
            Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout,
                m.session_timeout,
                value.protocol_type,
                ((value.protocol or "", m.subscription),),
                m.assignment,
            )
        )
    return group
