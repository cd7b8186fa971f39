"""Consumer groups of the Groups API, spoken to the brokers in the Kafka protocol, as
kafka-consumer-groups.sh does.

- **List**: ListGroups asked of every broker (each lists the groups it coordinates), merged.
- **Describe**: FindCoordinator (any broker), then DescribeGroups and OffsetFetch at the
  coordinator; the end offset (high watermark) of every partition the group has committed
  or has assigned from ListOffsets at the partition's leader; lag = end - committed.
- **Reset offsets**: refused while the group has members (kafka-consumer-groups' rule and
  message); new offsets computed from the log start / end offsets (ListOffsets at the
  leaders), a timestamp, or the committed offsets, clamped to [log start, end] as Kafka's tool
  does, then committed at the coordinator as an admin (generation -1, no member id).
- **Delete**: DeleteGroups at the coordinator (NON_EMPTY_GROUP while it has members).

A coordinator still loading or moving (COORDINATOR_NOT_AVAILABLE, ...) is asked again for up
to ``kafka.request.timeout.ms``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kio.schema.errors import ErrorCode

from controlplane import errors
from controlplane.kafka import Admin, KafkaResponseError, TopicMetadata, on_any
from controlplane.kafka_groups import (
    COORDINATOR_RETRIABLE,
    EARLIEST,
    LATEST,
    Committed,
    Coordinator,
    DescribedGroup,
    ListedGroup,
    Member,
    Partition,
    commit_offsets,
    delete_group,
    describe_group,
    fetch_offsets,
    find_group_coordinator,
    list_broker_groups,
    list_partition_offsets,
)
from controlplane.store import BrokerRecord, Store
from controlplane.topics import map_kafka_error

T = TypeVar("T")

INACTIVE = ("Empty", "Dead")
"""Group states without members: offsets can be reset, the group deleted."""
RETRY_DELAY = 0.2


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str
    protocol_type: str
    coordinator: int


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int
    """-1: nothing committed."""
    end: int
    """-1: the leader did not answer."""
    metadata: str = ""
    member: Member | None = None

    @property
    def lag(self) -> int | None:
        if self.committed < 0 or self.end < 0:
            return None
        return max(0, self.end - self.committed)


@dataclass(frozen=True)
class GroupView:
    cluster: str
    group: DescribedGroup
    coordinator: int
    partitions: list[PartitionLag] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)


@dataclass(frozen=True)
class ResetTarget:
    """One of: earliest, latest, offset, timestamp_ms, shift_by."""

    kind: str
    value: int = 0


@dataclass(frozen=True)
class OffsetChange:
    topic: str
    partition: int
    previous: int
    new: int


class GroupOps:
    def __init__(self, store_: Store, timeout: float) -> None:
        self.store = store_
        self.timeout = timeout

    def _brokers(self, name: str) -> list[BrokerRecord]:
        return errors.ready_brokers(self.store, name)

    async def _kafka(
        self, cluster: str, group: str, what: str, call: Callable[[], Awaitable[T]]
    ) -> T:
        """One call; Kafka errors and transport failures become typed errors."""
        try:
            return await call()
        except KafkaResponseError as exc:
            raise self._error(exc, cluster, group) from None
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            raise errors.broker_unavailable(exc, cluster, what, group=group) from None

    @staticmethod
    def _error(exc: KafkaResponseError, cluster: str, group: str) -> errors.ControlPlaneError:
        about = {"cluster": cluster, "group": group}
        if exc.code == ErrorCode.group_id_not_found:
            return errors.GroupNotFound(
                f"consumer group {group!r} not found in cluster {cluster!r}", **about
            )
        if exc.code == ErrorCode.non_empty_group:
            return errors.GroupNotEmpty(
                f"consumer group {group!r} has active members: stop its consumers first",
                **about,
            )
        if exc.code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            return errors.GroupNotEmpty(
                f"consumer group {group!r} got members meanwhile: stop its consumers first",
                **about,
            )
        if exc.code == ErrorCode.invalid_group_id:
            return errors.BadRequest(f"invalid consumer group id {group!r}", **about)
        return map_kafka_error(exc, cluster, "")

    async def _coordinator(self, cluster: str, group: str) -> tuple[Coordinator, Admin]:
        brokers = self._brokers(cluster)
        found = await self._retrying(
            cluster,
            group,
            "FindCoordinator",
            lambda: on_any(
                brokers, lambda a: find_group_coordinator(a, group), self.timeout, read_only=True
            ),
        )
        # the control plane talks to the broker's recorded address (it knows them)
        record = next((b for b in brokers if b.broker_id == found.broker_id), None)
        if record is not None:
            return found, Admin.to(record, self.timeout)
        credentials = brokers[0].credentials if brokers else None
        return found, Admin(found.host, found.port, self.timeout, credentials)

    async def _retrying(
        self, cluster: str, group: str, what: str, call: Callable[[], Awaitable[T]]
    ) -> T:
        """A coordinator call, asked again while the coordinator loads or moves."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return await call()
            except KafkaResponseError as exc:
                if exc.code not in COORDINATOR_RETRIABLE or time.monotonic() > deadline:
                    raise self._error(exc, cluster, group) from None
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                raise errors.BrokerUnavailable(
                    f"the coordinator of group {group!r} in cluster {cluster!r} did not answer "
                    f"{what}: {exc or type(exc).__name__}",
                    cluster=cluster,
                    group=group,
                ) from None
            await asyncio.sleep(RETRY_DELAY)

    # ------------------------------------------------------------------ list

    async def list_groups(self, cluster: str) -> list[GroupListing]:
        brokers = self._brokers(cluster)
        results = await asyncio.gather(
            *(list_broker_groups(Admin.to(b, self.timeout)) for b in brokers),
            return_exceptions=True,
        )
        out: list[GroupListing] = []
        failed = []
        for broker, result in zip(brokers, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, KafkaResponseError):
                    raise map_kafka_error(result, cluster, "")
                failed.append(f"{broker.broker_id} at {broker.address}")
                continue
            listed: list[ListedGroup] = result
            out += [
                GroupListing(g.group_id, g.state, g.protocol_type, broker.broker_id) for g in listed
            ]
        if failed:
            raise errors.BrokerUnavailable(
                f"broker(s) {', '.join(failed)} of cluster {cluster!r} did not answer ListGroups "
                "(each broker lists the groups it coordinates)",
                cluster=cluster,
            )
        return sorted(out, key=lambda g: g.group_id)

    # ------------------------------------------------------------------ describe

    async def _metadata(self, cluster: str, topics: Sequence[str]) -> list[TopicMetadata]:
        brokers = self._brokers(cluster)
        if not topics:
            return []
        return await self._kafka(
            cluster,
            "",
            "metadata",
            lambda: on_any(
                brokers, lambda a: a.metadata(list(topics)), self.timeout, read_only=True
            ),
        )

    async def _offsets(
        self, cluster: str, topics: Sequence[TopicMetadata], timestamp: int, *, strict: bool
    ) -> dict[Partition, int]:
        """The offset at ``timestamp`` of every partition of ``topics``, asked of each
        partition's leader; a leader that fails gives -1 unless ``strict`` (then an error)."""
        by_id = {b.broker_id: b for b in self._brokers(cluster)}
        by_leader: dict[int, list[Partition]] = {}
        out: dict[Partition, int] = {}
        for topic in topics:
            for p in topic.partitions:
                if p.leader in by_id:
                    by_leader.setdefault(p.leader, []).append((topic.name, p.partition))
                elif strict:
                    raise errors.BrokerUnavailable(
                        f"partition {topic.name}-{p.partition} of cluster {cluster!r} has no "
                        "leader now; retry in a few seconds",
                        cluster=cluster,
                        topic=topic.name,
                    )
                else:
                    out[(topic.name, p.partition)] = -1
        leaders = sorted(by_leader)
        results = await asyncio.gather(
            *(
                list_partition_offsets(Admin.to(by_id[b], self.timeout), by_leader[b], timestamp)
                for b in leaders
            ),
            return_exceptions=True,
        )
        for leader, result in zip(leaders, results, strict=True):
            if isinstance(result, BaseException):
                if strict:
                    raise errors.BrokerUnavailable(
                        f"broker {leader} of cluster {cluster!r} did not give the offsets of "
                        f"its partitions: {result}",
                        cluster=cluster,
                    )
                out.update(dict.fromkeys(by_leader[leader], -1))
            else:
                out.update(result)
        return out

    async def _look(
        self, cluster: str, group: str, *, must_exist: bool = True
    ) -> tuple[Coordinator, Admin, DescribedGroup, dict[Partition, Committed]]:
        """The group's coordinator, its description and committed offsets. A group unknown
        to its coordinator (``Dead``, nothing committed) is GROUP_NOT_FOUND if ``must_exist``
        (resetting the offsets of a new group creates it, as kafka-consumer-groups does)."""
        coordinator, admin = await self._coordinator(cluster, group)
        described = await self._retrying(
            cluster, group, "DescribeGroups", lambda: describe_group(admin, group)
        )
        committed = await self._retrying(
            cluster, group, "OffsetFetch", lambda: fetch_offsets(admin, group)
        )
        if must_exist and described.state == "Dead" and not committed:
            raise errors.GroupNotFound(
                f"consumer group {group!r} not found in cluster {cluster!r}",
                cluster=cluster,
                group=group,
            )
        return coordinator, admin, described, committed

    async def describe(self, cluster: str, group: str) -> GroupView:
        coordinator, _, described, committed = await self._look(cluster, group)
        owner: dict[Partition, Member] = {
            (topic, p): m for m in described.members for topic, ps in m.assignment for p in ps
        }
        names = sorted({t for t, _ in committed} | {t for t, _ in owner})
        topics = await self._existing(cluster, names)
        ends = await self._offsets(cluster, topics, LATEST, strict=False)
        partitions = [
            PartitionLag(
                topic=t,
                partition=p,
                committed=committed[(t, p)].offset if (t, p) in committed else -1,
                end=ends.get((t, p), -1),
                metadata=committed[(t, p)].metadata if (t, p) in committed else "",
                member=owner.get((t, p)),
            )
            for t, p in sorted(set(committed) | set(owner))
        ]
        return GroupView(cluster, described, coordinator.broker_id, partitions)

    async def _existing(self, cluster: str, names: Sequence[str]) -> list[TopicMetadata]:
        """Metadata of the topics that still exist (a group may hold offsets of a deleted
        one)."""
        if not names:
            return []
        wanted = set(names)
        brokers = self._brokers(cluster)
        every = await self._kafka(
            cluster,
            "",
            "metadata",
            lambda: on_any(brokers, lambda a: a.metadata(), self.timeout, read_only=True),
        )
        return [t for t in every if t.name in wanted]

    # ------------------------------------------------------------------ change

    async def reset_offsets(
        self,
        cluster: str,
        group: str,
        topic_names: Sequence[str],
        target: ResetTarget,
        *,
        dry_run: bool,
    ) -> list[OffsetChange]:
        if not topic_names:
            raise errors.BadRequest(
                "name at least one topic to reset", cluster=cluster, group=group
            )
        _, admin, described, committed = await self._look(cluster, group, must_exist=False)
        if described.state not in INACTIVE:
            raise errors.GroupNotEmpty(
                f"assignments can only be reset if the group {group!r} is inactive, but the "
                f"current state is {described.state} ({len(described.members)} member(s): "
                "stop its consumers first)",
                cluster=cluster,
                group=group,
            )
        topics = await self._metadata(cluster, sorted(set(topic_names)))
        earliest = await self._offsets(cluster, topics, EARLIEST, strict=True)
        latest = await self._offsets(cluster, topics, LATEST, strict=True)
        if target.kind == "timestamp_ms":
            found = await self._offsets(cluster, topics, target.value, strict=True)
        changes = []
        for key in sorted(earliest):
            low, high = earliest[key], latest[key]
            previous = committed[key].offset if key in committed else -1
            if target.kind == "earliest":
                wanted = low
            elif target.kind == "latest":
                wanted = high
            elif target.kind == "offset":
                wanted = target.value
            elif target.kind == "timestamp_ms":
                wanted = found[key] if found[key] >= 0 else high
            elif target.kind == "shift_by":
                if previous < 0:
                    raise errors.BadRequest(
                        f"cannot shift the offset of partition {key[0]}-{key[1]}: group "
                        f"{group!r} has committed none (use --to-earliest, --to-latest or "
                        "--to-offset)",
                        cluster=cluster,
                        group=group,
                        topic=key[0],
                    )
                wanted = previous + target.value
            else:
                raise errors.BadRequest(f"unknown reset target {target.kind!r}", cluster=cluster)
            changes.append(OffsetChange(key[0], key[1], previous, min(max(wanted, low), high)))
        if not dry_run and changes:
            await self._retrying(
                cluster,
                group,
                "OffsetCommit",
                lambda: commit_offsets(
                    admin, group, {(c.topic, c.partition): c.new for c in changes}
                ),
            )
        return changes

    async def delete(self, cluster: str, group: str) -> None:
        _, admin = await self._coordinator(cluster, group)
        await self._retrying(cluster, group, "DeleteGroups", lambda: delete_group(admin, group))
