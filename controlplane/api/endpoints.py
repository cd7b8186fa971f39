"""The Endpoints service (proto/sluice/v1/endpoints.proto): private endpoints of a cluster
(``controlplane/endpoints.py``)."""

from __future__ import annotations

import grpc

from controlplane import errors
from controlplane.api.common import rpc, timestamp
from controlplane.endpoints import EndpointOps, EndpointRecord, EndpointState
from controlplane.states import ClientAuth, OperationType
from proto.sluice.v1 import clusters_pb2
from proto.sluice.v1 import endpoints_pb2 as pb
from proto.sluice.v1 import endpoints_pb2_grpc as pb_grpc


def to_pb(endpoint: EndpointRecord, operation_id: str = "") -> pb.PrivateEndpoint:
    return pb.PrivateEndpoint(
        cluster=endpoint.cluster,
        name=endpoint.name,
        state=endpoint.state.to_proto(),
        client_auth=endpoint.client_auth.to_proto(),
        listener_name=endpoint.listener,
        security_protocol=endpoint.protocol,
        address=endpoint.address,
        allowed_principals=list(endpoint.allowed),
        brokers=[
            pb.PrivateEndpointBroker(
                broker_id=broker_id, port=port, address=f"{endpoint.address}:{port}"
            )
            for broker_id, port in sorted(endpoint.ports.items())
        ],
        bootstrap_brokers=endpoint.bootstrap(),
        created_at=timestamp(endpoint.created_at),
        operation_id=operation_id,
    )


class EndpointsService(pb_grpc.EndpointsServicer):
    def __init__(self, ops: EndpointOps) -> None:
        self.ops = ops

    def _pb(self, endpoint: EndpointRecord) -> pb.PrivateEndpoint:
        """The message; a CREATING or DELETING endpoint names the operation that runs."""
        cluster = self.ops.cluster(endpoint.cluster)
        running = (
            cluster.operation_id
            if endpoint.state is not EndpointState.ACTIVE
            and cluster.operation == OperationType.UPDATE_CONNECTIVITY
            else ""
        )
        return to_pb(endpoint, running)

    @rpc
    async def CreatePrivateEndpoint(
        self, request: pb.CreatePrivateEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.PrivateEndpoint:
        mode = None
        if request.client_auth != clusters_pb2.CLIENT_AUTH_UNSPECIFIED:
            try:
                mode = ClientAuth.from_proto(request.client_auth)
            except ValueError as exc:
                raise errors.BadRequest(
                    f"{exc}: give NONE, SCRAM or TLS", cluster=request.cluster
                ) from None
        endpoint = self.ops.create(
            request.cluster, request.name, mode, list(request.allowed_principals)
        )
        return self._pb(endpoint)

    @rpc
    async def GetPrivateEndpoint(
        self, request: pb.GetPrivateEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.PrivateEndpoint:
        return self._pb(self.ops.get(request.cluster, request.name))

    @rpc
    async def ListPrivateEndpoints(
        self, request: pb.ListPrivateEndpointsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPrivateEndpointsResponse:
        found = self.ops.list_endpoints(request.cluster)
        return pb.ListPrivateEndpointsResponse(endpoints=[self._pb(e) for e in found])

    @rpc
    async def DeletePrivateEndpoint(
        self, request: pb.DeletePrivateEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.PrivateEndpoint:
        return self._pb(self.ops.delete(request.cluster, request.name))
