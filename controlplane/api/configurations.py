"""The Configurations service (proto/sluice/v1/configurations.proto): named, revisioned
broker settings (``controlplane/configurations.py``)."""

from __future__ import annotations

import grpc

from controlplane.api.common import rpc, timestamp
from controlplane.configurations import Configuration, ConfigurationOps
from proto.sluice.v1 import configurations_pb2 as pb
from proto.sluice.v1 import configurations_pb2_grpc as pb_grpc


def to_pb(found: Configuration) -> pb.Configuration:
    return pb.Configuration(
        name=found.name,
        arn=found.arn,
        revision=found.current.revision,
        latest_revision=found.latest,
        description=found.current.description,
        server_properties=dict(found.current.properties),
        revisions=[
            pb.ConfigurationRevision(
                revision=r.revision, description=r.description, created_at=timestamp(r.created_at)
            )
            for r in found.revisions
        ],
        created_at=timestamp(found.created_at),
        clusters=list(found.clusters),
    )


class ConfigurationsService(pb_grpc.ConfigurationsServicer):
    def __init__(self, ops: ConfigurationOps) -> None:
        self.ops = ops

    @rpc
    async def CreateConfiguration(
        self, request: pb.CreateConfigurationRequest, context: grpc.aio.ServicerContext
    ) -> pb.Configuration:
        return to_pb(
            self.ops.create(request.name, request.description, dict(request.server_properties))
        )

    @rpc
    async def GetConfiguration(
        self, request: pb.GetConfigurationRequest, context: grpc.aio.ServicerContext
    ) -> pb.Configuration:
        return to_pb(self.ops.get(request.name, request.revision))

    @rpc
    async def ListConfigurations(
        self, request: pb.ListConfigurationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListConfigurationsResponse:
        return pb.ListConfigurationsResponse(configurations=[to_pb(c) for c in self.ops.list()])

    @rpc
    async def UpdateConfiguration(
        self, request: pb.UpdateConfigurationRequest, context: grpc.aio.ServicerContext
    ) -> pb.Configuration:
        return to_pb(
            self.ops.update(request.name, request.description, dict(request.server_properties))
        )

    @rpc
    async def DeleteConfiguration(
        self, request: pb.DeleteConfigurationRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteConfigurationResponse:
        self.ops.delete(request.name)
        return pb.DeleteConfigurationResponse()
