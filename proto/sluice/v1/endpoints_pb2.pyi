from google.protobuf import timestamp_pb2 as _timestamp_pb2
from proto.sluice.v1 import clusters_pb2 as _clusters_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PrivateEndpointState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIVATE_ENDPOINT_STATE_UNSPECIFIED: _ClassVar[PrivateEndpointState]
    PRIVATE_ENDPOINT_STATE_CREATING: _ClassVar[PrivateEndpointState]
    PRIVATE_ENDPOINT_STATE_ACTIVE: _ClassVar[PrivateEndpointState]
    PRIVATE_ENDPOINT_STATE_DELETING: _ClassVar[PrivateEndpointState]
PRIVATE_ENDPOINT_STATE_UNSPECIFIED: PrivateEndpointState
PRIVATE_ENDPOINT_STATE_CREATING: PrivateEndpointState
PRIVATE_ENDPOINT_STATE_ACTIVE: PrivateEndpointState
PRIVATE_ENDPOINT_STATE_DELETING: PrivateEndpointState

class PrivateEndpointBroker(_message.Message):
    __slots__ = ("broker_id", "port", "address")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    port: int
    address: str
    def __init__(self, broker_id: _Optional[int] = ..., port: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class PrivateEndpoint(_message.Message):
    __slots__ = ("cluster", "name", "state", "client_auth", "listener_name", "security_protocol", "address", "allowed_principals", "brokers", "bootstrap_brokers", "created_at", "operation_id")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_AUTH_FIELD_NUMBER: _ClassVar[int]
    LISTENER_NAME_FIELD_NUMBER: _ClassVar[int]
    SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_BROKERS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    state: PrivateEndpointState
    client_auth: _clusters_pb2.ClientAuth
    listener_name: str
    security_protocol: str
    address: str
    allowed_principals: _containers.RepeatedScalarFieldContainer[str]
    brokers: _containers.RepeatedCompositeFieldContainer[PrivateEndpointBroker]
    bootstrap_brokers: str
    created_at: _timestamp_pb2.Timestamp
    operation_id: str
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[_Union[PrivateEndpointState, str]] = ..., client_auth: _Optional[_Union[_clusters_pb2.ClientAuth, str]] = ..., listener_name: _Optional[str] = ..., security_protocol: _Optional[str] = ..., address: _Optional[str] = ..., allowed_principals: _Optional[_Iterable[str]] = ..., brokers: _Optional[_Iterable[_Union[PrivateEndpointBroker, _Mapping]]] = ..., bootstrap_brokers: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., operation_id: _Optional[str] = ...) -> None: ...

class CreatePrivateEndpointRequest(_message.Message):
    __slots__ = ("cluster", "name", "client_auth", "allowed_principals")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_AUTH_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_PRINCIPALS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    client_auth: _clusters_pb2.ClientAuth
    allowed_principals: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., client_auth: _Optional[_Union[_clusters_pb2.ClientAuth, str]] = ..., allowed_principals: _Optional[_Iterable[str]] = ...) -> None: ...

class GetPrivateEndpointRequest(_message.Message):
    __slots__ = ("cluster", "name")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ListPrivateEndpointsRequest(_message.Message):
    __slots__ = ("cluster",)
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    def __init__(self, cluster: _Optional[str] = ...) -> None: ...

class ListPrivateEndpointsResponse(_message.Message):
    __slots__ = ("endpoints",)
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[PrivateEndpoint]
    def __init__(self, endpoints: _Optional[_Iterable[_Union[PrivateEndpoint, _Mapping]]] = ...) -> None: ...

class DeletePrivateEndpointRequest(_message.Message):
    __slots__ = ("cluster", "name")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...
