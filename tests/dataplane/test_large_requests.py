"""Frames larger than the connection's read buffer arrive intact (1 MiB produce requests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from dataplane.server import READ_BUFFER
from tests.conftest import BrokerProcess, unique
from tests.support.raw_client import RawClient
from tests.support.records import fetch_request, partition_response, produce_request
from wire.record_batch import decode_records, encode_batch


@pytest.fixture(scope="module")
def auto_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("large") / "data",
        {"auto.create.topics.enable": "true", "message.max.bytes": str(4 << 20)},
    ).start()
    yield proc
    proc.stop()
    proc.kill()


@pytest.mark.parametrize("size", [READ_BUFFER - 100, READ_BUFFER + 1, 3 * READ_BUFFER + 17])
def test_large_batches_round_trip_pipelined(auto_broker: BrokerProcess, size: int) -> None:
    topic = unique("large")
    values = [bytes([i]) * size for i in range(3)]
    with RawClient(auto_broker.bootstrap, timeout=60) as client:
        # Three large requests written back to back: the broker must find each frame
        # boundary whether it falls in its shared buffer or in a frame buffer of its own.
        requests = [produce_request(topic, encode_batch([(b"k", v)])) for v in values]
        client.send_raw(b"".join(client.encode(r) for r in requests))
        answers = [client.receive(type(r))[1] for r in requests]
        assert [partition_response(a).error_code for a in answers] == [ErrorCode.none] * 3
        assert [partition_response(a).base_offset for a in answers] == [0, 1, 2]
        got: list[bytes | None] = []
        while len(got) < 3:
            part = partition_response(
                client.request(fetch_request(topic, len(got), max_bytes=16 << 20))
            )
            got += [r.value for r in decode_records(part.records)] if part.records else []
    assert got == values
