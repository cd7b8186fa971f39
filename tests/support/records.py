"""Helpers to build protocol requests for raw-client tests."""

from __future__ import annotations

import datetime
import importlib
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.serial import entity_reader

from dataplane.log.region import FileRegion
from wire.framing import EncodedResponse, response_type


def produce_request(
    topic: str,
    records: bytes,
    *,
    partition: int = 0,
    acks: int = -1,
    timeout_ms: int = 5000,
    version: int = 9,
) -> Any:
    """A Produce request of ``version`` (9 to 12: the same fields, named topics)."""
    schema = importlib.import_module(f"kio.schema.produce.v{version}.request")
    return schema.ProduceRequest(
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(
            schema.TopicProduceData(
                name=topic,
                partition_data=(schema.PartitionProduceData(index=partition, records=records),),
            ),
        ),
    )


def fetch_request(
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,  # type: ignore[arg-type]
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),  # type: ignore[arg-type]
        min_bytes=min_bytes,  # type: ignore[arg-type]
        max_bytes=max_bytes,  # type: ignore[arg-type]
        isolation_level=0,  # type: ignore[arg-type]
        session_id=0,  # type: ignore[arg-type]
        session_epoch=-1,  # type: ignore[arg-type]
        topics=(
            FetchTopic(
                topic=topic,  # type: ignore[arg-type]
                partitions=(
                    FetchPartition(
                        partition=partition,  # type: ignore[arg-type]
                        fetch_offset=offset,  # type: ignore[arg-type]
                        partition_max_bytes=max_bytes,  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def metadata_request(*topics: str) -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(MetadataRequestTopic(name=t, topic_id=None) for t in topics),  # type: ignore[arg-type]
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


def decoded(response: Any, api_key: int, version: int) -> Any:
    """A handler's answer as a kio entity: one it encoded itself (``EncodedResponse``: the
    Produce and Fetch answers) is parsed back, its file regions read."""
    if not isinstance(response, EncodedResponse):
        return response
    body = response.body
    pieces = body if isinstance(body, list) else [body]
    raw = b"".join(p.read() if isinstance(p, FileRegion) else bytes(p) for p in pieces)
    entity, _ = entity_reader(response_type(api_key, version))(raw, 0)
    return entity


def partition_response(response: Any, version: int = 12) -> Any:
    """The single partition of a single-topic produce or fetch response (a Fetch answer
    the handler encoded itself is parsed as Fetch ``version``)."""
    response = decoded(response, 1, version)
    topics = response.responses
    assert len(topics) == 1
    parts = getattr(topics[0], "partition_responses", None) or topics[0].partitions
    assert len(parts) == 1
    return parts[0]
