"""APIs that Sluice serves beyond Apache Kafka's, under keys far above Kafka's (< 100):

- 32000 RemoteLogMetadata (broker -> controller, internal): a partition leader asks the
  controller to commit remote-tier metadata records (a segment's copy started / finished,
  its deletion, the log start offset) into the metadata log;
- 32001 DescribeRemoteLog (any broker, for clients: the control plane's per-topic sizes
  and orphan finder, Spark's planner): what the remote tier holds. Every broker answers
  from its metadata image. The payloads are JSON documents, versioned by a ``"version"``
  field, so that fields can be added without a new schema::

    request:  {"version": 1, "topics": ["name", ...] | null}        (null: every topic)
    response: {"version": 1, "cluster_id": str, "topics": {name: {"topic_id": str,
               "partitions": {"0": {"log_start_offset": int,
                                    "segments": [tiered RemoteSegment dict]}}}},
               "pending_topic_deletions": [{"topic": str, "topic_id": str}]}

- 32002 Transforms (any broker, for the control plane): deploy, pause, resume, delete and
  describe WebAssembly transforms. ``operation`` names the action; ``payload`` is a JSON
  document (version 1); ``module`` carries the WebAssembly binary of a deploy (empty
  otherwise). A deploy is validated and its module stored by the broker that receives it,
  then decided by the active controller (``operation`` "commit", broker to controller);
  pause, resume and delete are decided by the controller (forwarded as they are); describe
  answers from this broker's image and the runners it has (the partitions it leads)::

    deploy:   {"version": 1, "name": str, "input_topic": str, "output_topics": [str],
               "env": {str: str}}                        answer: {"transform": {...}}
    commit:   {"version": 1, "transform": {...}}          (broker to controller)
    pause / resume / delete: {"version": 1, "name": str}  answer: {"transform": {...}}
    describe: {"version": 1, "names": [str] | null}
              answer: {"transforms": [{...definition, "partitions": [{"partition": int,
                       "state": str, "error": str, "committed_offset": int, "lag": int}]}]}

- 32003 FenceBroker (the control plane, to any broker; decided by the active controller):
  the process of broker ``broker_id`` whose registration carries ``incarnation`` (the
  ``broker.incarnation.id`` its supervisor gave it) has exited, so fence that registration
  now rather than after ``broker.session.timeout.ms``: its leaderships move at once. A
  registration of another incarnation (the broker already restarted and registered again)
  or one already fenced is left alone, and the answer is still NONE.

None is announced in ApiVersions. Their schemas follow kio's conventions and name their
response class in ``__response_schema__``; the codec and the clients look them up here
before asking kio. No ``from __future__ import annotations`` here: kio reads the field
types at run time.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

REMOTE_LOG_METADATA_KEY = 32000
DESCRIBE_REMOTE_LOG_KEY = 32001
TRANSFORMS_KEY = 32002
FENCE_BROKER_KEY = 32003
PAYLOAD_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeRemoteLogResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(DESCRIBE_REMOTE_LOG_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    payload: bytes = field(metadata={"kafka_type": "bytes"})
    """The JSON document above."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeRemoteLogRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(DESCRIBE_REMOTE_LOG_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    __response_schema__: ClassVar[type] = DescribeRemoteLogResponse
    payload: bytes = field(metadata={"kafka_type": "bytes"})
    """The JSON request document above."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLogMetadataResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(REMOTE_LOG_METADATA_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    metadata_offset: i64 = field(metadata={"kafka_type": "int64"})
    """Index of the metadata log entry that holds the records (-1 on error): the sender
    waits until its own image has applied it, so it never acts on a state it just left."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLogMetadataRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(REMOTE_LOG_METADATA_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    __response_schema__: ClassVar[type] = RemoteLogMetadataResponse
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    topic: str = field(metadata={"kafka_type": "string"})
    partition: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The leader epoch the sender leads at: the controller refuses a stale leader."""
    records: bytes = field(metadata={"kafka_type": "bytes"})
    """Metadata records, JSON (``dataplane.cluster.records.encode``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(TRANSFORMS_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    payload: bytes = field(metadata={"kafka_type": "bytes"})
    """The answer's JSON document (see above); empty on error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(TRANSFORMS_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    __response_schema__: ClassVar[type] = TransformsResponse
    operation: str = field(metadata={"kafka_type": "string"})
    """deploy, commit, pause, resume, delete or describe."""
    payload: bytes = field(metadata={"kafka_type": "bytes"})
    module: bytes = field(metadata={"kafka_type": "bytes"})
    """The WebAssembly module of a deploy; empty for the other operations."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBrokerResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(FENCE_BROKER_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    fenced: bool = field(metadata={"kafka_type": "bool"})
    """Whether this request fenced the registration (False: nothing left to fence)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBrokerRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(FENCE_BROKER_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    __response_schema__: ClassVar[type] = FenceBrokerResponse
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    incarnation: str = field(metadata={"kafka_type": "string"})
    """The exited process's ``broker.incarnation.id`` (a UUID)."""
    reason: str = field(metadata={"kafka_type": "string"})
    """Why, for the controller's log line (e.g. "its process exited with code -9")."""


SCHEMAS: dict[int, dict[int, tuple[type, type]]] = {
    REMOTE_LOG_METADATA_KEY: {0: (RemoteLogMetadataRequest, RemoteLogMetadataResponse)},
    DESCRIBE_REMOTE_LOG_KEY: {0: (DescribeRemoteLogRequest, DescribeRemoteLogResponse)},
    TRANSFORMS_KEY: {0: (TransformsRequest, TransformsResponse)},
    FENCE_BROKER_KEY: {0: (FenceBrokerRequest, FenceBrokerResponse)},
}


def versions(api_key: int) -> tuple[int, int] | None:
    known = SCHEMAS.get(api_key)
    return None if known is None else (min(known), max(known))


def schemas(api_key: int, api_version: int) -> tuple[type, type] | None:
    return SCHEMAS.get(api_key, {}).get(api_version)
