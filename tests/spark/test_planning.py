"""Planning without Spark: options as Spark's Kafka source reads them, ranges split into
tiered and hot input partitions without overlap or gap, streaming rate limits."""

from __future__ import annotations

import pytest

from spark.options import OptionError, read_options
from spark.planning import HotSplit, TieredSplit, group_splits, split_hot, split_range
from spark.source import rate_limit
from tiered.remote_segment import COPY_FINISHED, RemoteSegment


def segment(base: int, end: int, segment_id: str = "a" * 32) -> RemoteSegment:
    return RemoteSegment(
        topic="t",
        topic_id="00000000-0000-0000-0000-000000000001",
        partition=0,
        segment_id=segment_id,
        base_offset=base,
        end_offset=end,
        max_timestamp=0,
        size_bytes=1000,
        index_bytes=0,
        leader_epoch=0,
        epochs=((0, base),),
        broker_id=1,
        created_ms=0,
        state=COPY_FINISHED,
    )


def covered(splits: list) -> list[int]:
    return [o for s in splits for o in range(s.start, s.end)]


def kinds(splits: list) -> list[tuple[str, int, int]]:
    return [("tiered" if isinstance(s, TieredSplit) else "hot", s.start, s.end) for s in splits]


def test_one_split_per_segment_then_the_hot_tail() -> None:
    splits = split_range(
        "t", 0, 0, 350, segments=[segment(0, 99), segment(100, 199)], cluster_id="c"
    )
    assert kinds(splits) == [("tiered", 0, 100), ("tiered", 100, 200), ("hot", 200, 350)]
    first = splits[0]
    assert isinstance(first, TieredSplit)
    assert first.key == (
        "c/t-00000000-0000-0000-0000-000000000001/0/" + "0" * 20 + "-" + "a" * 32 + ".log"
    )


def test_ranges_inside_segments_overlaps_and_gaps() -> None:
    segments = [segment(0, 99), segment(50, 149, "b" * 32), segment(200, 299)]
    splits = split_range("t", 0, 30, 260, segments=segments, cluster_id="c")
    assert kinds(splits) == [
        ("tiered", 30, 100),
        ("tiered", 100, 150),
        ("hot", 150, 200),  # the gap: through the brokers
        ("tiered", 200, 260),
    ]
    assert covered(splits) == list(range(30, 260))
    assert kinds(split_range("t", 0, 300, 400, segments=segments, cluster_id="c")) == [
        ("hot", 300, 400)
    ]
    assert split_range("t", 0, 5, 5, segments=segments, cluster_id="c") == []


def test_consecutive_segments_of_a_partition_share_a_task_up_to_split_bytes() -> None:
    ten = [segment(100 * i, 100 * i + 99, f"{i:032x}") for i in range(10)]  # 1000 B each
    splits = split_range("t", 0, 0, 1200, segments=ten, cluster_id="c")
    splits += split_range("t", 1, 0, 300, segments=ten[:2], cluster_id="c")
    groups = group_splits(splits, split_bytes=3000)
    shapes = [[(s.partition, *kinds([s])[0]) for s in g] for g in groups]
    assert [len(g) for g in groups] == [3, 3, 3, 1, 1, 2, 1]
    assert shapes[3] == [(0, "tiered", 900, 1000)]
    assert shapes[4] == [(0, "hot", 1000, 1200)], "a hot split is a task of its own"
    assert shapes[5] == [(1, "tiered", 0, 100), (1, "tiered", 100, 200)], "partitions apart"
    assert [s for g in groups for s in g] == splits, "every split once, in order"
    assert [len(g) for g in group_splits(splits, split_bytes=0)] == [1] * len(splits)
    # minPartitions: the widest groups are halved until there are enough
    wanted = group_splits(splits, split_bytes=10_000, min_partitions=6)
    assert len(wanted) == 6
    assert [s for g in wanted for s in g] == splits
    assert len(group_splits(splits, split_bytes=10_000, min_partitions=99)) == len(splits)


def test_min_partitions_cuts_hot_splits_only() -> None:
    splits = split_range("t", 0, 0, 1000, segments=[segment(0, 99)], cluster_id="c")
    more = split_hot(splits, 5)
    assert len(more) == 5
    assert covered(more) == list(range(1000))
    assert isinstance(more[0], TieredSplit)
    assert all(isinstance(s, HotSplit) for s in more[1:])


def test_rate_limit_shares_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 5}
    assert rate_limit(start, latest, 10_000) == latest
    limited = rate_limit(start, latest, 100)
    assert limited == {("t", 0): 90, ("t", 1): 110, ("t", 2): 5}
    # a share below one still moves by one offset
    assert rate_limit({("a", 0): 0, ("b", 0): 0}, {("a", 0): 1000, ("b", 0): 1}, 10)[("b", 0)] == 1


def test_options_as_spark_reads_them() -> None:
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
    options = read_options(
        {
            **base,
            "subscribe": "a, b",
            "startingoffsets": '{"a": {"0": 5, "1": -2}}',
            "endingOffsets": "latest",
            "includeHeaders": "true",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.jaas.config": 'x.ScramLoginModule required username="u" password="p";',
            "kafka.key.deserializer": "org.apache.kafka.Whatever",
            "sluice.s3.endpoint": "http://127.0.0.1:9000",
            "sluice.s3.bucket": "b",
        },
        streaming=False,
    )
    assert options.selection.topics == ("a", "b")
    assert options.starting.kind == "offsets"
    assert dict(options.starting.per_partition) == {("a", 0): 5, ("a", 1): -2}
    assert options.ending.kind == "latest"
    assert options.include_headers
    assert dict(options.kafka_conf) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.username": "u",
        "sasl.password": "p",
        "isolation.level": "read_uncommitted",
    }
    assert options.store is not None
    assert options.store.bucket == "b"
    assert options.describe_remote
    assert options.prefetch_chunks == 1

    timed = read_options(
        {**base, "assign": '{"a": [1, 0]}', "startingTimestamp": "1000"}, streaming=True
    )
    assert timed.selection.assigned == (("a", 0), ("a", 1))
    assert timed.starting.kind == "timestamp"
    assert timed.starting.timestamp == 1000
    assert timed.store is None
    assert not timed.describe_remote


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "kafka.bootstrap.servers"),
        ({"kafka.bootstrap.servers": "h:1"}, "exactly one"),
        ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "assign": "{}"}, "exactly one"),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "latest"},
            "not allowed for batch",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "earliest"},
            "not allowed",
        ),
        ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "{"}, "not JSON"),
        ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "sluice.s3.nope": "1"}, "unknown"),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a"}
            | {"sluice.read.prefetch.chunks": "9"},
            "at most 8",
        ),
    ],
)
def test_bad_options_are_refused_clearly(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        read_options(options, streaming=False)


def test_streaming_refuses_ending_offsets() -> None:
    with pytest.raises(OptionError, match="streaming"):
        read_options(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "latest"},
            streaming=True,
        )
