"""The Operations service (proto/sluice/v1/operations.proto): the history of every cluster
operation, from the state store."""

from __future__ import annotations

import grpc

from controlplane import errors
from controlplane.api.common import rpc, timestamp
from controlplane.store import OperationRecord, Store
from proto.sluice.v1 import operations_pb2 as pb
from proto.sluice.v1 import operations_pb2_grpc as pb_grpc


def to_pb(op: OperationRecord) -> pb.Operation:
    out = pb.Operation(
        id=op.id,
        cluster=op.cluster,
        cluster_id=op.cluster_id,
        type=op.type.to_proto(),
        state=op.state.to_proto(),
        detail=op.detail,
        state_message=op.state_message,
        error=op.error,
        started_at=timestamp(op.started_at),
    )
    if op.ended_at is not None:
        out.ended_at.CopyFrom(timestamp(op.ended_at))
    return out


class OperationsService(pb_grpc.OperationsServicer):
    def __init__(self, store_: Store) -> None:
        self.store = store_

    @rpc
    async def ListOperations(
        self, request: pb.ListOperationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListOperationsResponse:
        name = request.cluster or None
        found = self.store.operations(name)
        if name is not None and not found and self.store.get_cluster(name) is None:
            raise errors.ClusterNotFound(
                f"cluster {name!r} not found, and no operation was recorded for that name",
                cluster=name,
            )
        return pb.ListOperationsResponse(operations=[to_pb(op) for op in found])

    @rpc
    async def GetOperation(
        self, request: pb.GetOperationRequest, context: grpc.aio.ServicerContext
    ) -> pb.Operation:
        op = self.store.operation(request.id)
        if op is None:
            raise errors.OperationNotFound(
                f"operation {request.id!r} not found", operation=request.id
            )
        return to_pb(op)
