"""The Groups service (proto/sluice/v1/groups.proto): consumer groups over the Kafka protocol
(``controlplane/groups.py``)."""

from __future__ import annotations

import grpc

from controlplane import errors
from controlplane.api.common import rpc
from controlplane.groups import GroupOps, GroupView, ResetTarget
from proto.sluice.v1 import groups_pb2 as pb
from proto.sluice.v1 import groups_pb2_grpc as pb_grpc

TARGETS = {
    "to_earliest": "earliest",
    "to_latest": "latest",
    "to_offset": "offset",
    "to_timestamp_ms": "timestamp_ms",
    "shift_by": "shift_by",
}


def group_pb(view: GroupView) -> pb.Group:
    group = view.group
    out = pb.Group(
        cluster=view.cluster,
        group_id=group.group_id,
        state=group.state,
        protocol_type=group.protocol_type,
        protocol=group.protocol,
        coordinator=view.coordinator,
        total_lag=view.total_lag,
    )
    for m in group.members:
        out.members.add(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            assignment=[pb.TopicPartitions(topic=t, partitions=ps) for t, ps in m.assignment],
        )
    for p in view.partitions:
        item = out.partitions.add(
            topic=p.topic,
            partition=p.partition,
            committed_offset=p.committed,
            end_offset=p.end,
            metadata=p.metadata,
        )
        if p.lag is not None:
            item.lag = p.lag
        if p.member is not None:
            item.member_id = p.member.member_id
            item.client_id = p.member.client_id
            item.client_host = p.member.client_host
    return out


class GroupsService(pb_grpc.GroupsServicer):
    def __init__(self, ops: GroupOps) -> None:
        self.ops = ops

    @rpc
    async def ListGroups(
        self, request: pb.ListGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListGroupsResponse:
        groups = await self.ops.list_groups(request.cluster)
        return pb.ListGroupsResponse(
            groups=[
                pb.GroupListing(
                    group_id=g.group_id,
                    state=g.state,
                    protocol_type=g.protocol_type,
                    coordinator=g.coordinator,
                )
                for g in groups
            ]
        )

    @rpc
    async def DescribeGroup(
        self, request: pb.DescribeGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.Group:
        return group_pb(await self.ops.describe(request.cluster, request.group_id))

    @rpc
    async def ResetOffsets(
        self, request: pb.ResetOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResetOffsetsResponse:
        which = request.WhichOneof("target")
        if which is None:
            raise errors.BadRequest(
                "say where to reset the offsets to: to_earliest, to_latest, to_offset, "
                "to_timestamp_ms or shift_by",
                cluster=request.cluster,
                group=request.group_id,
            )
        value = getattr(request, which)
        target = ResetTarget(TARGETS[which], 0 if isinstance(value, bool) else int(value))
        changes = await self.ops.reset_offsets(
            request.cluster,
            request.group_id,
            list(request.topics),
            target,
            dry_run=request.dry_run,
        )
        return pb.ResetOffsetsResponse(
            cluster=request.cluster,
            group_id=request.group_id,
            dry_run=request.dry_run,
            offsets=[
                pb.OffsetReset(
                    topic=c.topic,
                    partition=c.partition,
                    previous_offset=c.previous,
                    new_offset=c.new,
                )
                for c in changes
            ],
        )

    @rpc
    async def DeleteGroup(
        self, request: pb.DeleteGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteGroupResponse:
        await self.ops.delete(request.cluster, request.group_id)
        return pb.DeleteGroupResponse()
