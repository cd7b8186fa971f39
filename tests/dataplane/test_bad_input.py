"""Bad input gets a Kafka error code or a closed connection, never a crash or lost data."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from tests.conftest import BrokerProcess, unique
from tests.support.raw_client import RawClient
from tests.support.records import (
    fetch_request,
    metadata_request,
    partition_response,
    produce_request,
)
from wire.record_batch import encode_batch


@pytest.fixture(scope="module")
def auto_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("bad-input") / "data",
        {"auto.create.topics.enable": "true", "socket.request.max.bytes": "1048576"},
    ).start()
    yield proc
    proc.stop()
    proc.kill()


def _seed(bootstrap: str, topic: str, n: int = 3) -> int:
    """Produce n records; return the log end offset."""
    with RawClient(bootstrap) as client:
        batch = encode_batch([(b"k%d" % i, b"v%d" % i) for i in range(n)], timestamp_ms=1000)
        part = partition_response(client.request(produce_request(topic, batch)))
        assert part.error_code == ErrorCode.none
        return int(part.base_offset) + n


def _end_offset(bootstrap: str, topic: str) -> int:
    with RawClient(bootstrap) as client:
        part = partition_response(client.request(fetch_request(topic, 0)))
        return int(part.high_watermark)


def _assert_alive_and_intact(broker: BrokerProcess, topic: str, end: int) -> None:
    assert broker.proc is not None
    assert broker.proc.poll() is None, broker.logs()
    assert _end_offset(broker.bootstrap, topic) == end


def test_bad_crc_is_corrupt_message_and_stores_nothing(auto_broker: BrokerProcess) -> None:
    topic = unique("crc")
    end = _seed(auto_broker.bootstrap, topic)
    batch = bytearray(encode_batch([(b"k", b"v")]))
    batch[-1] ^= 0xFF  # flip a bit inside the CRC-covered records
    with RawClient(auto_broker.bootstrap) as client:
        part = partition_response(client.request(produce_request(topic, bytes(batch))))
    assert part.error_code == ErrorCode.corrupt_message
    _assert_alive_and_intact(auto_broker, topic, end)


def test_truncated_batch_is_corrupt_message(auto_broker: BrokerProcess) -> None:
    topic = unique("trunc")
    end = _seed(auto_broker.bootstrap, topic)
    batch = encode_batch([(b"k", b"v" * 100)])
    with RawClient(auto_broker.bootstrap) as client:
        part = partition_response(client.request(produce_request(topic, batch[:-10])))
    assert part.error_code == ErrorCode.corrupt_message
    _assert_alive_and_intact(auto_broker, topic, end)


def test_old_magic_is_unsupported_for_message_format(auto_broker: BrokerProcess) -> None:
    topic = unique("magic")
    end = _seed(auto_broker.bootstrap, topic)
    batch = bytearray(encode_batch([(b"k", b"v")]))
    batch[16] = 1
    with RawClient(auto_broker.bootstrap) as client:
        part = partition_response(client.request(produce_request(topic, bytes(batch))))
    assert part.error_code == ErrorCode.unsupported_for_message_format
    _assert_alive_and_intact(auto_broker, topic, end)


def test_invalid_required_acks(auto_broker: BrokerProcess) -> None:
    topic = unique("acks")
    end = _seed(auto_broker.bootstrap, topic)
    with RawClient(auto_broker.bootstrap) as client:
        part = partition_response(
            client.request(produce_request(topic, encode_batch([(b"k", b"v")]), acks=5))
        )
    assert part.error_code == ErrorCode.invalid_required_acks
    _assert_alive_and_intact(auto_broker, topic, end)


def test_invalid_topic_names(auto_broker: BrokerProcess) -> None:
    with RawClient(auto_broker.bootstrap) as client:
        response = client.request(metadata_request("bad/name", "x" * 250, ".."))
    codes = {t.name: t.error_code for t in response.topics}
    assert set(codes.values()) == {ErrorCode.invalid_topic_exception}, codes


def test_oversized_batch_is_message_too_large(auto_broker: BrokerProcess) -> None:
    topic = unique("large")
    end = _seed(auto_broker.bootstrap, topic)
    batch = encode_batch([(b"k", b"x" * 1_100_000)])
    with RawClient(auto_broker.bootstrap) as client:
        # over socket.request.max.bytes=1 MiB: the frame itself is refused, the connection
        # closed as soon as its size is read (a reset may meet the rest of the send)
        try:
            client.send(produce_request(topic, batch))
        except (ConnectionResetError, BrokenPipeError):
            pass
        else:
            assert client.is_closed()
    _assert_alive_and_intact(auto_broker, topic, end)


def test_batch_over_max_message_bytes(tmp_path: Path) -> None:
    proc = BrokerProcess(
        tmp_path / "data", {"auto.create.topics.enable": "true", "message.max.bytes": "1000"}
    ).start()
    try:
        topic = unique("mmb")
        end = _seed(proc.bootstrap, topic)
        with RawClient(proc.bootstrap) as client:
            part = partition_response(
                client.request(produce_request(topic, encode_batch([(b"k", b"x" * 2000)])))
            )
        assert part.error_code == ErrorCode.message_too_large
        _assert_alive_and_intact(proc, topic, end)
    finally:
        proc.stop()


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(struct.pack(">i", 3) + b"abc", id="shorter-than-header"),
        pytest.param(struct.pack(">i", 50 * 1024 * 1024), id="over-socket-request-max-bytes"),
        pytest.param(struct.pack(">ihhi", 8, 9999, 0, 1), id="unknown-api-key"),
        pytest.param(struct.pack(">ihhi", 8, 3, 99, 1), id="unknown-metadata-version"),
        pytest.param(
            struct.pack(">ihhih", 12, 3, 12, 1, 200) + b"\xff" * 2, id="garbage-metadata-body"
        ),
        pytest.param(
            struct.pack(">ihhih", 14, 0, 9, 1, -1) + b"\x00\x01\x00\x00", id="truncated-produce"
        ),
    ],
)
def test_malformed_frames_close_the_connection(auto_broker: BrokerProcess, frame: bytes) -> None:
    topic = unique("frames")
    end = _seed(auto_broker.bootstrap, topic)
    with RawClient(auto_broker.bootstrap) as client:
        client.send_raw(frame)
        assert client.is_closed(), "broker should close a connection that sent a bad frame"
    _assert_alive_and_intact(auto_broker, topic, end)


def test_unknown_api_versions_version_gets_v0_fallback(auto_broker: BrokerProcess) -> None:
    with RawClient(auto_broker.bootstrap) as client:
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        data = bytearray(client.encode(request))
        struct.pack_into(">h", data, 6, 99)  # claim ApiVersions v99
        client.send_raw(bytes(data))
        frame = client.read_frame()
    response, _ = entity_reader(ApiVersionsResponse)(frame, 4)
    assert response.error_code == ErrorCode.unsupported_version
    keys = {k.api_key for k in response.api_keys}
    assert {0, 1, 2, 3, 18} <= keys


def test_pipelined_produce_wakes_long_poll_fetch_on_same_connection(
    auto_broker: BrokerProcess,
) -> None:
    """A waiting fetch does not stop the produce behind it from being processed."""
    topic = unique("pipeline")
    end = _seed(auto_broker.bootstrap, topic, 1)
    # The fetch may wait 10 minutes; the socket gives up after 60 s. Only the append behind
    # it on the same connection can complete it in time.
    with RawClient(auto_broker.bootstrap, timeout=60) as client:
        fetch = fetch_request(topic, end, max_wait_ms=600_000, min_bytes=1)
        produce = produce_request(topic, encode_batch([(b"new", b"record")]))
        fetch_id = client.send(fetch)
        produce_id = client.send(produce)
        got_fetch, fetch_response = client.receive(type(fetch))
        got_produce, produce_response = client.receive(type(produce))
    assert (got_fetch, got_produce) == (fetch_id, produce_id)
    assert partition_response(produce_response).base_offset == end
    records = partition_response(fetch_response).records
    assert records, "the fetch must return the record produced behind it"


def _start_with(tmp_path: Path, setting: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dataplane.main",
            "--data-dir",
            str(tmp_path),
            "--listen",
            "127.0.0.1:0",
            "--set",
            setting,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("log.segment.bytes=lots", "log.segment.bytes"),
        ("no.such.key=1", "no.such.key"),
        ("log.flush.policy=sometimes", "log.flush.policy"),
        ("num.partitions=0", "num.partitions"),
    ],
)
def test_invalid_broker_config_exits_naming_the_key(
    tmp_path: Path, setting: str, named: str
) -> None:
    result = _start_with(tmp_path, setting)
    assert result.returncode == 2
    assert named in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, "one line, no traceback"


def test_data_dir_of_another_cluster_is_refused(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", {"cluster.id": "first-cluster"}).start()
    proc.stop()
    result = _start_with(tmp_path / "data", "cluster.id=second-cluster")
    assert result.returncode == 2
    assert "first-cluster" in result.stderr
