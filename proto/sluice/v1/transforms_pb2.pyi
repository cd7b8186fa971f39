from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TransformState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSFORM_STATE_UNSPECIFIED: _ClassVar[TransformState]
    RUNNING: _ClassVar[TransformState]
    PAUSED: _ClassVar[TransformState]
    FAILED: _ClassVar[TransformState]
    STARTING: _ClassVar[TransformState]

class TransformPartitionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSFORM_PARTITION_STATE_UNSPECIFIED: _ClassVar[TransformPartitionState]
    PARTITION_STARTING: _ClassVar[TransformPartitionState]
    PARTITION_RUNNING: _ClassVar[TransformPartitionState]
    PARTITION_PAUSED: _ClassVar[TransformPartitionState]
    PARTITION_FAILED: _ClassVar[TransformPartitionState]
    PARTITION_UNASSIGNED: _ClassVar[TransformPartitionState]
TRANSFORM_STATE_UNSPECIFIED: TransformState
RUNNING: TransformState
PAUSED: TransformState
FAILED: TransformState
STARTING: TransformState
TRANSFORM_PARTITION_STATE_UNSPECIFIED: TransformPartitionState
PARTITION_STARTING: TransformPartitionState
PARTITION_RUNNING: TransformPartitionState
PARTITION_PAUSED: TransformPartitionState
PARTITION_FAILED: TransformPartitionState
PARTITION_UNASSIGNED: TransformPartitionState

class DeployTransformRequest(_message.Message):
    __slots__ = ("cluster", "name", "module", "input_topic", "output_topics", "env")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODULE_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOPIC_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOPICS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    module: bytes
    input_topic: str
    output_topics: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., module: _Optional[bytes] = ..., input_topic: _Optional[str] = ..., output_topics: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TransformRef(_message.Message):
    __slots__ = ("cluster", "name")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ListTransformsRequest(_message.Message):
    __slots__ = ("cluster",)
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    def __init__(self, cluster: _Optional[str] = ...) -> None: ...

class ListTransformsResponse(_message.Message):
    __slots__ = ("transforms",)
    TRANSFORMS_FIELD_NUMBER: _ClassVar[int]
    transforms: _containers.RepeatedCompositeFieldContainer[Transform]
    def __init__(self, transforms: _Optional[_Iterable[_Union[Transform, _Mapping]]] = ...) -> None: ...

class TransformPartition(_message.Message):
    __slots__ = ("partition", "state", "broker", "error", "committed_offset", "lag", "processed", "outputs")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    BROKER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    state: TransformPartitionState
    broker: int
    error: str
    committed_offset: int
    lag: int
    processed: int
    outputs: int
    def __init__(self, partition: _Optional[int] = ..., state: _Optional[_Union[TransformPartitionState, str]] = ..., broker: _Optional[int] = ..., error: _Optional[str] = ..., committed_offset: _Optional[int] = ..., lag: _Optional[int] = ..., processed: _Optional[int] = ..., outputs: _Optional[int] = ...) -> None: ...

class Transform(_message.Message):
    __slots__ = ("cluster", "name", "input_topic", "output_topics", "env", "module_sha256", "module_size", "abi", "version", "state", "partitions", "total_lag")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOPIC_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOPICS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    MODULE_SHA256_FIELD_NUMBER: _ClassVar[int]
    MODULE_SIZE_FIELD_NUMBER: _ClassVar[int]
    ABI_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LAG_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    input_topic: str
    output_topics: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    module_sha256: str
    module_size: int
    abi: str
    version: int
    state: TransformState
    partitions: _containers.RepeatedCompositeFieldContainer[TransformPartition]
    total_lag: int
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., input_topic: _Optional[str] = ..., output_topics: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., module_sha256: _Optional[str] = ..., module_size: _Optional[int] = ..., abi: _Optional[str] = ..., version: _Optional[int] = ..., state: _Optional[_Union[TransformState, str]] = ..., partitions: _Optional[_Iterable[_Union[TransformPartition, _Mapping]]] = ..., total_lag: _Optional[int] = ...) -> None: ...

class DeleteTransformResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TransformLogsRequest(_message.Message):
    __slots__ = ("cluster", "name", "follow", "since_ms")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    follow: bool
    since_ms: int
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., follow: bool = ..., since_ms: _Optional[int] = ...) -> None: ...

class TransformLogLine(_message.Message):
    __slots__ = ("timestamp_ms", "partition", "stream", "text")
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    timestamp_ms: int
    partition: int
    stream: str
    text: str
    def __init__(self, timestamp_ms: _Optional[int] = ..., partition: _Optional[int] = ..., stream: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...
