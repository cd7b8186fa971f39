from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicatorState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICATOR_STATE_UNSPECIFIED: _ClassVar[ReplicatorState]
    REPLICATOR_STATE_CREATING: _ClassVar[ReplicatorState]
    REPLICATOR_STATE_RUNNING: _ClassVar[ReplicatorState]
    REPLICATOR_STATE_FAILED: _ClassVar[ReplicatorState]
    REPLICATOR_STATE_DELETING: _ClassVar[ReplicatorState]

class TopicNamePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOPIC_NAME_POLICY_UNSPECIFIED: _ClassVar[TopicNamePolicy]
    TOPIC_NAME_POLICY_PREFIXED: _ClassVar[TopicNamePolicy]
    TOPIC_NAME_POLICY_IDENTICAL: _ClassVar[TopicNamePolicy]
REPLICATOR_STATE_UNSPECIFIED: ReplicatorState
REPLICATOR_STATE_CREATING: ReplicatorState
REPLICATOR_STATE_RUNNING: ReplicatorState
REPLICATOR_STATE_FAILED: ReplicatorState
REPLICATOR_STATE_DELETING: ReplicatorState
TOPIC_NAME_POLICY_UNSPECIFIED: TopicNamePolicy
TOPIC_NAME_POLICY_PREFIXED: TopicNamePolicy
TOPIC_NAME_POLICY_IDENTICAL: TopicNamePolicy

class ReplicatedPartition(_message.Message):
    __slots__ = ("source_topic", "target_topic", "partition", "lag")
    SOURCE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    TARGET_TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    source_topic: str
    target_topic: str
    partition: int
    lag: int
    def __init__(self, source_topic: _Optional[str] = ..., target_topic: _Optional[str] = ..., partition: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class Replicator(_message.Message):
    __slots__ = ("name", "source_cluster", "source_bootstrap", "target_cluster", "topics", "groups", "sync_group_offsets", "topic_name_policy", "state", "state_message", "source_alias", "partitions", "total_lag", "restarts", "created_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    SOURCE_BOOTSTRAP_FIELD_NUMBER: _ClassVar[int]
    TARGET_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    SYNC_GROUP_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_NAME_POLICY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ALIAS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LAG_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    source_cluster: str
    source_bootstrap: str
    target_cluster: str
    topics: str
    groups: str
    sync_group_offsets: bool
    topic_name_policy: TopicNamePolicy
    state: ReplicatorState
    state_message: str
    source_alias: str
    partitions: _containers.RepeatedCompositeFieldContainer[ReplicatedPartition]
    total_lag: int
    restarts: int
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., source_cluster: _Optional[str] = ..., source_bootstrap: _Optional[str] = ..., target_cluster: _Optional[str] = ..., topics: _Optional[str] = ..., groups: _Optional[str] = ..., sync_group_offsets: bool = ..., topic_name_policy: _Optional[_Union[TopicNamePolicy, str]] = ..., state: _Optional[_Union[ReplicatorState, str]] = ..., state_message: _Optional[str] = ..., source_alias: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ReplicatedPartition, _Mapping]]] = ..., total_lag: _Optional[int] = ..., restarts: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateReplicatorRequest(_message.Message):
    __slots__ = ("name", "source_cluster", "source_bootstrap", "target_cluster", "topics", "groups", "sync_group_offsets", "topic_name_policy", "source_alias")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    SOURCE_BOOTSTRAP_FIELD_NUMBER: _ClassVar[int]
    TARGET_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    SYNC_GROUP_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_NAME_POLICY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ALIAS_FIELD_NUMBER: _ClassVar[int]
    name: str
    source_cluster: str
    source_bootstrap: str
    target_cluster: str
    topics: str
    groups: str
    sync_group_offsets: bool
    topic_name_policy: TopicNamePolicy
    source_alias: str
    def __init__(self, name: _Optional[str] = ..., source_cluster: _Optional[str] = ..., source_bootstrap: _Optional[str] = ..., target_cluster: _Optional[str] = ..., topics: _Optional[str] = ..., groups: _Optional[str] = ..., sync_group_offsets: bool = ..., topic_name_policy: _Optional[_Union[TopicNamePolicy, str]] = ..., source_alias: _Optional[str] = ...) -> None: ...

class DescribeReplicatorRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListReplicatorsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListReplicatorsResponse(_message.Message):
    __slots__ = ("replicators",)
    REPLICATORS_FIELD_NUMBER: _ClassVar[int]
    replicators: _containers.RepeatedCompositeFieldContainer[Replicator]
    def __init__(self, replicators: _Optional[_Iterable[_Union[Replicator, _Mapping]]] = ...) -> None: ...

class DeleteReplicatorRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...
