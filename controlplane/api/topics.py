"""The Topics service (proto/sluice/v1/topics.proto)."""

from __future__ import annotations

import grpc

from controlplane import errors
from controlplane.api.common import rpc, timestamp
from controlplane.kafka import PartitionInfo
from controlplane.topics import PartitionStorage, TopicOps, TopicView
from proto.sluice.v1 import topics_pb2 as pb
from proto.sluice.v1 import topics_pb2_grpc as pb_grpc


def to_pb(view: TopicView) -> pb.Topic:
    meta, storage = view.meta, view.storage
    return pb.Topic(
        cluster=view.cluster,
        name=meta.name,
        topic_id=meta.topic_id,
        partitions=len(meta.partitions),
        replication_factor=meta.replication_factor,
        internal=meta.internal,
        config=view.config,
        effective_config=view.effective_config,
        partition_details=[
            partition_pb(p, storage.partition(p.partition), storage.replica_hot.get(p.partition))
            for p in meta.partitions
        ],
        hot_bytes=storage.hot_bytes,
        tiered_bytes=storage.tiered_bytes,
        tiered_segments=storage.tiered_segments,
        hot_bytes_per_replica=sum(
            one_copy(p, storage.replica_hot.get(p.partition) or {}) for p in meta.partitions
        ),
    )


def one_copy(p: PartitionInfo, hot: dict[int, int]) -> int:
    """The hot bytes of one copy of a partition: its leader's replica, else the largest."""
    if p.leader in hot:
        return hot[p.leader]
    return max(hot.values(), default=0)


def partition_pb(
    p: PartitionInfo, remote: PartitionStorage, hot: dict[int, int] | None = None
) -> pb.Partition:
    replica_hot = dict.fromkeys(p.replicas, 0) | (hot or {})
    out = pb.Partition(
        partition=p.partition,
        leader=p.leader,
        replicas=p.replicas,
        isr=p.isr,
        tiered_bytes=remote.tiered_bytes,
        tiered_segments=remote.tiered_segments,
        replica_hot_bytes=replica_hot,
        hot_bytes=sum(replica_hot.values()),
    )
    if remote.remote_log_start_offset >= 0:
        out.remote_log_start_offset = remote.remote_log_start_offset
    return out


class TopicsService(pb_grpc.TopicsServicer):
    def __init__(self, ops: TopicOps) -> None:
        self.ops = ops

    @rpc
    async def CreateTopic(
        self, request: pb.CreateTopicRequest, context: grpc.aio.ServicerContext
    ) -> pb.Topic:
        view = await self.ops.create_topic(
            request.cluster,
            request.name,
            request.partitions if request.HasField("partitions") else None,
            request.replication_factor if request.HasField("replication_factor") else None,
            dict(request.config),
        )
        return to_pb(view)

    @rpc
    async def ListTopics(
        self, request: pb.ListTopicsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTopicsResponse:
        views = await self.ops.list_topics(request.cluster, request.include_internal)
        return pb.ListTopicsResponse(topics=[to_pb(v) for v in views])

    @rpc
    async def DescribeTopic(
        self, request: pb.DescribeTopicRequest, context: grpc.aio.ServicerContext
    ) -> pb.Topic:
        return to_pb(await self.ops.describe_topic(request.cluster, request.name))

    @rpc
    async def DeleteTopic(
        self, request: pb.DeleteTopicRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTopicResponse:
        await self.ops.delete_topic(request.cluster, request.name)
        return pb.DeleteTopicResponse()

    @rpc
    async def AlterTopicConfig(
        self, request: pb.AlterTopicConfigRequest, context: grpc.aio.ServicerContext
    ) -> pb.Topic:
        view = await self.ops.alter_topic_config(
            request.cluster, request.name, dict(request.config), list(request.remove)
        )
        return to_pb(view)

    @rpc
    async def AddPartitions(
        self, request: pb.AddPartitionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.Topic:
        return to_pb(await self.ops.add_partitions(request.cluster, request.name, request.total))

    @rpc
    async def FindOrphans(
        self, request: pb.FindOrphansRequest, context: grpc.aio.ServicerContext
    ) -> pb.FindOrphansResponse:
        min_age = request.min_age_seconds if request.HasField("min_age_seconds") else 300
        if min_age < 0:
            raise errors.BadRequest(
                f"min_age_seconds must be >= 0, got {min_age}", cluster=request.cluster
            )
        report = await self.ops.find_orphans(
            request.cluster, delete=request.delete, min_age_seconds=min_age
        )
        return pb.FindOrphansResponse(
            orphans=[
                pb.Orphan(
                    key=o.key,
                    size=o.size,
                    reason=o.reason,
                    last_modified=timestamp(o.last_modified.timestamp())
                    if o.last_modified is not None
                    else None,
                )
                for o in report.orphans
            ],
            total_bytes=report.total_bytes,
            scanned=report.scanned,
            deleted=report.deleted,
            bucket=report.bucket,
            prefix=report.prefix,
            too_young=report.too_young,
        )
