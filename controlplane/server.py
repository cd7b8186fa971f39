"""The control-plane process: gRPC server (+ health, reflection, auth) over the backend.

Start: the state store, the object store (the embedded S3 server adopted or started in the
background, or an external endpoint), the gRPC server, then the clusters' reconcilers and the
meter (``metering.py``). Stop (SIGTERM, or ControlPlane.Shutdown from ``cloudctl down``): the
meter, brokers, then the embedded S3 server, then the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from controlplane.api.billing import BillingService
from controlplane.api.clusters import ClustersService
from controlplane.api.configurations import ConfigurationsService
from controlplane.api.endpoints import EndpointsService
from controlplane.api.groups import GroupsService
from controlplane.api.logs import LogsService
from controlplane.api.operations import OperationsService
from controlplane.api.replicators import ReplicatorsService
from controlplane.api.security import AclsService, UsersService
from controlplane.api.status import StatusService
from controlplane.api.topics import TopicsService
from controlplane.api.transforms import TransformsService
from controlplane.auth import BearerTokenInterceptor, Tokens, ensure_token
from controlplane.billing import BillingRunner
from controlplane.billing_archive import UsageArchiver
from controlplane.billing_usage import BillingReports
from controlplane.config import Settings
from controlplane.endpoints import EndpointOps
from controlplane.frontend import ClusterFrontend
from controlplane.groups import GroupOps
from controlplane.metering import Meter
from controlplane.objectstore import ObjectStoreManager
from controlplane.reconciler import ClusterManager
from controlplane.replicator_runner import ReplicatorRunner
from controlplane.replicators import ReplicatorOps, Replicators
from controlplane.schema_registry import SchemaRegistryService
from controlplane.security import SecurityOps
from controlplane.store import Store
from controlplane.topics import TopicOps
from controlplane.transforms import TransformOps
from proto.sluice.v1 import (
    billing_pb2,
    billing_pb2_grpc,
    clusters_pb2,
    clusters_pb2_grpc,
    configurations_pb2,
    configurations_pb2_grpc,
    controlplane_pb2,
    controlplane_pb2_grpc,
    endpoints_pb2,
    endpoints_pb2_grpc,
    groups_pb2,
    groups_pb2_grpc,
    logs_pb2,
    logs_pb2_grpc,
    operations_pb2,
    operations_pb2_grpc,
    replicators_pb2,
    replicators_pb2_grpc,
    security_pb2,
    security_pb2_grpc,
    topics_pb2,
    topics_pb2_grpc,
    transforms_pb2,
    transforms_pb2_grpc,
)
from sluice_client.client import MAX_MESSAGE_BYTES

log = logging.getLogger("sluice.controlplane")

PID_FILE = "controlplane.pid"
ENDPOINT_FILE = "endpoint"
LOCK_FILE = "controlplane.lock"
STATE_DB = "state.db"
SERVICE_NAMES = (
    clusters_pb2.DESCRIPTOR.services_by_name["Clusters"].full_name,
    topics_pb2.DESCRIPTOR.services_by_name["Topics"].full_name,
    controlplane_pb2.DESCRIPTOR.services_by_name["ControlPlane"].full_name,
    groups_pb2.DESCRIPTOR.services_by_name["Groups"].full_name,
    operations_pb2.DESCRIPTOR.services_by_name["Operations"].full_name,
    logs_pb2.DESCRIPTOR.services_by_name["Logs"].full_name,
    transforms_pb2.DESCRIPTOR.services_by_name["Transforms"].full_name,
    security_pb2.DESCRIPTOR.services_by_name["Users"].full_name,
    security_pb2.DESCRIPTOR.services_by_name["Acls"].full_name,
    endpoints_pb2.DESCRIPTOR.services_by_name["Endpoints"].full_name,
    billing_pb2.DESCRIPTOR.services_by_name["Billing"].full_name,
    configurations_pb2.DESCRIPTOR.services_by_name["Configurations"].full_name,
    replicators_pb2.DESCRIPTOR.services_by_name["Replicators"].full_name,
)


class AlreadyRunning(Exception):
    pass


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


class ControlPlane:
    def __init__(
        self, home: Path, listen: str, settings: Settings, s3_endpoint: str | None = None
    ) -> None:
        self.home = home.resolve()
        self.listen = listen
        self.settings = settings
        self.s3_endpoint = s3_endpoint
        self.endpoint = ""
        self._lock_fd: int | None = None
        self.server: grpc.aio.Server | None = None
        self.health = health.aio.HealthServicer()
        self.store: Store | None = None
        self.manager: ClusterManager | None = None
        self.object_store: ObjectStoreManager | None = None
        self.billing: BillingRunner | None = None
        self.meter: Meter | None = None
        self.replicators: ReplicatorRunner | None = None
        self.schema_registry: SchemaRegistryService | None = None
        self._stop_requested = asyncio.Event()

    def _lock(self) -> None:
        fd = os.open(self.home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = ""
            with contextlib.suppress(OSError):
                pid = (self.home / PID_FILE).read_text().strip()
            raise AlreadyRunning(
                f"another control plane (pid {pid or '?'}) already runs for {self.home}"
            ) from None
        self._lock_fd = fd

    async def start(self) -> None:  # noqa: PLR0915 - assembles every service, in order
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.home / "logs").mkdir(exist_ok=True)
        self._lock()
        tokens = Tokens(self.home, ensure_token(self.home))
        self.store = Store(self.home / STATE_DB)
        self.object_store = ObjectStoreManager(
            self.home, self.store, self.settings, self.s3_endpoint
        )
        self.manager = ClusterManager(self.store, self.settings, self.home, self.object_store)
        self.meter = Meter(self.store, self.settings, reads=self.object_store.read_counts)
        self.manager.final_meter = self.meter.until_deleted
        frontend = ClusterFrontend(self.store, self.manager, self.settings)
        timeout = self.settings.kafka_request_timeout_ms / 1000
        topic_ops = TopicOps(
            self.store,
            timeout,
            self.object_store,
            self.settings.topic_default_replication_factor,
        )

        server = grpc.aio.server(
            interceptors=[BearerTokenInterceptor(tokens)],
            # DeployTransform carries a module (gRPC takes 4 MiB by default): see the constant
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)],
        )
        try:
            port = server.add_insecure_port(self.listen)
        except RuntimeError:
            port = 0
        if not port:
            raise OSError(f"cannot listen on {self.listen}: the address is in use or not local")
        host = self.listen.rpartition(":")[0]
        self.endpoint = f"{host}:{port}"
        self.schema_registry = SchemaRegistryService(self.store, self.settings)
        clusters_pb2_grpc.add_ClustersServicer_to_server(
            ClustersService(frontend, self.manager, self.schema_registry.url), server
        )
        topics_pb2_grpc.add_TopicsServicer_to_server(TopicsService(topic_ops), server)
        groups_pb2_grpc.add_GroupsServicer_to_server(
            GroupsService(GroupOps(self.store, timeout)), server
        )
        operations_pb2_grpc.add_OperationsServicer_to_server(OperationsService(self.store), server)
        logs_pb2_grpc.add_LogsServicer_to_server(LogsService(self.store, self.settings), server)
        transforms_pb2_grpc.add_TransformsServicer_to_server(
            TransformsService(TransformOps(self.store, timeout)), server
        )
        security_ops = SecurityOps(self.store, timeout)
        security_pb2_grpc.add_UsersServicer_to_server(UsersService(security_ops), server)
        security_pb2_grpc.add_AclsServicer_to_server(AclsService(security_ops), server)
        configurations_pb2_grpc.add_ConfigurationsServicer_to_server(
            ConfigurationsService(frontend.configurations), server
        )
        endpoints_pb2_grpc.add_EndpointsServicer_to_server(
            EndpointsService(EndpointOps(self.store, self.manager, self.settings)), server
        )
        self.billing = BillingRunner(self.store, self.settings, self.home, self.object_store)
        reports = BillingReports(self.store, self.settings, self.billing)
        self.manager.final_meter = UsageArchiver(reports, self.home, self.meter).final_usage
        billing_pb2_grpc.add_BillingServicer_to_server(
            BillingService(self.billing, reports), server
        )
        replicators = Replicators(self.store.db)
        self.replicators = ReplicatorRunner(self.store, self.settings, self.home, replicators)
        replicators_pb2_grpc.add_ReplicatorsServicer_to_server(
            ReplicatorsService(
                ReplicatorOps(self.store, self.settings, replicators, self.replicators)
            ),
            server,
        )
        controlplane_pb2_grpc.add_ControlPlaneServicer_to_server(
            StatusService(self.manager, self.endpoint, time.time(), self.request_stop, tokens),
            server,
        )
        # the server as a whole ("", SERVING by default) is NOT_SERVING until every service
        # below is: a client that waits for "" may then call any of them
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
        # before any request: clusters are recorded with the object store's endpoint
        await self.object_store.start()  # the embedded server starts in the background
        await self.schema_registry.start()  # the HTTP server: before any URL is handed out
        await server.start()
        self.server = server
        await self.manager.start()
        await self.replicators.start()  # MirrorMaker processes: after the brokers' adoption
        self.billing.start()  # fails the runs a killed control plane left, then the schedule
        self.meter.start()  # its first pass catches up on what was not metered while down
        for name in (*SERVICE_NAMES, ""):  # "" last: it says every service is ready
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        write_atomic(self.home / ENDPOINT_FILE, self.endpoint + "\n")
        write_atomic(self.home / PID_FILE, f"{os.getpid()}\n")
        log.info("control plane %d serving on %s (home %s)", os.getpid(), self.endpoint, self.home)

    async def stop(self) -> None:  # noqa: PLR0912 - stops every service, in order
        """Stop every broker, then the server (``cloudctl down``)."""
        log.info("stopping: brokers first")
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        if self.meter is not None:
            await self.meter.stop()
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        if self.billing is not None:
            await self.billing.stop()  # its job reads the brokers: first
        if self.replicators is not None:
            await self.replicators.shutdown()  # MirrorMaker talks to the brokers: first
        if self.manager is not None:
            await self.manager.shutdown()
        if self.object_store is not None:
            await self.object_store.stop()
        if self.server is not None:
            await self.server.stop(grace=2)
        if self.store is not None:
            self.store.close()
        for name in (PID_FILE, ENDPOINT_FILE):
            try:
                path = self.home / name
                if name != PID_FILE or path.read_text().strip() == str(os.getpid()):
                    path.unlink()
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        log.info("stopped cleanly")

    def request_stop(self) -> None:
        """Make ``serve_until_signal`` stop (SIGTERM, SIGINT, or the Shutdown RPC)."""
        self._stop_requested.set()

    async def serve_until_signal(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        await self._stop_requested.wait()
        await self.stop()
