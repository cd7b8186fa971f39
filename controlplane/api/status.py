"""The ControlPlane service (proto/sluice/v1/controlplane.proto): `cloudctl status`."""

from __future__ import annotations

import os

import grpc

from controlplane.api.common import rpc, timestamp
from controlplane.reconciler import ClusterManager
from proto.sluice.v1 import controlplane_pb2 as pb
from proto.sluice.v1 import controlplane_pb2_grpc as pb_grpc

VERSION = "0.1.0"


class StatusService(pb_grpc.ControlPlaneServicer):
    def __init__(self, manager: ClusterManager, endpoint: str, started_at: float) -> None:
        self.manager = manager
        self.endpoint = endpoint
        self.started_at = started_at

    @rpc
    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.Status:
        store = self.manager.store
        objects = self.manager.object_store
        s3_endpoint = s3_note = ""
        object_store = None
        if objects is not None:
            probe = await objects.probe()
            s3_endpoint, s3_note = objects.endpoint, objects.note(probe)
            object_store = pb.ObjectStoreStatus(
                kind=objects.kind,
                endpoint=objects.endpoint,
                data_dir=str(objects.data_dir) if objects.embedded else "",
                pid=objects.pid,
                restarts=objects.restarts,
                answering=probe.answering,
                detail=probe.detail,
            )
        return pb.Status(
            version=VERSION,
            pid=os.getpid(),
            home=str(self.manager.home),
            endpoint=self.endpoint,
            started_at=timestamp(self.started_at),
            s3_endpoint=s3_endpoint,
            s3_note=s3_note,
            clusters=len(store.list_clusters()),
            brokers_running=self.manager.running_brokers(),
            object_store=object_store,
        )
