"""The hand-written Produce response encoder equals kio's, byte for byte, in every version."""

from __future__ import annotations

import datetime
import io
import uuid
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.constants import EntityType

from dataplane.handlers.registry import SERVED
from wire.framing import build
from wire.produce_response import TopicResult, encode_success

TOPICS: list[TopicResult] = [
    ("orders", uuid.UUID(int=0xABCDEF), [(0, 42, -1, 0), (3, 7, -1, 5)]),
    ("payments-é", uuid.UUID(int=7), [(1, 1 << 40, 1_700_000_000_123, 1 << 39)]),
]


def _kio_body(version: int) -> bytes:
    module: Any = load_payload_module(0, version, EntityType.response)
    topics = []
    for name, topic_id, parts in TOPICS:
        partitions = tuple(
            build(
                module.PartitionProduceResponse,
                index=index,
                error_code=ErrorCode.none,
                base_offset=base,
                log_append_time=None
                if append_time < 0
                else datetime.datetime.fromtimestamp(append_time / 1000, tz=datetime.UTC),
                log_start_offset=start,
                record_errors=(),
            )
            for index, base, append_time, start in parts
        )
        topics.append(
            build(
                module.TopicProduceResponse,
                name=name,
                topic_id=topic_id,
                partition_responses=partitions,
            )
        )
    response = build(
        module.ProduceResponse, responses=tuple(topics), throttle_time=datetime.timedelta(0)
    )
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    return buffer.getvalue()


@pytest.mark.parametrize("version", range(SERVED[0].versions[0], SERVED[0].versions[1] + 1))
def test_matches_kio(version: int) -> None:
    assert encode_success(version, TOPICS) == _kio_body(version)
