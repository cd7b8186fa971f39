from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScramMechanism(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCRAM_MECHANISM_UNSPECIFIED: _ClassVar[ScramMechanism]
    SCRAM_SHA_256: _ClassVar[ScramMechanism]
    SCRAM_SHA_512: _ClassVar[ScramMechanism]

class ResourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOURCE_TYPE_UNSPECIFIED: _ClassVar[ResourceType]
    RESOURCE_TYPE_ANY: _ClassVar[ResourceType]
    RESOURCE_TYPE_TOPIC: _ClassVar[ResourceType]
    RESOURCE_TYPE_GROUP: _ClassVar[ResourceType]
    RESOURCE_TYPE_CLUSTER: _ClassVar[ResourceType]
    RESOURCE_TYPE_TRANSACTIONAL_ID: _ClassVar[ResourceType]
    RESOURCE_TYPE_DELEGATION_TOKEN: _ClassVar[ResourceType]
    RESOURCE_TYPE_USER: _ClassVar[ResourceType]

class PatternType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PATTERN_TYPE_UNSPECIFIED: _ClassVar[PatternType]
    PATTERN_TYPE_ANY: _ClassVar[PatternType]
    PATTERN_TYPE_MATCH: _ClassVar[PatternType]
    PATTERN_TYPE_LITERAL: _ClassVar[PatternType]
    PATTERN_TYPE_PREFIXED: _ClassVar[PatternType]

class AclOperation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_OPERATION_UNSPECIFIED: _ClassVar[AclOperation]
    ACL_OPERATION_ANY: _ClassVar[AclOperation]
    ACL_OPERATION_ALL: _ClassVar[AclOperation]
    ACL_OPERATION_READ: _ClassVar[AclOperation]
    ACL_OPERATION_WRITE: _ClassVar[AclOperation]
    ACL_OPERATION_CREATE: _ClassVar[AclOperation]
    ACL_OPERATION_DELETE: _ClassVar[AclOperation]
    ACL_OPERATION_ALTER: _ClassVar[AclOperation]
    ACL_OPERATION_DESCRIBE: _ClassVar[AclOperation]
    ACL_OPERATION_CLUSTER_ACTION: _ClassVar[AclOperation]
    ACL_OPERATION_DESCRIBE_CONFIGS: _ClassVar[AclOperation]
    ACL_OPERATION_ALTER_CONFIGS: _ClassVar[AclOperation]
    ACL_OPERATION_IDEMPOTENT_WRITE: _ClassVar[AclOperation]
    ACL_OPERATION_CREATE_TOKENS: _ClassVar[AclOperation]
    ACL_OPERATION_DESCRIBE_TOKENS: _ClassVar[AclOperation]

class AclPermission(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACL_PERMISSION_UNSPECIFIED: _ClassVar[AclPermission]
    ACL_PERMISSION_ANY: _ClassVar[AclPermission]
    ACL_PERMISSION_DENY: _ClassVar[AclPermission]
    ACL_PERMISSION_ALLOW: _ClassVar[AclPermission]
SCRAM_MECHANISM_UNSPECIFIED: ScramMechanism
SCRAM_SHA_256: ScramMechanism
SCRAM_SHA_512: ScramMechanism
RESOURCE_TYPE_UNSPECIFIED: ResourceType
RESOURCE_TYPE_ANY: ResourceType
RESOURCE_TYPE_TOPIC: ResourceType
RESOURCE_TYPE_GROUP: ResourceType
RESOURCE_TYPE_CLUSTER: ResourceType
RESOURCE_TYPE_TRANSACTIONAL_ID: ResourceType
RESOURCE_TYPE_DELEGATION_TOKEN: ResourceType
RESOURCE_TYPE_USER: ResourceType
PATTERN_TYPE_UNSPECIFIED: PatternType
PATTERN_TYPE_ANY: PatternType
PATTERN_TYPE_MATCH: PatternType
PATTERN_TYPE_LITERAL: PatternType
PATTERN_TYPE_PREFIXED: PatternType
ACL_OPERATION_UNSPECIFIED: AclOperation
ACL_OPERATION_ANY: AclOperation
ACL_OPERATION_ALL: AclOperation
ACL_OPERATION_READ: AclOperation
ACL_OPERATION_WRITE: AclOperation
ACL_OPERATION_CREATE: AclOperation
ACL_OPERATION_DELETE: AclOperation
ACL_OPERATION_ALTER: AclOperation
ACL_OPERATION_DESCRIBE: AclOperation
ACL_OPERATION_CLUSTER_ACTION: AclOperation
ACL_OPERATION_DESCRIBE_CONFIGS: AclOperation
ACL_OPERATION_ALTER_CONFIGS: AclOperation
ACL_OPERATION_IDEMPOTENT_WRITE: AclOperation
ACL_OPERATION_CREATE_TOKENS: AclOperation
ACL_OPERATION_DESCRIBE_TOKENS: AclOperation
ACL_PERMISSION_UNSPECIFIED: AclPermission
ACL_PERMISSION_ANY: AclPermission
ACL_PERMISSION_DENY: AclPermission
ACL_PERMISSION_ALLOW: AclPermission

class CreateUserRequest(_message.Message):
    __slots__ = ("cluster", "name", "mechanism", "iterations", "password")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    mechanism: ScramMechanism
    iterations: int
    password: str
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., mechanism: _Optional[_Union[ScramMechanism, str]] = ..., iterations: _Optional[int] = ..., password: _Optional[str] = ...) -> None: ...

class ScramCredentialInfo(_message.Message):
    __slots__ = ("mechanism", "iterations")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    mechanism: ScramMechanism
    iterations: int
    def __init__(self, mechanism: _Optional[_Union[ScramMechanism, str]] = ..., iterations: _Optional[int] = ...) -> None: ...

class User(_message.Message):
    __slots__ = ("cluster", "name", "credentials")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    credentials: _containers.RepeatedCompositeFieldContainer[ScramCredentialInfo]
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., credentials: _Optional[_Iterable[_Union[ScramCredentialInfo, _Mapping]]] = ...) -> None: ...

class DeleteUserRequest(_message.Message):
    __slots__ = ("cluster", "name", "mechanism")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    mechanism: ScramMechanism
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., mechanism: _Optional[_Union[ScramMechanism, str]] = ...) -> None: ...

class DeleteUserResponse(_message.Message):
    __slots__ = ("cluster", "name", "deleted")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    deleted: _containers.RepeatedScalarFieldContainer[ScramMechanism]
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., deleted: _Optional[_Iterable[_Union[ScramMechanism, str]]] = ...) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ("cluster",)
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    def __init__(self, cluster: _Optional[str] = ...) -> None: ...

class ListUsersResponse(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[User]
    def __init__(self, users: _Optional[_Iterable[_Union[User, _Mapping]]] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission
    def __init__(self, resource_type: _Optional[_Union[ResourceType, str]] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[_Union[PatternType, str]] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[_Union[AclOperation, str]] = ..., permission: _Optional[_Union[AclPermission, str]] = ...) -> None: ...

class AclFilter(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission
    def __init__(self, resource_type: _Optional[_Union[ResourceType, str]] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[_Union[PatternType, str]] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[_Union[AclOperation, str]] = ..., permission: _Optional[_Union[AclPermission, str]] = ...) -> None: ...

class CreateAclRequest(_message.Message):
    __slots__ = ("cluster", "acl")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    acl: AclBinding
    def __init__(self, cluster: _Optional[str] = ..., acl: _Optional[_Union[AclBinding, _Mapping]] = ...) -> None: ...

class ListAclsRequest(_message.Message):
    __slots__ = ("cluster", "filter")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    filter: AclFilter
    def __init__(self, cluster: _Optional[str] = ..., filter: _Optional[_Union[AclFilter, _Mapping]] = ...) -> None: ...

class ListAclsResponse(_message.Message):
    __slots__ = ("acls",)
    ACLS_FIELD_NUMBER: _ClassVar[int]
    acls: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, acls: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("cluster", "filter")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    filter: AclFilter
    def __init__(self, cluster: _Optional[str] = ..., filter: _Optional[_Union[AclFilter, _Mapping]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, deleted: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...
