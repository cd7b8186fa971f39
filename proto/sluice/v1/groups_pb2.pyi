from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListGroupsRequest(_message.Message):
    __slots__ = ("cluster",)
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    def __init__(self, cluster: _Optional[str] = ...) -> None: ...

class GroupListing(_message.Message):
    __slots__ = ("group_id", "state", "protocol_type", "coordinator")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    state: str
    protocol_type: str
    coordinator: int
    def __init__(self, group_id: _Optional[str] = ..., state: _Optional[str] = ..., protocol_type: _Optional[str] = ..., coordinator: _Optional[int] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupListing]
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupListing, _Mapping]]] = ...) -> None: ...

class DescribeGroupRequest(_message.Message):
    __slots__ = ("cluster", "group_id")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    group_id: str
    def __init__(self, cluster: _Optional[str] = ..., group_id: _Optional[str] = ...) -> None: ...

class TopicPartitions(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class GroupMember(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    client_id: str
    client_host: str
    assignment: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., assignment: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ...) -> None: ...

class GroupPartition(_message.Message):
    __slots__ = ("topic", "partition", "committed_offset", "end_offset", "lag", "member_id", "client_id", "client_host", "metadata")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    committed_offset: int
    end_offset: int
    lag: int
    member_id: str
    client_id: str
    client_host: str
    metadata: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., committed_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., lag: _Optional[int] = ..., member_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., metadata: _Optional[str] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ("cluster", "group_id", "state", "protocol_type", "protocol", "coordinator", "members", "partitions", "total_lag")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LAG_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: _containers.RepeatedCompositeFieldContainer[GroupMember]
    partitions: _containers.RepeatedCompositeFieldContainer[GroupPartition]
    total_lag: int
    def __init__(self, cluster: _Optional[str] = ..., group_id: _Optional[str] = ..., state: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol: _Optional[str] = ..., coordinator: _Optional[int] = ..., members: _Optional[_Iterable[_Union[GroupMember, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[GroupPartition, _Mapping]]] = ..., total_lag: _Optional[int] = ...) -> None: ...

class ResetOffsetsRequest(_message.Message):
    __slots__ = ("cluster", "group_id", "topics", "to_earliest", "to_latest", "to_offset", "to_timestamp_ms", "shift_by", "dry_run")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TO_EARLIEST_FIELD_NUMBER: _ClassVar[int]
    TO_LATEST_FIELD_NUMBER: _ClassVar[int]
    TO_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TO_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    SHIFT_BY_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    group_id: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    to_earliest: bool
    to_latest: bool
    to_offset: int
    to_timestamp_ms: int
    shift_by: int
    dry_run: bool
    def __init__(self, cluster: _Optional[str] = ..., group_id: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., to_earliest: bool = ..., to_latest: bool = ..., to_offset: _Optional[int] = ..., to_timestamp_ms: _Optional[int] = ..., shift_by: _Optional[int] = ..., dry_run: bool = ...) -> None: ...

class OffsetReset(_message.Message):
    __slots__ = ("topic", "partition", "previous_offset", "new_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEW_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    previous_offset: int
    new_offset: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., previous_offset: _Optional[int] = ..., new_offset: _Optional[int] = ...) -> None: ...

class ResetOffsetsResponse(_message.Message):
    __slots__ = ("cluster", "group_id", "offsets", "dry_run")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    group_id: str
    offsets: _containers.RepeatedCompositeFieldContainer[OffsetReset]
    dry_run: bool
    def __init__(self, cluster: _Optional[str] = ..., group_id: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[OffsetReset, _Mapping]]] = ..., dry_run: bool = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("cluster", "group_id")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    group_id: str
    def __init__(self, cluster: _Optional[str] = ..., group_id: _Optional[str] = ...) -> None: ...

class DeleteGroupResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
