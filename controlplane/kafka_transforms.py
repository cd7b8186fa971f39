"""The requests the Transforms API sends to brokers: Sluice's Transforms request (32002,
``wire.internal``: an operation and a JSON document, the module's bytes for a deploy) and a
Fetch of one partition (the logs topic). Each function sends one request through an
:class:`~controlplane.kafka.Admin` (one broker); a Transforms error code raises
:class:`~controlplane.kafka.KafkaResponseError`, a Fetch's partition error is returned.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from controlplane.kafka import Admin, KafkaResponseError
from wire.internal import PAYLOAD_VERSION, TransformsRequest
from wire.record_batch import Record, decode_records, iter_headers

FETCH_BYTES = 1 << 20
"""Most bytes one Fetch returns (a larger batch still comes whole, as Kafka does)."""


async def transforms_call(
    admin: Admin, operation: str, doc: Mapping[str, Any], module: bytes = b""
) -> dict[str, Any]:
    """One Transforms request (deploy, pause, resume, delete, describe) to ``admin``'s
    broker: its answer document."""
    request = TransformsRequest(
        operation=operation,
        payload=json.dumps({"version": PAYLOAD_VERSION, **doc}).encode(),
        module=module,
    )
    response = await admin.call(request)
    if response.error_code != ErrorCode.none:
        raise KafkaResponseError(
            ErrorCode(response.error_code), response.error_message, f"transforms {operation}"
        )
    answer: dict[str, Any] = json.loads(response.payload)
    return answer


@dataclass(frozen=True)
class Fetched:
    error: ErrorCode
    records: list[Record] = field(default_factory=list)
    """Records at or after the offset asked for, in order."""
    next_offset: int = -1
    """The offset after the last complete batch returned; the one asked for when none."""


async def fetch_partition(
    admin: Admin, topic: str, partition: int, offset: int, max_wait_ms: int
) -> Fetched:
    """Records of one partition from ``offset`` (read from its leader, ``admin``); waits up
    to ``max_wait_ms`` for a first byte when there is none yet (long poll)."""
    request = fetch_req.FetchRequest(
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(1),
        max_bytes=i32(FETCH_BYTES),
        topics=(
            fetch_req.FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    fetch_req.FetchPartition(
                        partition=i32(partition),
                        fetch_offset=i64(offset),
                        partition_max_bytes=i32(FETCH_BYTES),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    response = await admin.call(request)
    part = response.responses[0].partitions[0]
    if part.error_code != ErrorCode.none:
        return Fetched(ErrorCode(part.error_code), next_offset=offset)
    data = bytes(part.records or b"")
    records: list[Record] = []
    next_offset = offset
    for header in iter_headers(data):
        batch = data[header.position : header.position + header.size]
        records += [r for r in decode_records(batch) if r.offset >= offset]
        next_offset = max(next_offset, header.last_offset + 1)
    return Fetched(ErrorCode.none, records, next_offset)
