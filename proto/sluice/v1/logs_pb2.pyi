from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReadLogsRequest(_message.Message):
    __slots__ = ("cluster", "broker_id", "since", "follow", "tail_lines")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    TAIL_LINES_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_id: int
    since: _timestamp_pb2.Timestamp
    follow: bool
    tail_lines: int
    def __init__(self, cluster: _Optional[str] = ..., broker_id: _Optional[int] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., follow: bool = ..., tail_lines: _Optional[int] = ...) -> None: ...

class LogLine(_message.Message):
    __slots__ = ("broker_id", "line", "time")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    line: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, broker_id: _Optional[int] = ..., line: _Optional[str] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("lines", "omitted")
    LINES_FIELD_NUMBER: _ClassVar[int]
    OMITTED_FIELD_NUMBER: _ClassVar[int]
    lines: _containers.RepeatedCompositeFieldContainer[LogLine]
    omitted: int
    def __init__(self, lines: _Optional[_Iterable[_Union[LogLine, _Mapping]]] = ..., omitted: _Optional[int] = ...) -> None: ...
