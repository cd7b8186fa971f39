"""The consumer-group requests of the Kafka protocol, sent by the control plane (the Groups API),
and the partition offsets they need: FindCoordinator, ListGroups, DescribeGroups,
OffsetFetch, OffsetCommit, DeleteGroups, ListOffsets. Each function sends one request through
an :class:`~controlplane.kafka.Admin` (one broker) and raises
:class:`~controlplane.kafka.KafkaResponseError` for an error code.

A consumer's assignment (``DescribeGroups`` member_assignment, the consumer protocol's
ConsumerProtocolAssignment) is decoded by :func:`decode_assignment`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.delete_groups.v2 import request as delete_groups
from kio.schema.describe_groups.v5 import request as describe_groups
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import request as find_coordinator
from kio.schema.list_groups.v4 import request as list_groups
from kio.schema.list_offsets.v7 import request as list_offsets
from kio.schema.offset_commit.v8 import request as offset_commit
from kio.schema.offset_fetch.v7 import request as offset_fetch
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from controlplane.kafka import Admin, KafkaResponseError

EARLIEST = -2
"""ListOffsets timestamp of the log start offset."""
LATEST = -1
"""ListOffsets timestamp of the end offset (high watermark)."""
COORDINATOR_RETRIABLE = {
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
}
"""Errors of a coordinator that is moving or loading its groups: asked again shortly."""

Partition = tuple[str, int]


@dataclass(frozen=True)
class Coordinator:
    broker_id: int
    host: str
    port: int


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class Member:
    member_id: str
    group_instance_id: str
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """(topic, partitions) the member is assigned (consumer protocol only)."""


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[Member, ...] = field(default=())


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str


def decode_assignment(data: bytes) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The (topic, partitions) of a ConsumerProtocolAssignment (any version: the fields after
    the partitions are not read). ValueError when it is not one."""
    if not data:
        return ()
    pos = 2  # version (int16)

    def take(fmt: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return int(value)

    try:
        out = []
        for _ in range(take(">i")):
            size = take(">h")
            topic = data[pos : pos + size].decode()
            pos += size
            count = take(">i")
            partitions = tuple(take(">i") for _ in range(max(count, 0)))
            out.append((topic, partitions))
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a consumer protocol assignment: {exc}") from None
    return tuple(out)


async def find_group_coordinator(admin: Admin, group: str) -> Coordinator:
    response = await admin.call(find_coordinator.FindCoordinatorRequest(key=group, key_type=i8(0)))
    if response.error_code != ErrorCode.none:
        raise KafkaResponseError(
            response.error_code, response.error_message, f"find the coordinator of {group!r}"
        )
    return Coordinator(int(response.node_id), str(response.host), int(response.port))


async def list_broker_groups(admin: Admin) -> list[ListedGroup]:
    """The groups one broker coordinates."""
    response = await admin.call(list_groups.ListGroupsRequest(states_filter=()))
    if response.error_code != ErrorCode.none:
        raise KafkaResponseError(response.error_code, None, "list groups")
    return [
        ListedGroup(str(g.group_id), str(g.protocol_type), str(g.group_state))
        for g in response.groups
    ]


async def describe_group(admin: Admin, group: str) -> DescribedGroup:
    """The group as its coordinator (``admin``) sees it; an unknown group is ``Dead``."""
    response = await admin.call(
        describe_groups.DescribeGroupsRequest(
            groups=(GroupId(group),), include_authorized_operations=False
        )
    )
    (found,) = response.groups
    if found.error_code != ErrorCode.none:
        raise KafkaResponseError(found.error_code, None, f"describe group {group!r}")
    consumer = found.protocol_type == "consumer"
    members = []
    for m in found.members:
        assignment: tuple[tuple[str, tuple[int, ...]], ...] = ()
        if consumer:
            try:
                assignment = decode_assignment(bytes(m.member_assignment))
            except ValueError:
                assignment = ()
        members.append(
            Member(
                member_id=str(m.member_id),
                group_instance_id=str(m.group_instance_id or ""),
                client_id=str(m.client_id),
                client_host=str(m.client_host),
                assignment=assignment,
            )
        )
    return DescribedGroup(
        group_id=str(found.group_id),
        state=str(found.group_state),
        protocol_type=str(found.protocol_type),
        protocol=str(found.protocol_data),
        members=tuple(sorted(members, key=lambda m: (m.client_id, m.member_id))),
    )


async def fetch_offsets(admin: Admin, group: str) -> dict[Partition, Committed]:
    """Every offset the group has committed (asked of its coordinator)."""
    response = await admin.call(
        offset_fetch.OffsetFetchRequest(group_id=GroupId(group), topics=None, require_stable=False)
    )
    if response.error_code != ErrorCode.none:
        raise KafkaResponseError(response.error_code, None, f"fetch the offsets of {group!r}")
    out: dict[Partition, Committed] = {}
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    p.error_code, None, f"fetch the offset of {topic.name}-{p.partition_index}"
                )
            if int(p.committed_offset) >= 0:
                out[(str(topic.name), int(p.partition_index))] = Committed(
                    int(p.committed_offset), str(p.metadata or "")
                )
    return out


async def commit_offsets(admin: Admin, group: str, offsets: Mapping[Partition, int]) -> None:
    """Commit ``offsets`` for the group as an admin does (no member, generation -1): the
    coordinator takes it only while the group has no members."""
    by_topic: dict[str, list[offset_commit.OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            offset_commit.OffsetCommitRequestPartition(
                partition_index=i32(partition),
                committed_offset=i64(offset),
                committed_leader_epoch=i32(-1),
                committed_metadata="",
            )
        )
    response = await admin.call(
        offset_commit.OffsetCommitRequest(
            group_id=GroupId(group),
            generation_id_or_member_epoch=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=tuple(
                offset_commit.OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
    )
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    p.error_code, None, f"commit the offset of {topic.name}-{p.partition_index}"
                )


async def delete_group(admin: Admin, group: str) -> None:
    response = await admin.call(delete_groups.DeleteGroupsRequest(groups_names=(GroupId(group),)))
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise KafkaResponseError(result.error_code, None, f"delete group {group!r}")


async def list_partition_offsets(
    admin: Admin, partitions: Iterable[Partition], timestamp: int
) -> dict[Partition, int]:
    """The offset of each partition (led by ``admin``'s broker) at ``timestamp``: EARLIEST,
    LATEST, or ms since the epoch (the first offset at or after it; -1 when there is none)."""
    by_topic: dict[str, list[list_offsets.ListOffsetsPartition]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(
            list_offsets.ListOffsetsPartition(
                partition_index=i32(partition),
                current_leader_epoch=i32(-1),
                timestamp=i64(timestamp),
            )
        )
    response = await admin.call(
        list_offsets.ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(0),
            topics=tuple(
                list_offsets.ListOffsetsTopic(name=TopicName(t), partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
    )
    out: dict[Partition, int] = {}
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    p.error_code, None, f"list offsets of {topic.name}-{p.partition_index}"
                )
            out[(str(topic.name), int(p.partition_index))] = int(p.offset)
    return out
