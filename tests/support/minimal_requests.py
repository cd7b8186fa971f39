"""Minimal valid requests for every Kafka API key and version, generated from kio's schemas.

``minimal_request(api_key, version, state)`` returns a kio request entity that Apache Kafka
accepts as well-formed. Every field is filled by one generic rule from its kio metadata
(``kafka_type``, nullability, tags, schema default):

* a field with a schema default keeps it (Kafka's own default, e.g. ``replica_id=-1``,
  ``session_epoch=-1``, ``max_bytes=2147483647``);
* a repeated field (nullable or not) is the empty array;
* a nullable scalar, string, record set or struct is null;
* a uuid is the zero uuid;
* other scalars are zero: 0, "", b"", False, 0.0, a zero duration, the epoch, NONE;
* a non-nullable struct is built by the same rules.

An empty request is not always meaningful, so a per-API spec (``SPECS``) overrides some fields
with the smallest sensible content. A spec is a dict of field name to value, nested as dicts
(structs) and lists of dicts (arrays of structs); keys a version does not have are dropped, so
one spec serves every version of its API (``topic`` and ``topic_id`` side by side, for
instance). Plain ints are accepted for durations (milliseconds). ``unused_spec_paths`` finds
spec keys no version has (typos). The choices, where they are not the generic rule:

* every request that names a topic names ``state.topic`` (created by ``prepare_state``, one
  partition) and its partition 0; requests that would change it only validate
  (``validate_only``) or are no-ops (DeleteRecords to offset 0, cancelling a reassignment that
  does not exist); deletions name things that do not exist (``state.absent_topic``,
  ``state.absent_group``); UnregisterBroker names broker 999, which is not registered;
* Produce sends acks=1 (acks=0 has no answer) and one record batch of one record;
* Fetch waits 0 ms for 0 bytes; ListOffsets asks the latest offset as a consumer
  (replica -1); Metadata names the topic and does not auto-create;
* group APIs: ``state.group`` for stateless ones (OffsetCommit is a simple commit of offset 0
  with generation -1 and no member; OffsetFetch, DescribeGroups...); JoinGroup is a first join
  (no member id: MEMBER_ID_REQUIRED from v4, a completed one-member join before) to a group of
  its own per version (``state.join_group(version)``), since a second new member would make
  the join wait for a rebalance; Heartbeat and SyncGroup speak as the member of the stable
  one-member group ``prepare_state`` built (``state.member_group``); LeaveGroup names a member
  that is not in it (so the member stays for SyncGroup);
* sessions for JoinGroup are 30 s (Kafka's minimum is 6 s);
* ApiVersions v3+ sends a valid client software name and version (empty ones are
  INVALID_REQUEST);
* DescribeGroups describes that stable group (and so shows a member, its metadata and
  assignment); DeleteGroups deletes a group that does not exist;
* the Kafka-only APIs that Sluice does not serve get the same treatment with the ids in
  ``state`` (transactional id ``state.txn``, consumer/share/streams groups of their own, each
  joined by its first heartbeat with a fixed client-chosen member id); DescribeAcls filters
  with ANY; DescribeQuorum names ``__cluster_metadata``-0; AddPartitionsToTxn v4+ (broker to
  broker) names one transaction, as Kafka 4.3 never answers an empty list;
  StreamsGroupHeartbeat sends an empty topology and null task offsets (an empty list is
  "TaskOffsets are not supported yet"). Some of them are answered with an error by design:
  the transactional APIs with NOT_COORDINATOR (no transaction coordinator exists yet), the
  raft voter APIs with INVALID_REQUEST / VOTER_NOT_FOUND (voter 999 with no listener, so the
  quorum is never touched), ShareAcknowledge with INVALID_SHARE_SESSION_EPOCH (no session).
  Well-formed answers are what the sweep checks; errors are fine.

Field metadata is read with kio's own introspection (``kio.serial._introspect``), the code its
serializers use, so the generator and kio agree on what is an array, a struct or nullable.
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v3.request import SyncGroupRequest
from kio.serial import entity_reader
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static.constants import uuid_zero

from tests.support.raw_client import RawClient
from wire.record_batch import encode_batch

SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"
"""A ConsumerProtocolSubscription v0 with no topics and null user data (JoinGroup metadata)."""
PROTOCOL_TYPE = "consumer"
PROTOCOL_NAME = "range"
SESSION_MS = 30_000
TIMEOUT_MS = 5_000
ABSENT_BROKER = 999
ABSENT_DIRECTORY = uuid.UUID("5e1ce5e1-ce5e-4ce5-8e1c-e5e1ce5e1ce5")
"""A fixed, non-zero directory id of a voter that does not exist."""
CLIENT_MEMBER_ID = "sweepmember00000000000"
"""A client-chosen member id (KIP-848 groups: 22 characters, as a base64 uuid)."""


@dataclass(frozen=True)
class SweepState:
    """Names (and the little state ``prepare_state`` creates) the requests refer to."""

    prefix: str = "sweep"
    topic_id: uuid.UUID = uuid_zero
    member_id: str = ""
    generation_id: int = -1

    @property
    def topic(self) -> str:
        return f"{self.prefix}-topic"

    @property
    def absent_topic(self) -> str:
        return f"{self.prefix}-absent-topic"

    @property
    def group(self) -> str:
        return f"{self.prefix}-group"

    @property
    def absent_group(self) -> str:
        return f"{self.prefix}-absent-group"

    @property
    def member_group(self) -> str:
        return f"{self.prefix}-member-group"

    @property
    def consumer_group(self) -> str:
        return f"{self.prefix}-consumer-group"

    @property
    def share_group(self) -> str:
        return f"{self.prefix}-share-group"

    @property
    def streams_group(self) -> str:
        return f"{self.prefix}-streams-group"

    @property
    def txn(self) -> str:
        return f"{self.prefix}-txn"

    def join_group(self, version: int) -> str:
        return f"{self.prefix}-join-v{version}"


Spec = dict[str, Any]


def _one_record() -> bytes:
    return encode_batch([(None, b"sweep")], timestamp_ms=int(time.time() * 1000))


def _topic_partition(s: SweepState, **partition: Any) -> list[Spec]:
    """One topic entry naming ``s.topic`` (by name and id) with partition 0 fields."""
    return [{"name": s.topic, "topic_id": s.topic_id, "partitions": [partition]}]


SPECS: dict[int, Callable[[SweepState, int], Spec]] = {
    0: lambda s, v: {  # Produce
        "acks": 1,
        "timeout": TIMEOUT_MS,
        "topic_data": [
            {
                "name": s.topic,
                "topic_id": s.topic_id,
                "partition_data": [{"index": 0, "records": _one_record()}],
            }
        ],
    },
    1: lambda s, v: {  # Fetch
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": s.topic,
                "topic_id": s.topic_id,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16}],
            }
        ],
    },
    2: lambda s, v: {  # ListOffsets
        "replica_id": -1,
        "timeout": TIMEOUT_MS,
        "topics": [{"name": s.topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    },
    3: lambda s, v: {  # Metadata
        "topics": [{"name": s.topic, "topic_id": uuid_zero}],
        "allow_auto_topic_creation": False,
    },
    8: lambda s, v: {  # OffsetCommit: a simple (group-less) commit
        "group_id": s.group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": _topic_partition(s, partition_index=0, committed_offset=0, committed_metadata=""),
    },
    9: lambda s, v: {  # OffsetFetch (v1-7 one group, v8+ a list of groups)
        "group_id": s.group,
        "topics": [{"name": s.topic, "partition_indexes": [0]}],
        "groups": [
            {
                "group_id": s.group,
                "topics": [{"name": s.topic, "topic_id": s.topic_id, "partition_indexes": [0]}],
            }
        ],
    },
    10: lambda s, v: {"key": s.group, "coordinator_keys": [s.group]},  # FindCoordinator
    11: lambda s, v: {  # JoinGroup: a first join, one group per version
        "group_id": s.join_group(v),
        "session_timeout": SESSION_MS,
        "rebalance_timeout": SESSION_MS,
        "member_id": "",
        "protocol_type": PROTOCOL_TYPE,
        "protocols": [{"name": PROTOCOL_NAME, "metadata": SUBSCRIPTION}],
    },
    12: lambda s, v: {  # Heartbeat
        "group_id": s.member_group,
        "generation_id": s.generation_id,
        "member_id": s.member_id,
    },
    13: lambda s, v: {  # LeaveGroup: a member that is not in the group
        "group_id": s.member_group,
        "member_id": f"{s.prefix}-not-a-member",
        "members": [{"member_id": f"{s.prefix}-not-a-member"}],
    },
    14: lambda s, v: {  # SyncGroup: the leader of the stable group asks its assignment again
        "group_id": s.member_group,
        "generation_id": s.generation_id,
        "member_id": s.member_id,
        "protocol_type": PROTOCOL_TYPE,
        "protocol_name": PROTOCOL_NAME,
    },
    15: lambda s, v: {"groups": [s.member_group]},  # DescribeGroups
    17: lambda s, v: {"mechanism": "PLAIN"},  # SaslHandshake
    18: lambda s, v: {  # ApiVersions
        "client_software_name": "sluice-sweep",
        "client_software_version": "1.0",
    },
    19: lambda s, v: {  # CreateTopics (validate only)
        "topics": [{"name": f"{s.prefix}-validate", "num_partitions": 1, "replication_factor": 1}],
        "timeout": TIMEOUT_MS,
        "validate_only": True,
    },
    20: lambda s, v: {  # DeleteTopics: a topic that does not exist
        "topic_names": [s.absent_topic],
        "topics": [{"name": s.absent_topic}],
        "timeout": TIMEOUT_MS,
    },
    21: lambda s, v: {  # DeleteRecords up to offset 0: a no-op
        "topics": [{"name": s.topic, "partitions": [{"partition_index": 0, "offset": 0}]}],
        "timeout": TIMEOUT_MS,
    },
    22: lambda s, v: {"transaction_timeout": 60_000},  # InitProducerId (idempotent)
    23: lambda s, v: {  # OffsetForLeaderEpoch
        "topics": [{"topic": s.topic, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    },
    24: lambda s, v: {  # AddPartitionsToTxn
        "v3_and_below_transactional_id": s.txn,
        "v3_and_below_producer_id": -1,
        "v3_and_below_producer_epoch": -1,
        # v4+ (broker to broker): Kafka 4.3 never answers an empty list of transactions
        "transactions": [{"transactional_id": s.txn, "producer_id": -1, "producer_epoch": -1}],
    },
    25: lambda s, v: {  # AddOffsetsToTxn
        "transactional_id": s.txn,
        "producer_id": -1,
        "producer_epoch": -1,
        "group_id": s.group,
    },
    26: lambda s, v: {  # EndTxn
        "transactional_id": s.txn,
        "producer_id": -1,
        "producer_epoch": -1,
    },
    28: lambda s, v: {  # TxnOffsetCommit
        "transactional_id": s.txn,
        "group_id": s.group,
        "producer_id": -1,
        "producer_epoch": -1,
    },
    29: lambda s, v: {  # DescribeAcls: ANY everything
        "resource_type_filter": 1,
        "pattern_type_filter": 1,
        "operation": 1,
        "permission_type": 1,
    },
    32: lambda s, v: {  # DescribeConfigs: every config of the topic
        "resources": [{"resource_type": 2, "resource_name": s.topic, "configuration_keys": None}],
    },
    33: lambda s, v: {  # AlterConfigs (validate only)
        "resources": [{"resource_type": 2, "resource_name": s.topic}],
        "validate_only": True,
    },
    37: lambda s, v: {  # CreatePartitions (validate only)
        "topics": [{"name": s.topic, "count": 2, "assignments": None}],
        "timeout": TIMEOUT_MS,
        "validate_only": True,
    },
    38: lambda s, v: {"max_lifetime": -1},  # CreateDelegationToken
    39: lambda s, v: {"renew_period": -1},  # RenewDelegationToken
    40: lambda s, v: {"expiry_time_period": -1},  # ExpireDelegationToken
    41: lambda s, v: {"owners": None},  # DescribeDelegationToken: all
    42: lambda s, v: {"groups_names": [s.absent_group]},  # DeleteGroups
    43: lambda s, v: {  # ElectLeaders: preferred leader of partition 0
        "topic_partitions": [{"topic": s.topic, "partitions": [0]}],
        "timeout": TIMEOUT_MS,
    },
    44: lambda s, v: {  # IncrementalAlterConfigs (validate only)
        "resources": [{"resource_type": 2, "resource_name": s.topic}],
        "validate_only": True,
    },
    45: lambda s, v: {  # AlterPartitionReassignments: cancel one that does not exist
        "timeout": TIMEOUT_MS,
        "topics": [{"name": s.topic, "partitions": [{"partition_index": 0, "replicas": None}]}],
    },
    46: lambda s, v: {  # ListPartitionReassignments
        "timeout": TIMEOUT_MS,
        "topics": [{"name": s.topic, "partition_indexes": [0]}],
    },
    47: lambda s, v: {  # OffsetDelete
        "group_id": s.group,
        "topics": [{"name": s.topic, "partitions": [{"partition_index": 0}]}],
    },
    49: lambda s, v: {"validate_only": True},  # AlterClientQuotas
    55: lambda s, v: {  # DescribeQuorum
        "topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}],
    },
    57: lambda s, v: {"validate_only": True, "timeout": TIMEOUT_MS},  # UpdateFeatures
    61: lambda s, v: {"topics": [{"name": s.topic, "partition_indexes": [0]}]},
    64: lambda s, v: {"broker_id": ABSENT_BROKER},  # UnregisterBroker
    65: lambda s, v: {"transactional_ids": [s.txn]},  # DescribeTransactions
    68: lambda s, v: {  # ConsumerGroupHeartbeat: a first join
        "group_id": s.consumer_group,
        "member_id": CLIENT_MEMBER_ID,
        "member_epoch": 0,
        "rebalance_timeout": SESSION_MS,
        "subscribed_topic_names": [s.topic],
        "topic_partitions": [],
    },
    69: lambda s, v: {"group_ids": [s.consumer_group]},  # ConsumerGroupDescribe
    75: lambda s, v: {"topics": [{"name": s.topic}]},  # DescribeTopicPartitions
    76: lambda s, v: {  # ShareGroupHeartbeat: a first join
        "group_id": s.share_group,
        "member_id": CLIENT_MEMBER_ID,
        "member_epoch": 0,
        "subscribed_topic_names": [s.topic],
    },
    77: lambda s, v: {"group_ids": [s.share_group]},  # ShareGroupDescribe
    78: lambda s, v: {  # ShareFetch
        "group_id": s.share_group,
        "member_id": CLIENT_MEMBER_ID,
        "max_records": 1,
        "batch_size": 1,
    },
    79: lambda s, v: {  # ShareAcknowledge
        "group_id": s.share_group,
        "member_id": CLIENT_MEMBER_ID,
    },
    80: lambda s, v: {  # AddRaftVoter
        "voter_id": ABSENT_BROKER,
        "voter_directory_id": ABSENT_DIRECTORY,
        "timeout": TIMEOUT_MS,
    },
    81: lambda s, v: {  # RemoveRaftVoter
        "voter_id": ABSENT_BROKER,
        "voter_directory_id": ABSENT_DIRECTORY,
    },
    83: lambda s, v: {"group_id": s.group},  # InitializeShareGroupState
    84: lambda s, v: {"group_id": s.group},  # ReadShareGroupState
    85: lambda s, v: {"group_id": s.group},  # WriteShareGroupState
    86: lambda s, v: {"group_id": s.group},  # DeleteShareGroupState
    87: lambda s, v: {"group_id": s.group},  # ReadShareGroupStateSummary
    88: lambda s, v: {  # StreamsGroupHeartbeat: a first join with an empty topology
        "group_id": s.streams_group,
        "member_id": CLIENT_MEMBER_ID,
        "member_epoch": 0,
        "rebalance_timeout": SESSION_MS,
        "topology": {"epoch": 0},
        "active_tasks": [],
        "standby_tasks": [],
        "warmup_tasks": [],
        "task_offsets": None,  # an empty list is "TaskOffsets are not supported yet"
        "task_end_offsets": None,
    },
    89: lambda s, v: {"group_ids": [s.streams_group]},  # StreamsGroupDescribe
    90: lambda s, v: {"groups": [{"group_id": s.share_group, "topics": None}]},
    91: lambda s, v: {"group_id": s.share_group},  # AlterShareGroupOffsets
    92: lambda s, v: {"group_id": s.share_group},  # DeleteShareGroupOffsets
}


# ---------------------------------------------------------------------------- generation


def kio_versions(api_key: int) -> range:
    """The versions of ``api_key`` kio has schemas for (empty when it has none)."""
    name = api_key_map.get(api_key)
    if name is None:
        return range(0)
    versions = sorted(schema_name_map[name])
    return range(versions[0], versions[-1] + 1)


def kio_knows(api_key: int, version: int) -> bool:
    return version in kio_versions(api_key)


def minimal_request(api_key: int, version: int, state: SweepState | None = None) -> Any:
    """A minimal valid request of ``api_key`` at ``version`` (see the module docstring)."""
    request_cls = load_request_schema(api_key, version)
    spec_of = SPECS.get(api_key)
    spec = spec_of(state or SweepState(), version) if spec_of else {}
    return _build(request_cls, spec, "", set())


def unused_spec_paths(api_key: int) -> set[str]:
    """Spec keys (dotted paths) of ``api_key`` that no version's schema has."""
    spec_of = SPECS.get(api_key)
    if spec_of is None:
        return set()
    wanted: set[str] = set()
    used: set[str] = set()
    for version in kio_versions(api_key):
        spec = spec_of(SweepState(), version)
        _spec_paths(spec, "", wanted)
        _build(load_request_schema(api_key, version), spec, "", used)
    return wanted - used


def _spec_paths(spec: Spec, prefix: str, out: set[str]) -> None:
    for key, value in spec.items():
        out.add(prefix + key)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict):
                _spec_paths(item, f"{prefix}{key}.", out)


def _build(cls: Any, spec: Spec, prefix: str, used: set[str]) -> Any:
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in spec:
            used.add(prefix + f.name)
            values[f.name] = _convert(f, spec[f.name], f"{prefix}{f.name}.", used)
        else:
            values[f.name] = _default(f)
    return cls(**values)


def _convert(f: Field[Any], value: Any, prefix: str, used: set[str]) -> Any:
    if value is None:
        return None
    kind = classify_field(f)
    if isinstance(kind, EntityTupleField):
        return tuple(_build(kind.type_, item, prefix, used) for item in value)
    if isinstance(kind, EntityField):
        return _build(kind.type_, value, prefix, used)
    if isinstance(kind, PrimitiveTupleField):
        return tuple(_scalar(f, item) for item in value)
    return _scalar(f, value)


def _scalar(f: Field[Any], value: Any) -> Any:
    kafka_type = f.metadata["kafka_type"]
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    if kafka_type == "error_code" and isinstance(value, int):
        return ErrorCode(value)
    return value


_ZERO: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": b"",
    "uuid": uuid_zero,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
}


def _default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    kind = classify_field(f)
    if kind.is_array:
        return ()
    kafka_type = f.metadata.get("kafka_type")
    if kafka_type == "uuid":
        return uuid_zero  # kio types every uuid as optional; on the wire none is nullable
    if is_optional(f):
        return None
    if isinstance(kind, EntityField):
        return _build(kind.type_, {}, "", set())
    assert kafka_type is not None, f"{f.name}: no kafka_type"
    return _ZERO[kafka_type]


# ---------------------------------------------------------------------------- answers


class Answer:
    """What the broker did with one request: ``problem`` is None for a well-formed answer."""

    __slots__ = ("problem", "response")

    def __init__(self, response: Any = None, problem: str | None = None) -> None:
        self.response = response
        self.problem = problem


def exchange(client: RawClient, request: Any) -> Answer:
    """Send ``request`` and judge the answer: it must come, carry the request's correlation
    id and decode with its version's response schema to the last byte; afterwards the
    connection must still serve a request (an ApiVersions v0 probe)."""
    key, version = int(request.__api_key__), int(request.__version__)
    try:
        correlation = client.send(request)
        frame = client.read_frame()
    except TimeoutError:
        return Answer(problem="no answer in time")
    except OSError as exc:  # ConnectionError: closed or reset by the broker
        return Answer(problem=f"connection closed ({type(exc).__name__}: {exc})")
    got = struct.unpack_from(">i", frame, 0)[0]
    if got != correlation:
        return Answer(problem=f"correlation id {got}, sent {correlation}")
    response_cls: Any = load_response_schema(key, version)
    offset = 4 + (1 if response_cls.__header_schema__.__flexible__ else 0)
    try:
        response, size = entity_reader(response_cls)(frame, offset)
    except Exception as exc:
        return Answer(problem=f"undecodable answer ({type(exc).__name__}: {exc})")
    if offset + size != len(frame):
        return Answer(response, f"{len(frame) - offset - size} bytes after the decoded answer")
    if not connection_open(client):
        return Answer(response, "connection unusable after the answer")
    return Answer(response)


def connection_open(client: RawClient) -> bool:
    """True when the connection still answers an ApiVersions v0 request."""
    try:
        client.request(ApiVersionsRequestV0())
    except (OSError, AssertionError):
        return False
    return True


# ---------------------------------------------------------------------------- state


def prepare_state(bootstrap: str, prefix: str, timeout: float = 60) -> SweepState:
    """Create what the requests refer to: ``state.topic`` (one partition, replication 1)
    and the stable one-member classic group ``state.member_group``; returns the state with
    the topic's id and the member's id and generation."""
    state = SweepState(prefix)
    deadline = time.monotonic() + timeout
    with RawClient(bootstrap) as client:
        _create_topic(client, state.topic)
        topic_id = _wait_topic(client, state, deadline)
        member_id, generation = _join_and_sync(client, state.member_group, deadline)
    return SweepState(prefix, topic_id, member_id, generation)


def _create_topic(client: RawClient, topic: str) -> None:
    response = client.request(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=topic,  # type: ignore[arg-type]
                    num_partitions=1,  # type: ignore[arg-type]
                    replication_factor=1,  # type: ignore[arg-type]
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=datetime.timedelta(milliseconds=TIMEOUT_MS),  # type: ignore[arg-type]
        )
    )
    code = response.topics[0].error_code
    assert code in (ErrorCode.none, ErrorCode.topic_already_exists), f"create {topic}: {code!r}"


def _wait_topic(client: RawClient, state: SweepState, deadline: float) -> uuid.UUID:
    """Until Metadata shows ``state.topic`` with a leader for partition 0; returns its id."""
    request = minimal_request(3, 12, state)
    while True:
        response = client.request(request)
        found = response.topics[0]
        if (
            found.error_code == ErrorCode.none
            and found.partitions
            and found.partitions[0].leader_id >= 0
        ):
            assert found.topic_id is not None
            return found.topic_id
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {state.topic} has no leader: {found!r}")
        time.sleep(0.05)


RETRIABLE_GROUP_ERRORS = (
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
)


def _join_and_sync(client: RawClient, group: str, deadline: float) -> tuple[str, int]:
    """JoinGroup v5 (twice: MEMBER_ID_REQUIRED first) and SyncGroup v3 as the only member;
    retries while the group coordinator is not ready (Kafka creates it lazily)."""
    while True:  # Kafka creates __consumer_offsets on the first FindCoordinator
        found = client.request(FindCoordinatorRequest(key=group))
        if found.error_code == ErrorCode.none:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"no coordinator for {group}: {found!r}")
        time.sleep(0.1)
    member_id = ""
    while True:
        join = client.request(
            JoinGroupRequest(
                group_id=group,  # type: ignore[arg-type]
                session_timeout=datetime.timedelta(milliseconds=SESSION_MS),  # type: ignore[arg-type]
                rebalance_timeout=datetime.timedelta(milliseconds=SESSION_MS),  # type: ignore[arg-type]
                member_id=member_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=(JoinGroupRequestProtocol(name=PROTOCOL_NAME, metadata=SUBSCRIPTION),),
            )
        )
        if join.error_code == ErrorCode.member_id_required:
            member_id = join.member_id
            continue
        if join.error_code in RETRIABLE_GROUP_ERRORS and time.monotonic() < deadline:
            time.sleep(0.1)
            continue
        assert join.error_code == ErrorCode.none, f"join {group}: {join!r}"
        break
    sync = client.request(
        SyncGroupRequest(
            group_id=group,  # type: ignore[arg-type]
            generation_id=join.generation_id,
            member_id=join.member_id,
            assignments=(),
        )
    )
    assert sync.error_code == ErrorCode.none, f"sync {group}: {sync!r}"
    return join.member_id, int(join.generation_id)


def advertised_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """The API keys and version ranges the broker announces in ApiVersions v3."""
    with RawClient(bootstrap) as client:
        response = client.request(
            ApiVersionsRequestV3(client_software_name="sluice-sweep", client_software_version="1.0")
        )
    assert response.error_code == ErrorCode.none, response
    return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in response.api_keys}
