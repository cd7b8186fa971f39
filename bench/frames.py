"""Frames for the raw-protocol benchmarks, built with the wire package (``wire``): a frame
is encoded once and re-sent; only the correlation id is patched.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.schema.metadata.v4.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData

from wire.client import BlockingConnection, decode_response, encode_request, response_schema
from wire.record_batch import encode_batch

CLIENT_ID = "sluice-bench"


def record_batch(values: list[bytes], timestamp_ms: int | None = None) -> bytes:
    """One uncompressed magic v2 batch, no producer id, keys null, no headers."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return encode_batch([(None, v) for v in values], timestamp_ms=ts)


def produce_frame(topic: str, batch: bytes, acks: int = 1, partition: int = 0) -> bytes:
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,  # type: ignore[arg-type]
        timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
        topic_data=(
            TopicProduceData(
                name=topic,  # type: ignore[arg-type]
                partition_data=(PartitionProduceData(index=partition, records=batch),),  # type: ignore[arg-type]
            ),
        ),
    )
    return encode_request(request, 1, CLIENT_ID)


def produce_errors(frame: bytes) -> list[int]:
    """Error codes of every partition in a Produce v7 response frame (no size prefix)."""
    response = decode_response(frame, response_schema(ProduceRequest))
    return [int(p.error_code) for t in response.responses for p in t.partition_responses]


def metadata_auto_create(bootstrap: str, topic: str) -> int:
    """Metadata v4 for ``topic`` with auto-creation allowed; returns the topic's error code."""
    with BlockingConnection.to(bootstrap, client_id=CLIENT_ID) as connection:
        response = connection.request(
            MetadataRequest(
                topics=(MetadataRequestTopic(name=topic),),  # type: ignore[arg-type]
                allow_auto_topic_creation=True,
            )
        )
    return int(response.topics[0].error_code)


def request(bootstrap: str, req: Any, timeout: float = 10) -> Any:
    with BlockingConnection.to(bootstrap, client_id=CLIENT_ID, timeout=timeout) as connection:
        return connection.request(req)
