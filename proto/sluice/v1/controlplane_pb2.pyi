from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProcessKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROCESS_KIND_UNSPECIFIED: _ClassVar[ProcessKind]
    PROCESS_KIND_CONTROL_PLANE: _ClassVar[ProcessKind]
    PROCESS_KIND_EMBEDDED_S3: _ClassVar[ProcessKind]
    PROCESS_KIND_BROKER: _ClassVar[ProcessKind]
PROCESS_KIND_UNSPECIFIED: ProcessKind
PROCESS_KIND_CONTROL_PLANE: ProcessKind
PROCESS_KIND_EMBEDDED_S3: ProcessKind
PROCESS_KIND_BROKER: ProcessKind

class RotateTokenRequest(_message.Message):
    __slots__ = ("grace_seconds",)
    GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    grace_seconds: int
    def __init__(self, grace_seconds: _Optional[int] = ...) -> None: ...

class RotateTokenResponse(_message.Message):
    __slots__ = ("token", "token_file", "previous_valid_until")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FILE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VALID_UNTIL_FIELD_NUMBER: _ClassVar[int]
    token: str
    token_file: str
    previous_valid_until: _timestamp_pb2.Timestamp
    def __init__(self, token: _Optional[str] = ..., token_file: _Optional[str] = ..., previous_valid_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Status(_message.Message):
    __slots__ = ("version", "pid", "home", "endpoint", "started_at", "s3_endpoint", "s3_note", "clusters", "brokers_running", "object_store", "processes")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOME_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    S3_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    S3_NOTE_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    BROKERS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    OBJECT_STORE_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    version: str
    pid: int
    home: str
    endpoint: str
    started_at: _timestamp_pb2.Timestamp
    s3_endpoint: str
    s3_note: str
    clusters: int
    brokers_running: int
    object_store: ObjectStoreStatus
    processes: _containers.RepeatedCompositeFieldContainer[ManagedProcess]
    def __init__(self, version: _Optional[str] = ..., pid: _Optional[int] = ..., home: _Optional[str] = ..., endpoint: _Optional[str] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., s3_endpoint: _Optional[str] = ..., s3_note: _Optional[str] = ..., clusters: _Optional[int] = ..., brokers_running: _Optional[int] = ..., object_store: _Optional[_Union[ObjectStoreStatus, _Mapping]] = ..., processes: _Optional[_Iterable[_Union[ManagedProcess, _Mapping]]] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("pid",)
    PID_FIELD_NUMBER: _ClassVar[int]
    pid: int
    def __init__(self, pid: _Optional[int] = ...) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ("processes",)
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[ManagedProcess]
    def __init__(self, processes: _Optional[_Iterable[_Union[ManagedProcess, _Mapping]]] = ...) -> None: ...

class ManagedProcess(_message.Message):
    __slots__ = ("kind", "pid", "cluster", "broker_id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    kind: ProcessKind
    pid: int
    cluster: str
    broker_id: int
    def __init__(self, kind: _Optional[_Union[ProcessKind, str]] = ..., pid: _Optional[int] = ..., cluster: _Optional[str] = ..., broker_id: _Optional[int] = ...) -> None: ...

class ObjectStoreStatus(_message.Message):
    __slots__ = ("kind", "endpoint", "data_dir", "pid", "restarts", "answering", "detail")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    DATA_DIR_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    ANSWERING_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    kind: str
    endpoint: str
    data_dir: str
    pid: int
    restarts: int
    answering: bool
    detail: str
    def __init__(self, kind: _Optional[str] = ..., endpoint: _Optional[str] = ..., data_dir: _Optional[str] = ..., pid: _Optional[int] = ..., restarts: _Optional[int] = ..., answering: bool = ..., detail: _Optional[str] = ...) -> None: ...
