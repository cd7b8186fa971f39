"""Remote segment records (dict/JSON round trips) and the object keys of their segments."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiered.layout import (
    SUFFIXES,
    check_segment_keys,
    cluster_prefix,
    parse_key,
    partition_prefix,
    segment_keys,
    topic_prefix,
)
from tiered.remote_segment import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_STARTED,
    NO_TIMESTAMP,
    RemoteSegment,
)

CANONICAL_ID = "0b6cf6d4-5b8e-4a34-9d6b-5f1a3e0c2d11"
KAFKA_ID = "MPuVHJ-oQ1uKNfXG5JyXvA"  # Kafka's Uuid.toString(): URL-safe base64, 22 chars


def kafka_id(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def segment(
    topic: str = "orders-eu.v2", topic_id: str = CANONICAL_ID, **changes: object
) -> RemoteSegment:
    seg = RemoteSegment(
        topic=topic,
        topic_id=topic_id,
        partition=3,
        segment_id="a" * 32,
        base_offset=1200,
        end_offset=1299,
        max_timestamp=1_700_000_000_000,
        size_bytes=5000,
        index_bytes=64,
        leader_epoch=2,
        epochs=((1, 1200), (2, 1250)),
        broker_id=1,
        created_ms=1_700_000_000_123,
    )
    return dataclasses.replace(seg, **changes)  # type: ignore[arg-type]


# --- records -----------------------------------------------------------------------------


def test_the_dict_is_json_safe_and_round_trips() -> None:
    seg = segment(state=COPY_FINISHED)
    raw = seg.to_dict()
    assert json.loads(json.dumps(raw)) == raw
    assert RemoteSegment.from_dict(json.loads(json.dumps(raw))) == seg


def test_field_names_are_stable() -> None:
    assert sorted(segment().to_dict()) == sorted(
        [
            "topic",
            "topic_id",
            "partition",
            "segment_id",
            "base_offset",
            "end_offset",
            "max_timestamp",
            "size_bytes",
            "index_bytes",
            "leader_epoch",
            "epochs",
            "broker_id",
            "created_ms",
            "state",
            "txn_index_bytes",
        ]
    )
    assert segment().to_dict()["epochs"] == [[1, 1200], [2, 1250]]


def test_unknown_keys_of_a_newer_broker_are_ignored() -> None:
    seg = segment()
    assert RemoteSegment.from_dict({**seg.to_dict(), "future_field": {"x": 1}}) == seg


def test_states() -> None:
    seg = segment()
    assert seg.state == COPY_STARTED
    assert seg.with_state(COPY_FINISHED).state == COPY_FINISHED
    assert seg.with_state(DELETE_STARTED).with_state(COPY_STARTED) == seg
    with pytest.raises(ValueError, match="state"):
        seg.with_state("uploaded")
    with pytest.raises(ValueError, match="below base"):
        segment(end_offset=1199)
    with pytest.raises(dataclasses.FrozenInstanceError):
        seg.state = COPY_FINISHED  # type: ignore[misc]


@given(
    topic=st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True),
    partition=st.integers(0, 10_000),
    base=st.integers(0, 2**62),
    length=st.integers(0, 2**20),
    max_timestamp=st.one_of(st.just(NO_TIMESTAMP), st.integers(0, 2**62)),
    epochs=st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 2**62)), max_size=5),
    state=st.sampled_from([COPY_STARTED, COPY_FINISHED, DELETE_STARTED]),
)
def test_any_record_round_trips_through_json(  # noqa: PLR0917 - hypothesis arguments
    topic: str,
    partition: int,
    base: int,
    length: int,
    max_timestamp: int,
    epochs: list[tuple[int, int]],
    state: str,
) -> None:
    seg = segment(
        topic=topic,
        partition=partition,
        base_offset=base,
        end_offset=base + length,
        max_timestamp=max_timestamp,
        epochs=tuple(epochs),
        state=state,
    )
    assert RemoteSegment.from_dict(json.loads(json.dumps(seg.to_dict()))) == seg


# --- keys --------------------------------------------------------------------------------


def test_key_shape() -> None:
    keys = segment_keys("cluster-1", segment())
    stem = f"cluster-1/orders-eu.v2-{CANONICAL_ID}/3/00000000000000001200-{'a' * 32}"
    assert keys.all() == (stem + ".log", stem + ".index", stem + ".epochs", stem + ".snapshot")
    assert (keys.log, keys.index, keys.epochs, keys.snapshot) == keys.all()
    assert cluster_prefix("cluster-1") == "cluster-1/"
    assert topic_prefix("cluster-1", "orders-eu.v2", CANONICAL_ID) == (
        f"cluster-1/orders-eu.v2-{CANONICAL_ID}/"
    )
    assert partition_prefix("cluster-1", "orders-eu.v2", CANONICAL_ID, 3) == (
        f"cluster-1/orders-eu.v2-{CANONICAL_ID}/3/"
    )
    for key in keys.all():
        assert key.startswith(partition_prefix("cluster-1", "orders-eu.v2", CANONICAL_ID, 3))


@pytest.mark.parametrize(
    "topic",
    [
        "orders",
        "orders-eu",
        "orders-eu.v2",
        "a-b-c-d-e-f",
        "__consumer-offsets_x",
        "-",
        "x-",
        "-x",
        "..",
        # topic names that end like a topic id of the other form
        "t-0b6cf6d4-5b8e",
        f"t-{CANONICAL_ID}",
        f"t-{KAFKA_ID}",
        KAFKA_ID,
        CANONICAL_ID,
    ],
)
@pytest.mark.parametrize("topic_id", [CANONICAL_ID, KAFKA_ID, kafka_id(b"\xff" * 16)])
def test_keys_parse_back(topic: str, topic_id: str) -> None:
    seg = segment(topic=topic, topic_id=topic_id, partition=0, base_offset=0, end_offset=9)
    keys = check_segment_keys("cluster-7.eu", seg)
    for key, suffix in zip(keys.all(), SUFFIXES, strict=True):
        parsed = parse_key(key)
        assert parsed is not None, key
        assert (parsed.cluster_id, parsed.topic, parsed.topic_id) == (
            "cluster-7.eu",
            topic,
            topic_id,
        )
        assert (parsed.partition, parsed.base_offset, parsed.segment_id) == (0, 0, "a" * 32)
        assert parsed.suffix == suffix


@given(
    cluster=st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True),
    topic=st.from_regex(r"[A-Za-z0-9._-]{1,249}", fullmatch=True),
    raw_id=st.binary(min_size=16, max_size=16),
    canonical=st.booleans(),
    partition=st.integers(0, 100_000),
    base=st.integers(0, 2**63 - 1),
    segment_id=st.uuids(version=4).map(lambda u: u.hex),
)
def test_every_key_we_write_parses_back(  # noqa: PLR0917 - hypothesis arguments
    cluster: str,
    topic: str,
    raw_id: bytes,
    canonical: bool,
    partition: int,
    base: int,
    segment_id: str,
) -> None:
    topic_id = str(uuid.UUID(bytes=raw_id)) if canonical else kafka_id(raw_id)
    seg = segment(
        topic=topic,
        topic_id=topic_id,
        partition=partition,
        segment_id=segment_id,
        base_offset=base,
        end_offset=base,
    )
    for key in check_segment_keys(cluster, seg).all():
        parsed = parse_key(key)
        assert parsed is not None
        assert (parsed.cluster_id, parsed.topic, parsed.topic_id, parsed.partition) == (
            cluster,
            topic,
            topic_id,
            partition,
        )
        assert (parsed.base_offset, parsed.segment_id) == (base, segment_id)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "cluster-1/",
        "cluster-1/some/other/key",
        f"cluster-1/orders-{CANONICAL_ID}/3/",
        f"cluster-1/orders-{CANONICAL_ID}/3/00000000000000001200-{'a' * 32}.tmp",
        f"cluster-1/orders-{CANONICAL_ID}/3/1200-{'a' * 32}.log",  # not padded
        f"cluster-1/orders-{CANONICAL_ID}/03/00000000000000001200-{'a' * 32}.log",
        f"cluster-1/orders-{CANONICAL_ID}/3/00000000000000001200-{'A' * 32}.log",
        f"cluster-1/orders-{CANONICAL_ID}/3/00000000000000001200-{'a' * 31}.log",
        f"cluster-1/orders-{CANONICAL_ID.upper()}/3/00000000000000001200-{'a' * 32}.log",
        f"cluster-1/orders{CANONICAL_ID}/3/00000000000000001200-{'a' * 32}.log",  # no '-'
        f"cluster-1/-{CANONICAL_ID}/3/00000000000000001200-{'a' * 32}.log",  # no name
        "cluster-1/orders-MPuVHJ-oQ1uKNfXG5JyXvB/3/00000000000000001200-" + "a" * 32 + ".log",
        f"cluster-1/orders-{CANONICAL_ID}/3/00000000000000001200-{'a' * 32}.log/x",
        f"/orders-{CANONICAL_ID}/3/00000000000000001200-{'a' * 32}.log",
    ],
)
def test_other_keys_do_not_parse(key: str) -> None:
    assert parse_key(key) is None


@pytest.mark.parametrize(
    "changes",
    [
        {"topic_id": "not-an-id"},
        {"topic_id": CANONICAL_ID.upper()},
        {"segment_id": "segment-1"},
        {"topic": "a/b"},
        {"topic": ""},
    ],
)
def test_keys_that_would_not_parse_are_refused(changes: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="would not parse back"):
        check_segment_keys("c", segment(**changes))
    with pytest.raises(ValueError, match="would not parse back"):
        check_segment_keys("c/d", segment())
