"""DescribeRemoteLog: the Sluice-specific Kafka API that tells clients what the remote tier
holds (the control plane's per-topic sizes and orphan finder; Spark's planner).

Apache Kafka has no API for this (its remote log metadata lives in an internal topic), so
Sluice serves one under an API key far above Kafka's (Kafka's keys are below 100), framed
like any other flexible request. Every broker answers from its metadata image; it is not
announced in ApiVersions, so stock clients never see it. The payloads are JSON documents,
versioned by a ``"version"`` field, so that fields can be added without a new schema:

request:  {"version": 1, "topics": ["name", ...] | null}           (null: every topic)
response: {"version": 1, "cluster_id": str, "topics": {name: {"topic_id": str,
           "partitions": {"0": {"log_start_offset": int, "segments": [RemoteSegment dict]}}}},
           "pending_topic_deletions": [{"topic": str, "topic_id": str}]}

The schemas follow kio's conventions, so kio's readers and writers encode them (no
``from __future__ import annotations`` here: kio reads the field types at run time).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32Timedelta

DESCRIBE_REMOTE_LOG_KEY = 32001
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
