"""The __consumer_offsets record formats, group placement, and Kafka's answer order."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.groups.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from dataplane.groups.storage import java_string_hash, kafka_answer_order, partition_for
from wire.errors import CorruptRecord


def test_offset_key_golden_bytes() -> None:
    # version 1 | group "g" | topic "t" | partition 2
    assert encode_offset_key("g", "t", 2) == bytes.fromhex("000100016700017400000002")
    assert decode_key(encode_offset_key("g", "t", 2)) == OffsetKey("g", "t", 2)
    # version 0 keys (old brokers) have the same fields
    assert decode_key(bytes.fromhex("000000016700017400000002")) == OffsetKey("g", "t", 2)


def test_group_key_golden_bytes_and_unknown_types() -> None:
    assert encode_group_key("grp") == bytes.fromhex("00020003") + b"grp"
    assert decode_key(encode_group_key("grp")) == GroupKey("grp")
    assert decode_key(bytes.fromhex("00030001") + b"x") is None  # KIP-848 record: skipped


def test_offset_value_v3_golden_bytes() -> None:
    value = OffsetValue(offset=42, leader_epoch=7, metadata="m", commit_timestamp=1000)
    data = encode_offset_value(value)
    assert data == struct.pack(">hqih", 3, 42, 7, 1) + b"m" + struct.pack(">q", 1000)
    assert decode_offset_value(data) == value


def test_offset_value_with_retention_is_v1() -> None:
    value = OffsetValue(5, -1, "", 1000, expire_timestamp=61000)
    data = encode_offset_value(value)
    assert struct.unpack_from(">h", data)[0] == 1
    assert decode_offset_value(data) == value


def test_offset_value_v4_flexible_is_read() -> None:
    # v4: offset | leaderEpoch | compact string "ab" | commitTimestamp | tagged fields
    # with tag 0 (a 16-byte topic id), which is skipped.
    data = (
        struct.pack(">hqi", 4, 9, 2)
        + bytes([3])
        + b"ab"
        + struct.pack(">q", 77)
        + bytes([1, 0, 16])
        + bytes(16)
    )
    assert decode_offset_value(data) == OffsetValue(9, 2, "ab", 77)


def test_truncated_and_unknown_values_are_corrupt() -> None:
    with pytest.raises(CorruptRecord):
        decode_offset_value(encode_offset_value(OffsetValue(1, -1, "x", 1))[:-3])
    with pytest.raises(CorruptRecord):
        decode_offset_value(struct.pack(">h", 9))
    with pytest.raises(CorruptRecord):
        decode_group_value(struct.pack(">h", 7))


members = st.builds(
    MemberValue,
    member_id=st.text(max_size=20),
    group_instance_id=st.none() | st.text(max_size=10),
    client_id=st.text(max_size=10),
    client_host=st.just("/127.0.0.1"),
    rebalance_timeout=st.integers(0, 2**31 - 1),
    session_timeout=st.integers(0, 2**31 - 1),
    subscription=st.binary(max_size=40),
    assignment=st.binary(max_size=40),
)


@given(
    st.builds(
        GroupValue,
        protocol_type=st.sampled_from(["consumer", "connect", ""]),
        generation=st.integers(0, 2**31 - 1),
        protocol=st.none() | st.sampled_from(["range", "roundrobin"]),
        leader=st.none() | st.text(max_size=20),
        current_state_timestamp=st.integers(-1, 2**62),
        members=st.lists(members, max_size=4).map(tuple),
    )
)
def test_group_value_round_trip(value: GroupValue) -> None:
    assert decode_group_value(encode_group_value(value)) == value


def test_group_value_v0_has_no_rebalance_timeout() -> None:
    def s(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    data = (
        struct.pack(">h", 0)
        + s("consumer")
        + struct.pack(">i", 3)
        + s("range")
        + s("m1")
        + struct.pack(">i", 1)
        + s("m1")
        + s("client")
        + s("/h")
        + struct.pack(">i", 10000)
        + struct.pack(">i", 2)
        + b"su"
        + struct.pack(">i", 1)
        + b"a"
    )
    value = decode_group_value(data)
    assert value.generation == 3
    assert value.current_state_timestamp == -1
    assert value.members == (MemberValue("m1", None, "client", "/h", 10000, 10000, b"su", b"a"),)


def test_java_string_hash_and_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Utils.abs makes it 0
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("nogroup") == 2117622110
    assert partition_for("nogroup", 4) == 2
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 code units


def test_answer_order_matches_kafka() -> None:
    # Measured against Apache Kafka 4.3 with offsets.topic.num.partitions=4.
    names = [f"g{i}" for i in range(12)]
    described = ["g3", "g7", "g2", "g6", "g11", "g0", "g4", "g8", "g1", "g5", "g9", "g10"]
    assert [names[i] for i in kafka_answer_order(names, 4)] == described
    deleted = ["zz63", "zz148", "zz137", "zz34", "zz92"]
    order = kafka_answer_order(deleted, 4, hashed_within=True)
    assert [deleted[i] for i in order] == ["zz92", "zz63", "zz34", "zz148", "zz137"]
    assert [deleted[i] for i in kafka_answer_order(deleted, 4)] == deleted
