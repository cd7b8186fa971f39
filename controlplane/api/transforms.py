"""The Transforms service (proto/sluice/v1/transforms.proto): WebAssembly transforms run by
the brokers (``controlplane/transforms.py``), and their guests' log lines
(``controlplane/transform_logs.py``, a server stream)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from controlplane.api.common import log, rpc
from controlplane.errors import ControlPlaneError, rich_status
from controlplane.transform_logs import TransformLogs
from controlplane.transforms import PartitionState, TransformOps, TransformState, TransformView
from proto.sluice.v1 import transforms_pb2 as pb
from proto.sluice.v1 import transforms_pb2_grpc as pb_grpc

STATES: dict[TransformState, pb.TransformState] = {
    TransformState.RUNNING: pb.RUNNING,
    TransformState.PAUSED: pb.PAUSED,
    TransformState.FAILED: pb.FAILED,
    TransformState.STARTING: pb.STARTING,
}
PARTITION_STATES: dict[PartitionState, pb.TransformPartitionState] = {
    PartitionState.STARTING: pb.PARTITION_STARTING,
    PartitionState.RUNNING: pb.PARTITION_RUNNING,
    PartitionState.PAUSED: pb.PARTITION_PAUSED,
    PartitionState.FAILED: pb.PARTITION_FAILED,
    PartitionState.UNASSIGNED: pb.PARTITION_UNASSIGNED,
}
"""The one mapping of the states to the API's enums (explicit, never by name)."""


def transform_pb(view: TransformView) -> pb.Transform:
    return pb.Transform(
        cluster=view.cluster,
        name=view.name,
        input_topic=view.input_topic,
        output_topics=list(view.output_topics),
        env=view.env,
        module_sha256=view.module_sha256,
        module_size=view.module_size,
        abi=view.abi,
        version=view.version,
        state=STATES[view.state],
        partitions=[
            pb.TransformPartition(
                partition=p.partition,
                state=PARTITION_STATES[p.state],
                broker=p.broker,
                error=p.error,
                committed_offset=p.committed_offset,
                lag=p.lag,
                processed=p.processed,
                outputs=p.outputs,
            )
            for p in view.partitions
        ],
        total_lag=view.total_lag,
    )


class TransformsService(pb_grpc.TransformsServicer):
    def __init__(self, ops: TransformOps) -> None:
        self.ops = ops
        self.logs = TransformLogs(ops)

    @rpc
    async def DeployTransform(
        self, request: pb.DeployTransformRequest, context: grpc.aio.ServicerContext
    ) -> pb.Transform:
        view = await self.ops.deploy(
            request.cluster,
            request.name,
            module=request.module,
            input_topic=request.input_topic,
            output_topics=list(request.output_topics),
            env=dict(request.env),
        )
        return transform_pb(view)

    @rpc
    async def ListTransforms(
        self, request: pb.ListTransformsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTransformsResponse:
        views = await self.ops.list(request.cluster)
        return pb.ListTransformsResponse(transforms=[transform_pb(v) for v in views])

    @rpc
    async def DescribeTransform(
        self, request: pb.TransformRef, context: grpc.aio.ServicerContext
    ) -> pb.Transform:
        return transform_pb(await self.ops.describe(request.cluster, request.name))

    @rpc
    async def PauseTransform(
        self, request: pb.TransformRef, context: grpc.aio.ServicerContext
    ) -> pb.Transform:
        return transform_pb(await self.ops.pause(request.cluster, request.name))

    @rpc
    async def ResumeTransform(
        self, request: pb.TransformRef, context: grpc.aio.ServicerContext
    ) -> pb.Transform:
        return transform_pb(await self.ops.resume(request.cluster, request.name))

    @rpc
    async def DeleteTransform(
        self, request: pb.TransformRef, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTransformResponse:
        await self.ops.delete(request.cluster, request.name)
        return pb.DeleteTransformResponse()

    async def TransformLogs(
        self, request: pb.TransformLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.TransformLogLine]:
        """A server stream: a typed error ends it with its status and ErrorInfo, before the
        first line (an unknown cluster) or later (the cluster deleted while followed)."""
        lines = self.logs.lines(
            request.cluster, request.name, request.since_ms, follow=request.follow
        )
        try:
            async for line in lines:
                yield pb.TransformLogLine(
                    timestamp_ms=line.timestamp_ms,
                    partition=line.partition,
                    stream=line.stream,
                    text=line.text,
                )
        except ControlPlaneError as exc:
            status = rich_status(exc)
            await context.abort(status.code, status.details, status.trailing_metadata)
        except Exception as exc:
            log.exception("TransformLogs failed")
            status = rich_status(
                exc,
                f"internal error in TransformLogs: {type(exc).__name__}: {exc} "
                "(see $SLUICE_HOME/logs/controlplane.log)",
            )
            await context.abort(status.code, status.details, status.trailing_metadata)
        finally:
            await lines.aclose()
