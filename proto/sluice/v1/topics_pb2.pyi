from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Partition(_message.Message):
    __slots__ = ("partition", "leader", "replicas", "isr", "remote_log_start_offset", "tiered_bytes", "tiered_segments", "replica_hot_bytes", "hot_bytes")
    class ReplicaHotBytesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIERED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIERED_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    REPLICA_HOT_BYTES_FIELD_NUMBER: _ClassVar[int]
    HOT_BYTES_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    remote_log_start_offset: int
    tiered_bytes: int
    tiered_segments: int
    replica_hot_bytes: _containers.ScalarMap[int, int]
    hot_bytes: int
    def __init__(self, partition: _Optional[int] = ..., leader: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., remote_log_start_offset: _Optional[int] = ..., tiered_bytes: _Optional[int] = ..., tiered_segments: _Optional[int] = ..., replica_hot_bytes: _Optional[_Mapping[int, int]] = ..., hot_bytes: _Optional[int] = ...) -> None: ...

class Topic(_message.Message):
    __slots__ = ("cluster", "name", "topic_id", "partitions", "replication_factor", "internal", "config", "effective_config", "partition_details", "hot_bytes", "tiered_bytes", "tiered_segments", "hot_bytes_per_replica")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class EffectiveConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    PARTITION_DETAILS_FIELD_NUMBER: _ClassVar[int]
    HOT_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIERED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIERED_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    HOT_BYTES_PER_REPLICA_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    internal: bool
    config: _containers.ScalarMap[str, str]
    effective_config: _containers.ScalarMap[str, str]
    partition_details: _containers.RepeatedCompositeFieldContainer[Partition]
    hot_bytes: int
    tiered_bytes: int
    tiered_segments: int
    hot_bytes_per_replica: int
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., topic_id: _Optional[str] = ..., partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., internal: bool = ..., config: _Optional[_Mapping[str, str]] = ..., effective_config: _Optional[_Mapping[str, str]] = ..., partition_details: _Optional[_Iterable[_Union[Partition, _Mapping]]] = ..., hot_bytes: _Optional[int] = ..., tiered_bytes: _Optional[int] = ..., tiered_segments: _Optional[int] = ..., hot_bytes_per_replica: _Optional[int] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("cluster", "name", "partitions", "replication_factor", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    partitions: int
    replication_factor: int
    config: _containers.ScalarMap[str, str]
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ("cluster", "include_internal")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    include_internal: bool
    def __init__(self, cluster: _Optional[str] = ..., include_internal: bool = ...) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ...) -> None: ...

class DescribeTopicRequest(_message.Message):
    __slots__ = ("cluster", "name")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("cluster", "name")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AlterTopicConfigRequest(_message.Message):
    __slots__ = ("cluster", "name", "config", "remove")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    config: _containers.ScalarMap[str, str]
    remove: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., config: _Optional[_Mapping[str, str]] = ..., remove: _Optional[_Iterable[str]] = ...) -> None: ...

class AddPartitionsRequest(_message.Message):
    __slots__ = ("cluster", "name", "total")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    name: str
    total: int
    def __init__(self, cluster: _Optional[str] = ..., name: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class FindOrphansRequest(_message.Message):
    __slots__ = ("cluster", "delete", "min_age_seconds")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    MIN_AGE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    delete: bool
    min_age_seconds: int
    def __init__(self, cluster: _Optional[str] = ..., delete: bool = ..., min_age_seconds: _Optional[int] = ...) -> None: ...

class Orphan(_message.Message):
    __slots__ = ("key", "size", "reason", "last_modified")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_MODIFIED_FIELD_NUMBER: _ClassVar[int]
    key: str
    size: int
    reason: str
    last_modified: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[str] = ..., size: _Optional[int] = ..., reason: _Optional[str] = ..., last_modified: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FindOrphansResponse(_message.Message):
    __slots__ = ("orphans", "total_bytes", "scanned", "deleted", "bucket", "prefix", "too_young")
    ORPHANS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    SCANNED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    TOO_YOUNG_FIELD_NUMBER: _ClassVar[int]
    orphans: _containers.RepeatedCompositeFieldContainer[Orphan]
    total_bytes: int
    scanned: int
    deleted: bool
    bucket: str
    prefix: str
    too_young: int
    def __init__(self, orphans: _Optional[_Iterable[_Union[Orphan, _Mapping]]] = ..., total_bytes: _Optional[int] = ..., scanned: _Optional[int] = ..., deleted: bool = ..., bucket: _Optional[str] = ..., prefix: _Optional[str] = ..., too_young: _Optional[int] = ...) -> None: ...
