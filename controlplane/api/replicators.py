"""The Replicators service (proto/sluice/v1/replicators.proto): MirrorMaker 2 run by the
control plane (``controlplane/replicators.py``, ``replicator_runner.py``)."""

from __future__ import annotations

import grpc

from controlplane.api.common import rpc, timestamp
from controlplane.replicators import (
    CreateRequest,
    ReplicatedPartition,
    Replicator,
    ReplicatorOps,
    ReplicatorState,
    TopicNamePolicy,
)
from proto.sluice.v1 import replicators_pb2 as pb
from proto.sluice.v1 import replicators_pb2_grpc as pb_grpc

STATES = {
    ReplicatorState.CREATING: pb.REPLICATOR_STATE_CREATING,
    ReplicatorState.RUNNING: pb.REPLICATOR_STATE_RUNNING,
    ReplicatorState.FAILED: pb.REPLICATOR_STATE_FAILED,
    ReplicatorState.DELETING: pb.REPLICATOR_STATE_DELETING,
}
POLICIES = {
    TopicNamePolicy.PREFIXED: pb.TOPIC_NAME_POLICY_PREFIXED,
    TopicNamePolicy.IDENTICAL: pb.TOPIC_NAME_POLICY_IDENTICAL,
}
POLICY_OF = {value: key for key, value in POLICIES.items()}


def to_pb(record: Replicator, partitions: list[ReplicatedPartition] | None = None) -> pb.Replicator:
    rows = partitions or []
    return pb.Replicator(
        name=record.name,
        source_cluster=record.source_cluster,
        source_bootstrap=record.source_bootstrap,
        target_cluster=record.target_cluster,
        topics=record.topics,
        groups=record.groups,
        sync_group_offsets=record.sync_group_offsets,
        topic_name_policy=POLICIES[record.topic_name_policy],
        state=STATES[record.state],
        state_message=record.state_message,
        source_alias=record.source_alias,
        partitions=[
            pb.ReplicatedPartition(
                source_topic=p.source_topic,
                target_topic=p.target_topic,
                partition=p.partition,
                lag=p.lag,
            )
            for p in rows
        ],
        total_lag=sum(p.lag for p in rows if p.lag > 0),
        restarts=record.restarts,
        created_at=timestamp(record.created_at),
    )


class ReplicatorsService(pb_grpc.ReplicatorsServicer):
    def __init__(self, ops: ReplicatorOps) -> None:
        self.ops = ops

    @rpc
    async def CreateReplicator(
        self, request: pb.CreateReplicatorRequest, context: grpc.aio.ServicerContext
    ) -> pb.Replicator:
        created = await self.ops.create(
            CreateRequest(
                name=request.name,
                target_cluster=request.target_cluster,
                source_cluster=request.source_cluster,
                source_bootstrap=request.source_bootstrap,
                topics=request.topics,
                groups=request.groups,
                sync_group_offsets=request.sync_group_offsets,
                topic_name_policy=POLICY_OF.get(
                    request.topic_name_policy, TopicNamePolicy.PREFIXED
                ),
                source_alias=request.source_alias,
            )
        )
        return to_pb(created)

    @rpc
    async def DescribeReplicator(
        self, request: pb.DescribeReplicatorRequest, context: grpc.aio.ServicerContext
    ) -> pb.Replicator:
        record, partitions = await self.ops.describe(request.name)
        return to_pb(record, partitions)

    @rpc
    async def ListReplicators(
        self, request: pb.ListReplicatorsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListReplicatorsResponse:
        return pb.ListReplicatorsResponse(replicators=[to_pb(r) for r in self.ops.list()])

    @rpc
    async def DeleteReplicator(
        self, request: pb.DeleteReplicatorRequest, context: grpc.aio.ServicerContext
    ) -> pb.Replicator:
        return to_pb(await self.ops.delete(request.name))
