from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OperationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATION_TYPE_UNSPECIFIED: _ClassVar[OperationType]
    OPERATION_TYPE_CREATE: _ClassVar[OperationType]
    OPERATION_TYPE_UPDATE_BROKER_COUNT: _ClassVar[OperationType]
    OPERATION_TYPE_UPDATE_CONFIG: _ClassVar[OperationType]
    OPERATION_TYPE_REBOOT_BROKER: _ClassVar[OperationType]
    OPERATION_TYPE_HEAL: _ClassVar[OperationType]
    OPERATION_TYPE_DELETE: _ClassVar[OperationType]
    OPERATION_TYPE_UPDATE_SECURITY: _ClassVar[OperationType]
    OPERATION_TYPE_UPDATE_CONNECTIVITY: _ClassVar[OperationType]

class OperationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATION_STATE_UNSPECIFIED: _ClassVar[OperationState]
    OPERATION_STATE_IN_PROGRESS: _ClassVar[OperationState]
    OPERATION_STATE_COMPLETED: _ClassVar[OperationState]
    OPERATION_STATE_FAILED: _ClassVar[OperationState]
OPERATION_TYPE_UNSPECIFIED: OperationType
OPERATION_TYPE_CREATE: OperationType
OPERATION_TYPE_UPDATE_BROKER_COUNT: OperationType
OPERATION_TYPE_UPDATE_CONFIG: OperationType
OPERATION_TYPE_REBOOT_BROKER: OperationType
OPERATION_TYPE_HEAL: OperationType
OPERATION_TYPE_DELETE: OperationType
OPERATION_TYPE_UPDATE_SECURITY: OperationType
OPERATION_TYPE_UPDATE_CONNECTIVITY: OperationType
OPERATION_STATE_UNSPECIFIED: OperationState
OPERATION_STATE_IN_PROGRESS: OperationState
OPERATION_STATE_COMPLETED: OperationState
OPERATION_STATE_FAILED: OperationState

class Operation(_message.Message):
    __slots__ = ("id", "cluster", "cluster_id", "type", "state", "detail", "state_message", "error", "started_at", "ended_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    STATE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    cluster: str
    cluster_id: str
    type: OperationType
    state: OperationState
    detail: str
    state_message: str
    error: str
    started_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., cluster: _Optional[str] = ..., cluster_id: _Optional[str] = ..., type: _Optional[_Union[OperationType, str]] = ..., state: _Optional[_Union[OperationState, str]] = ..., detail: _Optional[str] = ..., state_message: _Optional[str] = ..., error: _Optional[str] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListOperationsRequest(_message.Message):
    __slots__ = ("cluster",)
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    def __init__(self, cluster: _Optional[str] = ...) -> None: ...

class ListOperationsResponse(_message.Message):
    __slots__ = ("operations",)
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    operations: _containers.RepeatedCompositeFieldContainer[Operation]
    def __init__(self, operations: _Optional[_Iterable[_Union[Operation, _Mapping]]] = ...) -> None: ...

class GetOperationRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...
