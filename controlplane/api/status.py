"""The ControlPlane service (proto/sluice/v1/controlplane.proto): `cloudctl status` and
`cloudctl down`."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import grpc

from controlplane import errors
from controlplane.api.common import rpc, timestamp
from controlplane.auth import Tokens
from controlplane.reconciler import ClusterManager
from proto.sluice.v1 import controlplane_pb2 as pb
from proto.sluice.v1 import controlplane_pb2_grpc as pb_grpc

VERSION = "0.1.0"
log = logging.getLogger(__name__)


class StatusService(pb_grpc.ControlPlaneServicer):
    def __init__(
        self,
        manager: ClusterManager,
        endpoint: str,
        started_at: float,
        request_stop: Callable[[], None],
        tokens: Tokens,
    ) -> None:
        self.manager = manager
        self.tokens = tokens
        self.endpoint = endpoint
        self.started_at = started_at
        self.request_stop = request_stop
        """Makes the control plane stop as SIGTERM does (``ControlPlane.request_stop``)."""

    def processes(self) -> list[pb.ManagedProcess]:
        """Every process this control plane runs: itself, the embedded S3 server, brokers."""
        out = [pb.ManagedProcess(kind=pb.PROCESS_KIND_CONTROL_PLANE, pid=os.getpid())]
        objects = self.manager.object_store
        if objects is not None:
            out += [
                pb.ManagedProcess(kind=pb.PROCESS_KIND_EMBEDDED_S3, pid=pid)
                for pid in objects.pids()
            ]
        for cluster, broker_id, pid in self.manager.broker_processes():
            process = pb.ManagedProcess(kind=pb.PROCESS_KIND_BROKER, pid=pid, cluster=cluster)
            if broker_id is not None:
                process.broker_id = broker_id
            out.append(process)
        return out

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
            processes=self.processes(),
        )

    @rpc
    async def Shutdown(
        self, request: pb.ShutdownRequest, context: grpc.aio.ServicerContext
    ) -> pb.ShutdownResponse:
        """Nothing starts from here on (no await between the halt and the list, so the list
        is complete); the stop runs once this answer is on its way."""
        if request.pid and request.pid != os.getpid():
            raise errors.PreconditionFailed(
                f"this control plane is pid {os.getpid()}, not {request.pid}; nothing stopped"
            )
        self.manager.halt()
        processes = self.processes()
        self.request_stop()
        return pb.ShutdownResponse(processes=processes)

    @rpc
    async def RotateToken(
        self, request: pb.RotateTokenRequest, context: grpc.aio.ServicerContext
    ) -> pb.RotateTokenResponse:
        grace = request.grace_seconds
        try:
            token = self.tokens.rotate(grace)
        except ValueError as exc:
            raise errors.BadRequest(str(exc)) from None
        log.info("API token rotated (the previous one valid %d s more)", grace)
        answer = pb.RotateTokenResponse(token=token, token_file=str(self.tokens.path))
        if grace:
            answer.previous_valid_until.CopyFrom(timestamp(time.time() + grace))
        return answer
