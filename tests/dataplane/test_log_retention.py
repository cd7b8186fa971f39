"""Retention by time and size, segment.ms rolls, deferred close of deleted segments, and the
housekeeping loop that drives them."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from dataplane.cluster import records
from dataplane.cluster.image import MetadataImage
from dataplane.config import BrokerConfig, Settings, ViewSettings
from dataplane.log.housekeeping import housekeeping_loop
from dataplane.log.manager import LogManager
from dataplane.log.segment import segment_name
from tests.dataplane.test_log_partition import fill, open_log, produce, read_all

NOW = 10_000_000


def test_retention_ms_deletes_old_closed_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600, retention_ms=1_000_000)
    fill(plog, 20, start_ts=NOW - 5_000_000)  # old
    old_segments = len(plog.segments) - 1
    plog.roll()
    fill(plog, 20, start_ts=NOW - 10, prefix=b"new")  # young
    young_first = plog.segments[old_segments + 1].base_offset
    assert plog.apply_retention(NOW) == old_segments + 1
    assert plog.log_start_offset == plog.segments[0].base_offset == young_first == 20
    assert [r.key for r in read_all(plog)] == [b"new%d" % i for i in range(20)]
    directory = tmp_path / "t-0"
    assert not (directory / segment_name(0, ".log")).exists()
    assert not (directory / segment_name(0, ".index")).exists()
    assert plog.apply_retention(NOW) == 0


def test_retention_stops_at_the_first_young_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=10**6, retention_ms=1_000)
    produce(plog, [(b"young", b"v")], timestamp_ms=NOW)
    plog.roll()
    produce(plog, [(b"old", b"v")], timestamp_ms=NOW - 10**6)
    plog.roll()
    produce(plog, [(b"active", b"v")], timestamp_ms=NOW)
    assert plog.apply_retention(NOW) == 0
    assert plog.log_start_offset == 0


def test_everything_expired_rolls_and_deletes_the_active_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600, retention_ms=1_000)
    fill(plog, 30, start_ts=NOW - 100_000)
    count = len(plog.segments)
    assert plog.apply_retention(NOW) == count
    assert len(plog.segments) == 1
    assert plog.active.size == 0
    assert plog.log_start_offset == plog.log_end_offset == 30
    assert plog.read(30, 100) == b""
    assert produce(plog, [(b"k", b"v")], timestamp_ms=NOW) == (30, 30)
    # An empty active segment is never deleted.
    empty = open_log(tmp_path / "empty", retention_ms=0)
    assert empty.apply_retention(NOW) == 0


def test_retention_bytes(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=1_000, retention_bytes=2_500)
    fill(plog, 100, start_ts=NOW)
    sizes = [s.size for s in plog.segments]
    total = sum(sizes)
    expected = 0
    excess = total - 2_500
    for size in sizes:
        if excess - size < 0:
            break
        excess -= size
        expected += 1
    assert plog.apply_retention(NOW) == expected > 0
    assert plog.size_bytes >= 2_500
    assert plog.size_bytes - plog.segments[0].size < 2_500
    assert [r.offset for r in read_all(plog)] == list(range(plog.log_start_offset, 100))


def test_retention_bytes_zero_empties_the_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=1_000, retention_bytes=0)
    fill(plog, 30, start_ts=NOW)
    plog.apply_retention(NOW)
    assert plog.log_start_offset == plog.log_end_offset == 30
    assert plog.size_bytes == 0


def test_compact_only_topics_ignore_time_and_size(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600, retention_ms=1, retention_bytes=0)
    plog.config = _override(plog.config, cleanup_policy=["compact"])
    fill(plog, 30, start_ts=NOW - 100_000)
    assert plog.apply_retention(NOW) == 0
    plog.config = _override(plog.config, cleanup_policy=["compact", "delete"])
    assert plog.apply_retention(NOW) > 0


def test_segments_being_cleaned_are_not_deleted(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600, retention_ms=1_000)
    fill(plog, 30, start_ts=NOW - 100_000)
    plog.segments[1].cleaning = True
    assert plog.apply_retention(NOW) == 1
    assert plog.delete_records_before(plog.log_end_offset) == 30
    assert plog.segments[0].cleaning  # deletion waits for the cleaner
    plog.segments[0].cleaning = False
    remaining = len(plog.segments)
    assert plog.delete_segments_below_start() == remaining - 1


def test_deleted_segment_stays_readable_until_reaped(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600, retention_ms=1_000, file_delete_delay_ms=60_000)
    fill(plog, 30, start_ts=NOW - 100_000)
    held = plog.segments[0]
    content = held.read_at(0, held.size)
    plog.apply_retention(NOW)
    assert not held.path.exists()
    assert held.read_at(0, held.size) == content  # an in-flight reader finishes
    assert plog.reap() == 0
    assert plog.reap(time.monotonic() + 61) > 0
    with pytest.raises(OSError, match="closed"):
        held.read_at(0, 10)


def test_segment_ms_roll_on_append_uses_record_timestamps(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_ms=1_000)
    produce(plog, [(b"a", b"1")], timestamp_ms=NOW)
    produce(plog, [(b"b", b"2")], timestamp_ms=NOW + 1_000)
    assert len(plog.segments) == 1
    produce(plog, [(b"c", b"3")], timestamp_ms=NOW + 1_001)
    assert [s.base_offset for s in plog.segments] == [0, 2]


def test_segment_ms_background_roll_uses_first_append_time(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_ms=60_000)
    now = int(time.time() * 1000)
    assert not plog.maybe_roll_by_time(now + 10**9)  # empty: nothing to roll
    produce(plog, [(b"a", b"1")], timestamp_ms=1)  # an ancient record timestamp
    assert not plog.maybe_roll_by_time(now + 1_000)
    assert plog.maybe_roll_by_time(now + 120_000)
    assert len(plog.segments) == 2


async def test_housekeeping_applies_retention_and_rolls(tmp_path: Path) -> None:
    config = BrokerConfig.build(
        data_dir=str(tmp_path),
        listen="127.0.0.1:0",
        overrides={
            "log.retention.check.interval.ms": "50",
            "log.cleaner.backoff.ms": "50",
            "log.segment.delete.delay.ms": "0",
        },
    )
    metadata = MetadataImage(node_id=1, cluster_id="retention-test")
    topic_id = records.new_topic_id()
    configs = {"retention.ms": "1000", "segment.bytes": "600"}
    metadata.apply(
        1,
        records.encode(
            [
                records.Topic("old", topic_id, configs),
                records.Partition(topic_id, 0, [1], [1], 1, 0, 0),
            ]
        ),
    )
    manager = LogManager(config, metadata)
    plog = manager.open_partition("old", 0)
    fill(plog, 40, start_ts=int(time.time() * 1000) - 10**6)
    task = asyncio.create_task(housekeeping_loop(manager, config))
    try:
        for _ in range(500):
            if plog.log_start_offset == 40:
                break
            await asyncio.sleep(0.02)
        assert plog.log_start_offset == plog.log_end_offset == 40
        assert [p.name for p in plog.directory.glob("*.log")] == [segment_name(40, ".log")]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        manager.close()
    assert os.listdir(tmp_path / "old-0")


def _override(settings: Settings, **values: object) -> Settings:
    mapped = {k.replace("_", "."): v for k, v in values.items()}

    def lookup(key: str) -> object:
        if key in mapped:
            return mapped[key]
        return settings[key]

    return ViewSettings(lookup)
