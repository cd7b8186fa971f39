from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigurationRevision(_message.Message):
    __slots__ = ("revision", "description", "created_at")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    revision: int
    description: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, revision: _Optional[int] = ..., description: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Configuration(_message.Message):
    __slots__ = ("name", "arn", "revision", "latest_revision", "description", "server_properties", "revisions", "created_at", "clusters")
    class ServerPropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    LATEST_REVISION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SERVER_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    arn: str
    revision: int
    latest_revision: int
    description: str
    server_properties: _containers.ScalarMap[str, str]
    revisions: _containers.RepeatedCompositeFieldContainer[ConfigurationRevision]
    created_at: _timestamp_pb2.Timestamp
    clusters: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., arn: _Optional[str] = ..., revision: _Optional[int] = ..., latest_revision: _Optional[int] = ..., description: _Optional[str] = ..., server_properties: _Optional[_Mapping[str, str]] = ..., revisions: _Optional[_Iterable[_Union[ConfigurationRevision, _Mapping]]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., clusters: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateConfigurationRequest(_message.Message):
    __slots__ = ("name", "description", "server_properties")
    class ServerPropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SERVER_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    server_properties: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., server_properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetConfigurationRequest(_message.Message):
    __slots__ = ("name", "revision")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    name: str
    revision: int
    def __init__(self, name: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class ListConfigurationsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListConfigurationsResponse(_message.Message):
    __slots__ = ("configurations",)
    CONFIGURATIONS_FIELD_NUMBER: _ClassVar[int]
    configurations: _containers.RepeatedCompositeFieldContainer[Configuration]
    def __init__(self, configurations: _Optional[_Iterable[_Union[Configuration, _Mapping]]] = ...) -> None: ...

class UpdateConfigurationRequest(_message.Message):
    __slots__ = ("name", "description", "server_properties")
    class ServerPropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SERVER_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    server_properties: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., server_properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeleteConfigurationRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteConfigurationResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
