"""The Clusters service (proto/sluice/v1/clusters.proto)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import grpc

from controlplane import cluster_security, errors
from controlplane.api.common import rpc, timestamp
from controlplane.ca import CertificateAuthority
from controlplane.endpoints import EndpointOps
from controlplane.frontend import ClusterFrontend
from controlplane.reconciler import ClusterManager
from controlplane.states import BrokerState, ClientAuth, ClusterState, StorageMode
from controlplane.store import ClusterRecord
from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import clusters_pb2_grpc as pb_grpc


def modes(values: Sequence[int]) -> list[ClientAuth]:
    """The modes of a request; INVALID_ARGUMENT for UNSPECIFIED or an unknown number."""
    out = []
    for value in values:
        try:
            out.append(ClientAuth.from_proto(value))
        except ValueError as exc:
            raise errors.BadRequest(f"{exc}: give NONE, SCRAM or TLS") from None
    return out


class ClustersService(pb_grpc.ClustersServicer):
    def __init__(
        self,
        frontend: ClusterFrontend,
        manager: ClusterManager,
        registry_url: Callable[[ClusterRecord], str] | None = None,
    ) -> None:
        """``registry_url``: the base URL of a cluster's schema registry (schema_registry/)."""
        self.frontend = frontend
        self.manager = manager
        self.registry_url = registry_url
        self.endpoints = EndpointOps(frontend.store, manager, frontend.settings)

    def to_pb(self, cluster: ClusterRecord, *, credentials: bool = False) -> pb.Cluster:
        """The Cluster message; with ``credentials`` (GetCluster only) its object store carries
        the cluster's read-only key of the embedded server (scoped to its bucket), so that
        clients such as the Spark data source read tiered segments, and nothing more."""
        brokers = self.frontend.brokers(cluster.name)
        out = pb.Cluster(
            name=cluster.name,
            cluster_id=cluster.cluster_id,
            state=cluster.state.to_proto(),
            state_message=cluster.state_message,
            broker_count=cluster.broker_count,
            bootstrap_brokers=cluster_security.bootstrap(cluster, brokers, cluster.client_auth[0]),
            client_auth=[mode.to_proto() for mode in cluster.client_auth],
            broker_type=cluster.broker_type,
            tags=dict(cluster.tags),
            storage_mode=cluster.effective_storage_mode.to_proto(),
            configuration_info=(
                pb.ConfigurationInfo(
                    name=cluster.configuration_name, revision=cluster.configuration_revision
                )
                if cluster.configuration_name
                else None
            ),
            config=cluster.config,
            operation=cluster.operation,
            operation_id=cluster.operation_id,
            created_at=timestamp(cluster.created_at),
            updated_at=timestamp(cluster.updated_at),
            log_dir=str(self.manager.cluster_log_dir(cluster)),
        )
        if self.registry_url is not None and cluster.state is ClusterState.ACTIVE:
            out.schema_registry_url = self.registry_url(cluster)
        for record in brokers:
            runtime = self.manager.runtime(cluster.name, record.broker_id)
            if runtime is None:
                state = BrokerState.PENDING if record.pid == 0 else BrokerState.STOPPED
                pid = 0
            else:
                state = runtime.state
                pid = runtime.proc.pid if runtime.proc is not None else 0
            out.brokers.append(
                pb.Broker(
                    id=record.broker_id,
                    host=record.host,
                    port=record.port,
                    state=state.to_proto(),
                    pid=pid,
                    data_dir=record.data_dir,
                    restarts=record.restarts,
                    log_path=record.log_path,
                    listeners=[
                        pb.Listener(
                            client_auth=kind.auth.to_proto(),
                            name=kind.name,
                            security_protocol=kind.protocol,
                            port=port,
                        )
                        for kind, port in cluster_security.listeners(cluster, record)
                    ],
                )
            )
        objects = self.manager.object_store
        if objects is not None and cluster.s3_bucket:
            if credentials and cluster.state is not ClusterState.DELETING:
                store = objects.cluster_settings(
                    cluster.s3_endpoint, cluster.s3_bucket, read_only=True
                )
            else:  # no key made again for a cluster whose keys are being removed
                store = replace(
                    objects.settings_for(cluster.s3_endpoint, cluster.s3_bucket),
                    access_key_id=None,
                    secret_access_key=None,
                )
            out.object_store.CopyFrom(
                pb.ObjectStore(
                    endpoint=store.endpoint or "",
                    bucket=store.bucket,
                    region=store.region,
                    embedded=objects.embedded and cluster.s3_endpoint == objects.endpoint,
                    access_key_id=store.access_key_id or "",
                    secret_access_key=store.secret_access_key or "",
                )
            )
        return out

    @rpc
    async def CreateCluster(
        self, request: pb.CreateClusterRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        count = request.broker_count if request.HasField("broker_count") else None
        cluster = self.frontend.create(
            request.name,
            count,
            dict(request.config),
            modes(request.client_auth),
            request.broker_type,
            tags=dict(request.tags),
            storage_mode=StorageMode.from_proto(request.storage_mode),
            configuration=(
                (request.configuration_info.name, request.configuration_info.revision)
                if request.HasField("configuration_info")
                else None
            ),
        )
        return self.to_pb(cluster)

    @rpc
    async def UpdateClusterConfiguration(
        self, request: pb.UpdateClusterConfigurationRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        info = request.configuration_info
        cluster = self.frontend.update_configuration(request.name, info.name, info.revision)
        return self.to_pb(cluster)

    @rpc
    async def UpdateClusterTags(
        self, request: pb.UpdateClusterTagsRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        return self.to_pb(self.frontend.update_tags(request.name, dict(request.tags)))

    @rpc
    async def GetCluster(
        self, request: pb.GetClusterRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        return self.to_pb(self.frontend.get(request.name), credentials=True)

    @rpc
    async def ListClusters(
        self, request: pb.ListClustersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListClustersResponse:
        clusters = [self.to_pb(c) for c in self.frontend.list_clusters()]
        return pb.ListClustersResponse(clusters=clusters)

    @rpc
    async def DeleteCluster(
        self, request: pb.DeleteClusterRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        return self.to_pb(self.frontend.delete(request.name))

    @rpc
    async def UpdateBrokerCount(
        self, request: pb.UpdateBrokerCountRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        cluster = self.frontend.update_broker_count(
            request.name, request.broker_count, dict(request.config)
        )
        return self.to_pb(cluster)

    @rpc
    async def UpdateClusterConfig(
        self, request: pb.UpdateClusterConfigRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        cluster = self.frontend.update_config(
            request.name, dict(request.config), list(request.remove)
        )
        return self.to_pb(cluster)

    @rpc
    async def GetBootstrapBrokers(
        self, request: pb.GetBootstrapBrokersRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetBootstrapBrokersResponse:
        cluster = self.frontend.get(request.name)
        brokers = self.frontend.brokers(request.name)
        endpoint = None
        if request.endpoint:  # a private endpoint's listener (endpoints.py)
            endpoint = self.endpoints.active(cluster.name, request.endpoint)
        if request.client_auth == pb.CLIENT_AUTH_UNSPECIFIED:
            mode = cluster.client_auth[0] if endpoint is None else endpoint.client_auth
        else:
            (mode,) = modes([request.client_auth])
        if endpoint is not None and mode is not endpoint.client_auth:
            raise errors.BadRequest(
                f"private endpoint {endpoint.name!r} of cluster {cluster.name!r} is a "
                f"{endpoint.client_auth.option} endpoint, not {mode.option}: leave the auth "
                "mode out, or give its own",
                cluster=cluster.name,
                private_endpoint=endpoint.name,
            )
        if endpoint is None and mode not in cluster.client_auth:
            have = ", ".join(m.option for m in cluster.client_auth)
            raise errors.PreconditionFailed(
                f"cluster {cluster.name!r} has no {mode.option} listener (its client auth: "
                f"{have}); add it with `cloudctl update-cluster-security {cluster.name} "
                + " ".join(f"--client-auth {m.option}" for m in (*cluster.client_auth, mode))
                + "`",
                cluster=cluster.name,
            )
        if endpoint is not None:
            chosen = endpoint.bootstrap()
        else:
            chosen = cluster_security.bootstrap(cluster, brokers, mode)
        return pb.GetBootstrapBrokersResponse(
            endpoint=endpoint.name if endpoint is not None else "",
            bootstrap_brokers=chosen,
            addresses=chosen.split(",") if chosen else [],
            client_auth=mode.to_proto(),
            bootstrap_broker_string=cluster_security.bootstrap(cluster, brokers, ClientAuth.NONE),
            bootstrap_broker_string_tls=cluster_security.bootstrap(
                cluster, brokers, ClientAuth.TLS
            ),
            bootstrap_broker_string_sasl_scram=cluster_security.bootstrap(
                cluster, brokers, ClientAuth.SCRAM
            ),
        )

    @rpc
    async def GetCaCert(
        self, request: pb.GetCaCertRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCaCertResponse:
        self.frontend.get(request.name)
        ca = CertificateAuthority.load_or_create(self.manager.home)
        return pb.GetCaCertResponse(pem=ca.bundle().decode(), sha256_fingerprint=ca.fingerprint())

    @rpc
    async def UpdateClusterSecurity(
        self, request: pb.UpdateClusterSecurityRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        cluster = self.frontend.update_security(
            request.name, modes(request.client_auth), dict(request.config)
        )
        return self.to_pb(cluster)

    @rpc
    async def RebootBroker(
        self, request: pb.RebootBrokerRequest, context: grpc.aio.ServicerContext
    ) -> pb.Cluster:
        return self.to_pb(self.frontend.reboot_broker(request.name, request.broker_id))
