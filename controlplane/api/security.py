"""The Users and Acls services (proto/sluice/v1/security.proto): SCRAM users and ACLs over
the Kafka protocol (``controlplane/security.py``). The enums cross the boundary through the
tables below (the proto's values and Kafka's codes happen to share their numbers; the tables
do not rely on it). A password is passed on once and never logged or returned."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import grpc

from controlplane import errors
from controlplane.api.common import rpc
from controlplane.kafka_security import (
    Acl,
    AclFilter,
    Credential,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    ScramMechanism,
)
from controlplane.security import SecurityOps
from proto.sluice.v1 import security_pb2 as pb
from proto.sluice.v1 import security_pb2_grpc as pb_grpc

K = TypeVar("K")
V = TypeVar("V")

MECHANISMS: dict[pb.ScramMechanism, ScramMechanism] = {
    pb.SCRAM_SHA_256: ScramMechanism.SCRAM_SHA_256,
    pb.SCRAM_SHA_512: ScramMechanism.SCRAM_SHA_512,
}
RESOURCE_TYPES: dict[pb.ResourceType, ResourceType] = {
    pb.RESOURCE_TYPE_UNSPECIFIED: ResourceType.UNKNOWN,
    pb.RESOURCE_TYPE_ANY: ResourceType.ANY,
    pb.RESOURCE_TYPE_TOPIC: ResourceType.TOPIC,
    pb.RESOURCE_TYPE_GROUP: ResourceType.GROUP,
    pb.RESOURCE_TYPE_CLUSTER: ResourceType.CLUSTER,
    pb.RESOURCE_TYPE_TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID,
    pb.RESOURCE_TYPE_DELEGATION_TOKEN: ResourceType.DELEGATION_TOKEN,
    pb.RESOURCE_TYPE_USER: ResourceType.USER,
}
PATTERN_TYPES: dict[pb.PatternType, PatternType] = {
    pb.PATTERN_TYPE_UNSPECIFIED: PatternType.UNKNOWN,
    pb.PATTERN_TYPE_ANY: PatternType.ANY,
    pb.PATTERN_TYPE_MATCH: PatternType.MATCH,
    pb.PATTERN_TYPE_LITERAL: PatternType.LITERAL,
    pb.PATTERN_TYPE_PREFIXED: PatternType.PREFIXED,
}
OPERATIONS: dict[pb.AclOperation, Operation] = {
    pb.ACL_OPERATION_UNSPECIFIED: Operation.UNKNOWN,
    pb.ACL_OPERATION_ANY: Operation.ANY,
    pb.ACL_OPERATION_ALL: Operation.ALL,
    pb.ACL_OPERATION_READ: Operation.READ,
    pb.ACL_OPERATION_WRITE: Operation.WRITE,
    pb.ACL_OPERATION_CREATE: Operation.CREATE,
    pb.ACL_OPERATION_DELETE: Operation.DELETE,
    pb.ACL_OPERATION_ALTER: Operation.ALTER,
    pb.ACL_OPERATION_DESCRIBE: Operation.DESCRIBE,
    pb.ACL_OPERATION_CLUSTER_ACTION: Operation.CLUSTER_ACTION,
    pb.ACL_OPERATION_DESCRIBE_CONFIGS: Operation.DESCRIBE_CONFIGS,
    pb.ACL_OPERATION_ALTER_CONFIGS: Operation.ALTER_CONFIGS,
    pb.ACL_OPERATION_IDEMPOTENT_WRITE: Operation.IDEMPOTENT_WRITE,
    pb.ACL_OPERATION_CREATE_TOKENS: Operation.CREATE_TOKENS,
    pb.ACL_OPERATION_DESCRIBE_TOKENS: Operation.DESCRIBE_TOKENS,
}
PERMISSIONS: dict[pb.AclPermission, Permission] = {
    pb.ACL_PERMISSION_UNSPECIFIED: Permission.UNKNOWN,
    pb.ACL_PERMISSION_ANY: Permission.ANY,
    pb.ACL_PERMISSION_DENY: Permission.DENY,
    pb.ACL_PERMISSION_ALLOW: Permission.ALLOW,
}


def _inverse(table: Mapping[K, V]) -> dict[V, K]:
    return {v: k for k, v in table.items()}


MECHANISMS_PB = _inverse(MECHANISMS)
RESOURCE_TYPES_PB = _inverse(RESOURCE_TYPES)
PATTERN_TYPES_PB = _inverse(PATTERN_TYPES)
OPERATIONS_PB = _inverse(OPERATIONS)
PERMISSIONS_PB = _inverse(PERMISSIONS)


def _value(table: Mapping[Any, V], number: int, field: str, cluster: str) -> V:
    """The value of an enum number; one this version does not know is INVALID_ARGUMENT."""
    found = table.get(number)
    if found is None:
        raise errors.BadRequest(f"unknown {field} {number}", cluster=cluster)
    return found


def mechanism_of(number: int, cluster: str, default: ScramMechanism | None) -> ScramMechanism:
    if number == pb.SCRAM_MECHANISM_UNSPECIFIED and default is not None:
        return default
    return _value(MECHANISMS, number, "SCRAM mechanism", cluster)


def user_pb(cluster: str, name: str, credentials: tuple[Credential, ...]) -> pb.User:
    return pb.User(
        cluster=cluster,
        name=name,
        credentials=[
            pb.ScramCredentialInfo(mechanism=MECHANISMS_PB[c.mechanism], iterations=c.iterations)
            for c in credentials
        ],
    )


def acl_pb(acl: Acl) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=RESOURCE_TYPES_PB[acl.resource_type],
        resource_name=acl.resource_name,
        pattern_type=PATTERN_TYPES_PB[acl.pattern_type],
        principal=acl.principal,
        host=acl.host,
        operation=OPERATIONS_PB[acl.operation],
        permission=PERMISSIONS_PB[acl.permission],
    )


def acl_of(binding: pb.AclBinding, cluster: str) -> Acl:
    """An ACL to create, with Kafka's defaults: LITERAL, ALLOW, every host."""
    pattern = _value(PATTERN_TYPES, binding.pattern_type, "pattern type", cluster)
    permission = _value(PERMISSIONS, binding.permission, "permission", cluster)
    return Acl(
        resource_type=_value(RESOURCE_TYPES, binding.resource_type, "resource type", cluster),
        resource_name=binding.resource_name,
        pattern_type=PatternType.LITERAL if pattern == PatternType.UNKNOWN else pattern,
        principal=binding.principal,
        host=binding.host or "*",
        operation=_value(OPERATIONS, binding.operation, "operation", cluster),
        permission=Permission.ALLOW if permission == Permission.UNKNOWN else permission,
    )


def filter_of(selected: pb.AclFilter, cluster: str) -> AclFilter:
    """A filter; unspecified values select everything (ANY)."""
    rtype = _value(RESOURCE_TYPES, selected.resource_type, "resource type", cluster)
    pattern = _value(PATTERN_TYPES, selected.pattern_type, "pattern type", cluster)
    operation = _value(OPERATIONS, selected.operation, "operation", cluster)
    permission = _value(PERMISSIONS, selected.permission, "permission", cluster)
    return AclFilter(
        resource_type=ResourceType.ANY if rtype == ResourceType.UNKNOWN else rtype,
        resource_name=selected.resource_name if selected.HasField("resource_name") else None,
        pattern_type=PatternType.ANY if pattern == PatternType.UNKNOWN else pattern,
        principal=selected.principal if selected.HasField("principal") else None,
        host=selected.host if selected.HasField("host") else None,
        operation=Operation.ANY if operation == Operation.UNKNOWN else operation,
        permission=Permission.ANY if permission == Permission.UNKNOWN else permission,
    )


class UsersService(pb_grpc.UsersServicer):
    def __init__(self, ops: SecurityOps) -> None:
        self.ops = ops

    @rpc
    async def CreateUser(
        self, request: pb.CreateUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.User:
        mechanism = mechanism_of(
            request.mechanism, request.cluster, default=ScramMechanism.SCRAM_SHA_512
        )
        credentials = await self.ops.create_user(
            request.cluster,
            request.name,
            mechanism,
            request.password,
            request.iterations if request.HasField("iterations") else None,
        )
        return user_pb(request.cluster, request.name, credentials)

    @rpc
    async def DeleteUser(
        self, request: pb.DeleteUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteUserResponse:
        mechanism = (
            None
            if request.mechanism == pb.SCRAM_MECHANISM_UNSPECIFIED
            else mechanism_of(request.mechanism, request.cluster, default=None)
        )
        deleted = await self.ops.delete_user(request.cluster, request.name, mechanism)
        return pb.DeleteUserResponse(
            cluster=request.cluster,
            name=request.name,
            deleted=[MECHANISMS_PB[m] for m in deleted],
        )

    @rpc
    async def ListUsers(
        self, request: pb.ListUsersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListUsersResponse:
        users = await self.ops.list_users(request.cluster)
        return pb.ListUsersResponse(
            users=[user_pb(request.cluster, name, creds) for name, creds in users.items()]
        )


class AclsService(pb_grpc.AclsServicer):
    def __init__(self, ops: SecurityOps) -> None:
        self.ops = ops

    @rpc
    async def CreateAcl(
        self, request: pb.CreateAclRequest, context: grpc.aio.ServicerContext
    ) -> pb.AclBinding:
        created = await self.ops.create_acl(request.cluster, acl_of(request.acl, request.cluster))
        return acl_pb(created)

    @rpc
    async def ListAcls(
        self, request: pb.ListAclsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListAclsResponse:
        selected = filter_of(request.filter, request.cluster)
        found = await self.ops.list_acls(request.cluster, selected)
        return pb.ListAclsResponse(acls=[acl_pb(a) for a in found])

    @rpc
    async def DeleteAcls(
        self, request: pb.DeleteAclsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteAclsResponse:
        deleted = await self.ops.delete_acls(
            request.cluster, filter_of(request.filter, request.cluster)
        )
        return pb.DeleteAclsResponse(deleted=[acl_pb(a) for a in deleted])
