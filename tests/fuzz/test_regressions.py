"""Every fuzz target over every committed seed and regression input, without atheris: an
input that once crashed a parser, hung it or made it allocate without bound must now be
handled (the target returns, having caught only its parser's documented errors), and
the seeds captured from real clients must still go through."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio.schema.metadata.v12.request import MetadataRequest

from dataplane.handlers.registry import SERVED
from tests.fuzz.targets import TARGETS
from tests.support.broker import BrokerProcess
from tests.support.raw_client import RawClient
from wire import internal
from wire.errors import InvalidRequest
from wire.framing import decode_request, peek_header
from wire.request_bounds import plan

HERE = Path(__file__).parent
INPUTS = sorted(
    path
    for kind in ("corpus", "regressions")
    for path in (HERE / kind).glob("*/*")
    if path.is_file() and path.parent.name in TARGETS
)


def test_there_are_seeds_for_every_target() -> None:
    for target in TARGETS:
        assert list((HERE / "corpus" / target).iterdir()), f"no seeds for {target}"


@pytest.mark.parametrize(
    "path", INPUTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}"
)
def test_target_handles_input(path: Path) -> None:
    TARGETS[path.parent.name].run(path.read_bytes())


@pytest.mark.parametrize(
    "path",
    sorted((HERE / "regressions" / "kafka_request").iterdir()),
    ids=lambda p: p.name,
)
def test_malformed_frames_are_invalid_requests(path: Path) -> None:
    """The frames that once escaped decode_request (an abort of the process on an
    impossible array count, a KeyError on an unknown tagged field) are InvalidRequest."""
    frame = path.read_bytes()
    head = peek_header(frame)
    with pytest.raises(InvalidRequest):
        decode_request(frame, head.api_key, head.api_version)


def test_every_served_request_has_a_bounds_plan() -> None:
    for key, served in SERVED.items():
        for version in range(served.versions[0], served.versions[1] + 1):
            own = internal.schemas(key, version)
            plan(own[0] if own is not None else load_request_schema(key, version))


def test_seed_frames_still_decode() -> None:
    """The bounds check refuses nothing a real client sent."""
    frames = sorted((HERE / "corpus" / "kafka_request").iterdir())
    assert frames
    for path in frames:
        frame = path.read_bytes()
        head = peek_header(frame)
        decode_request(frame, head.api_key, head.api_version)


def test_broker_survives_the_frame_that_aborted_it(broker: BrokerProcess) -> None:
    """A 19-byte Metadata frame declaring 3.5 billion topics once made kio reserve 28 GB
    and aborted the broker process: now the connection is closed and the broker serves."""
    frame = HERE / "regressions" / "kafka_request" / "metadata-v9-3.5-billion-topics-aborts"
    data = frame.read_bytes()
    with RawClient(broker.bootstrap) as client:
        client.send_raw(len(data).to_bytes(4, "big") + data)
        assert client.is_closed(), "the broker should close a connection that sent it"
    assert broker.alive()
    with RawClient(broker.bootstrap) as client:
        answer = client.request(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    assert answer.brokers
