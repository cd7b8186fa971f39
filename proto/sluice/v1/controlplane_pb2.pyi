from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Status(_message.Message):
    __slots__ = ("version", "pid", "home", "endpoint", "started_at", "s3_endpoint", "s3_note", "clusters", "brokers_running", "object_store")
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
    def __init__(self, version: _Optional[str] = ..., pid: _Optional[int] = ..., home: _Optional[str] = ..., endpoint: _Optional[str] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., s3_endpoint: _Optional[str] = ..., s3_note: _Optional[str] = ..., clusters: _Optional[int] = ..., brokers_running: _Optional[int] = ..., object_store: _Optional[_Union[ObjectStoreStatus, _Mapping]] = ...) -> None: ...

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
