"""Log primitives for Kafka-style replication: the leader-epoch cache, follower appends,
truncation (and its crash safety), the stored high watermark."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane.log.cleaner import LogCleaner
from dataplane.log.leader_epochs import (
    CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCache,
    parse_checkpoint,
)
from dataplane.log.loader import HIGH_WATERMARK_FILE
from dataplane.log.partition_log import PartitionLog
from dataplane.log.segment import Segment
from dataplane.replication.partition import Partition
from tests.dataplane.test_log_partition import config_view, fill, produce, read_all
from wire.errors import (
    CorruptRecord,
    LogCleaningInProgress,
    OffsetMismatch,
    OffsetOutOfRange,
    OutOfOrderSequence,
)
from wire.record_batch import encode_batch, iter_headers

UNDEFINED = (-1, -1)


def open_named(directory: Path, name: str = "t-0", **overrides: Any) -> PartitionLog:
    overrides.setdefault("file_delete_delay_ms", 0)
    return PartitionLog(directory / name, "t", 0, config_view(**overrides))


def replicate(leader: PartitionLog, follower: PartitionLog, max_bytes: int = 1 << 20) -> None:
    """Fetch everything the follower lacks, as the replica fetcher does."""
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, max_bytes, upper=leader.log_end_offset)
        assert data
        follower.append_replica(data)


def log_bytes(plog: PartitionLog) -> bytes:
    return b"".join(s.read_at(0, s.size) for s in plog.segments)


def entries(cache: LeaderEpochCache | PartitionLog) -> list[tuple[int, int]]:
    found = cache.epochs if isinstance(cache, PartitionLog) else cache
    return [(e.epoch, e.start_offset) for e in found.entries]


# --------------------------------------------------------------------------- epoch cache


def test_cache_assign_follows_kafka(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / CHECKPOINT_FILE)
    assert cache.latest_epoch == -1
    assert cache.assign(2, 6)
    assert not cache.assign(2, 7)  # same epoch, later offset: kept as is
    assert not cache.assign(1, 9)  # older epoch: ignored
    assert cache.assign(3, 8)
    assert cache.assign(4, 8)  # nothing written in epoch 3: replaced
    assert entries(cache) == [(2, 6), (4, 8)]
    assert cache.assign(5, 11)
    assert cache.assign(6, 12)
    assert cache.assign(7, 13)
    assert cache.assign(7, 12)  # latest epoch at an earlier offset (Kafka)
    assert entries(cache) == [(2, 6), (4, 8), (5, 11), (7, 12)]
    assert not cache.assign(-1, 20)
    assert cache.latest_epoch == 7
    # Led at epoch 1 without writing, then followed a leader whose epoch-0 data lands at
    # the same offset: the empty epoch goes (the follower's cache must match its log).
    follower = LeaderEpochCache(None)
    follower.assign(1, 0)
    assert follower.assign(0, 0)
    assert entries(follower) == [(0, 0)]


def test_cache_end_offset_for_kafka_examples() -> None:
    cache = LeaderEpochCache(None)
    assert cache.end_offset_for(0, 0) == UNDEFINED
    assert cache.end_offset_for(-1, 73) == UNDEFINED
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    assert cache.end_offset_for(4, 0) == (4, 11)  # before the first: first's start
    cache.assign(7, 12)
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)
    cache = LeaderEpochCache(None)
    for epoch, start in ((5, 11), (6, 12), (10, 20)):
        cache.assign(epoch, start)
    assert cache.end_offset_for(5, 30) == (5, 12)
    assert cache.end_offset_for(6, 30) == (6, 20)
    assert cache.end_offset_for(8, 30) == (6, 20)
    assert cache.end_offset_for(10, 30) == (10, 30)  # latest: the log end
    assert cache.end_offset_for(11, 30) == UNDEFINED
    assert cache.end_offset_for(-1, 30) == UNDEFINED


def test_cache_truncation_from_both_ends(tmp_path: Path) -> None:
    def fresh() -> LeaderEpochCache:
        cache = LeaderEpochCache(tmp_path / CHECKPOINT_FILE)
        for epoch, start in ((2, 6), (3, 8), (4, 11)):
            cache.assign(epoch, start)
        return cache

    cache = fresh()
    assert not cache.truncate_from_start(5)
    assert cache.truncate_from_start(8)
    assert entries(cache) == [(3, 8), (4, 11)]
    cache = fresh()
    cache.truncate_from_start(9)
    assert entries(cache) == [(3, 9), (4, 11)]
    cache = fresh()
    cache.truncate_from_start(12)
    assert entries(cache) == [(4, 12)]
    cache = fresh()
    assert not cache.truncate_from_end(12)
    cache.truncate_from_end(9)
    assert entries(cache) == [(2, 6), (3, 8)]
    cache.truncate_from_end(8)
    assert entries(cache) == [(2, 6)]
    cache.truncate_from_end(0)
    assert entries(cache) == []
    assert LeaderEpochCache.load(tmp_path / CHECKPOINT_FILE) is not None


def test_checkpoint_file_format(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    cache.assign(3, 120)
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    loaded = LeaderEpochCache.load(path)
    assert loaded is not None
    assert loaded.entries == [EpochEntry(0, 0), EpochEntry(3, 120)]
    for bad in ("", "1\n0\n", "0\n2\n0 0\n", "0\n2\n3 0\n1 5\n", "0\n1\nx y\n", "0\n1\n-1 0\n"):
        assert parse_checkpoint(bad) is None, bad
    assert parse_checkpoint("0\n0\n") == []
    path.write_text("garbage")
    assert LeaderEpochCache.load(path) is None
    assert LeaderEpochCache.load(tmp_path / "missing") is None


# --------------------------------------------------------------------------- leader side


def test_become_leader_stamps_and_records_epochs(tmp_path: Path) -> None:
    plog = open_named(tmp_path)
    fill(plog, 3)  # the default epoch 0
    plog.become_leader(4)
    fill(plog, 2)
    plog.become_leader(7)
    fill(plog, 1)
    assert entries(plog) == [(0, 0), (4, 3), (7, 5)]
    assert [h.leader_epoch for h in iter_headers(log_bytes(plog))] == [0, 0, 0, 4, 4, 7]
    assert plog.latest_epoch == 7
    assert plog.end_offset_for_epoch(4) == (4, 5)
    assert plog.end_offset_for_epoch(7) == (7, 6)
    assert plog.end_offset_for_epoch(5) == (4, 5)
    assert plog.end_offset_for_epoch(9) == UNDEFINED
    plog.become_leader(8)  # leads without writing: starts at the log end
    assert plog.end_offset_for_epoch(7) == (7, 6)
    plog.close_cleanly()
    assert entries(plog) == [(0, 0), (4, 3), (7, 5), (8, 6)]
    again = open_named(tmp_path)
    # As Kafka's load (truncateFromEnd(log end)): an epoch with nothing written is dropped;
    # leading again re-assigns it.
    assert entries(again) == [(0, 0), (4, 3), (7, 5)]


@pytest.mark.parametrize("how", ["missing", "lagging", "garbage", "empty"])
def test_epoch_cache_rebuilt_from_batch_headers(tmp_path: Path, how: str) -> None:
    """ "empty": the checkpoint is written without fsync; a crash can leave it so."""
    plog = open_named(tmp_path, segment_bytes=700, index_interval_bytes=100)
    expected = []
    offset = 0
    for epoch, count in ((0, 7), (1, 1), (3, 30), (4, 2), (9, 13), (12, 40)):
        plog.become_leader(epoch)
        expected.append((epoch, offset))
        fill(plog, count)
        offset += count
    assert entries(plog) == expected
    assert len(plog.segments) > 5
    plog.close_cleanly()
    path = tmp_path / "t-0" / CHECKPOINT_FILE
    if how == "missing":
        path.unlink()
    elif how == "lagging":
        path.write_text("0\n2\n0 0\n1 7\n")
    elif how == "empty":
        path.write_text("")
    else:
        path.write_text("0\n9\n")
    again = open_named(tmp_path, segment_bytes=700, index_interval_bytes=100)
    assert entries(again) == expected
    assert path.exists()


def test_epoch_cache_beyond_the_log_is_cut_on_load(tmp_path: Path) -> None:
    plog = open_named(tmp_path)
    fill(plog, 5)
    plog.close_cleanly()
    (tmp_path / "t-0" / CHECKPOINT_FILE).write_text("0\n2\n0 0\n2 9\n")
    again = open_named(tmp_path)
    assert entries(again) == [(0, 0)]


def test_log_start_moves_cut_the_epoch_cache(tmp_path: Path) -> None:
    plog = open_named(tmp_path, segment_bytes=600)
    fill(plog, 10)
    plog.become_leader(1)
    fill(plog, 10)
    plog.become_leader(2)
    fill(plog, 10)
    plog.delete_records_before(13)
    assert entries(plog) == [(1, 13), (2, 20)]
    plog.delete_oldest_segment()
    start = plog.log_start_offset
    assert entries(plog)[0][1] == max(start, 13)
    plog.close()
    again = open_named(tmp_path, segment_bytes=600)
    assert entries(again)[0][1] == again.log_start_offset


# --------------------------------------------------------------------------- follower append


def test_replica_copy_is_byte_identical_and_learns_epochs(tmp_path: Path) -> None:
    leader = open_named(tmp_path, "leader", segment_bytes=900)
    follower = open_named(tmp_path, "follower", segment_bytes=900)
    leader.become_leader(3)
    fill(leader, 20)
    leader.become_leader(5)
    fill(leader, 20)
    result = follower.append_replica(leader.read(0, 300, upper=leader.log_end_offset))
    assert result.base_offset == 0
    assert result.last_offset < 40
    replicate(leader, follower, max_bytes=250)
    assert log_bytes(follower) == log_bytes(leader)
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    assert entries(follower) == [(3, 0), (5, 20)]
    assert follower.leader_epoch == 0  # appends from the leader do not change it
    assert [r.offset for r in read_all(follower)] == list(range(40))


def test_replica_append_refuses_overlap_and_corruption_writing_nothing(tmp_path: Path) -> None:
    leader = open_named(tmp_path, "leader")
    follower = open_named(tmp_path, "follower")
    fill(leader, 6)
    everything = bytes(leader.read(0, 1 << 20, upper=6))
    follower.append_replica(leader.read(0, 1 << 20, upper=3))
    before = log_bytes(follower)
    with pytest.raises(OffsetMismatch):
        follower.append_replica(everything)  # starts below the log end
    batches = list(iter_headers(everything))
    third, fourth = batches[3], batches[4]
    swapped = (
        everything[fourth.position : fourth.position + fourth.size]
        + everything[third.position : third.position + third.size]
    )
    with pytest.raises(OffsetMismatch):
        follower.append_replica(swapped)  # offsets go backwards
    corrupt = bytearray(everything[third.position :])
    corrupt[fourth.position - third.position + fourth.size - 1] ^= 0xFF  # second batch
    with pytest.raises(CorruptRecord):
        follower.append_replica(corrupt)
    assert log_bytes(follower) == before
    assert follower.log_end_offset == 3
    # A trailing partial batch is left for the next fetch; nothing complete is a no-op.
    tail = everything[third.position :]
    result = follower.append_replica(tail[:-5])
    assert (result.base_offset, result.last_offset) == (3, 4)
    assert follower.log_end_offset == 5
    nothing = follower.append_replica(tail[fourth.size + third.size : -5])
    assert (nothing.base_offset, nothing.last_offset) == (5, 4)
    assert follower.append_replica(b"").last_offset == 4
    follower.append_replica(tail[third.size + fourth.size :])
    assert log_bytes(follower) == log_bytes(leader)


def test_replica_append_accepts_compaction_gaps(tmp_path: Path) -> None:
    follower = open_named(tmp_path)
    follower.append_replica(encode_batch([(b"a", b"1")], base_offset=0))
    follower.append_replica(
        encode_batch([(b"b", b"2")], base_offset=4) + encode_batch([(b"c", b"3")], base_offset=9)
    )
    assert follower.log_end_offset == 10
    assert [r.offset for r in read_all(follower)] == [0, 4, 9]


def test_follower_that_becomes_leader_detects_duplicates(tmp_path: Path) -> None:
    leader = open_named(tmp_path, "leader")
    follower = open_named(tmp_path, "follower")
    leader.become_leader(1)
    batches = []
    for seq in range(0, 12, 3):
        pairs: list[tuple[bytes | None, bytes | None]] = [(b"k%d" % i, b"v") for i in range(3)]
        batches.append((seq, pairs))
        produce(leader, pairs, producer=(77, 0, seq))
    replicate(leader, follower)
    follower.become_leader(2)
    seq, pairs = batches[-1]
    retry = bytearray(encode_batch(pairs, producer_id=77, producer_epoch=0, base_sequence=seq))
    result = follower.append(retry, list(iter_headers(retry)))
    assert result.duplicate
    assert (result.base_offset, result.last_offset) == (9, 11)
    with pytest.raises(OutOfOrderSequence):
        produce(follower, [(b"x", b"y")], producer=(77, 0, 20))
    assert produce(follower, [(b"x", b"y")], producer=(77, 0, 12)) == (12, 12)
    assert entries(follower) == [(1, 0), (2, 12)]


def test_replica_append_rolls_by_segment_ms(tmp_path: Path) -> None:
    follower = open_named(tmp_path, segment_ms=1_000)
    data = b"".join(
        encode_batch([(b"k", b"v")], base_offset=i, timestamp_ms=1_000 + i * 600) for i in range(6)
    )
    for header in iter_headers(data):
        follower.append_replica(data[header.position : header.position + header.size])
    assert [s.base_offset for s in follower.segments] == [0, 2, 4]


# --------------------------------------------------------------------------- truncation


def _epoch_log(directory: Path, name: str = "t-0", **overrides: Any) -> PartitionLog:
    plog = open_named(directory, name, **overrides)
    for epoch in range(4):
        plog.become_leader(epoch)
        for i in range(15):
            produce(plog, [(b"e%d-%d" % (epoch, i), b"x" * (i * 7))], timestamp_ms=1_000 + i)
    return plog


@pytest.mark.parametrize("where", ["middle", "boundary", "first-segment", "log-start"])
def test_truncate_then_append_again(tmp_path: Path, where: str) -> None:
    settings_: dict[str, Any] = {"segment_bytes": 800, "index_interval_bytes": 120}
    plog = _epoch_log(tmp_path, **settings_)
    bases = [s.base_offset for s in plog.segments]
    assert len(bases) > 6
    target = {
        "middle": bases[4] + 2,
        "boundary": bases[3],
        "first-segment": 1,
        "log-start": 0,
    }[where]
    assert plog.truncate_to(target)
    assert plog.log_end_offset == target
    assert plog.high_watermark == target
    assert [r.offset for r in read_all(plog)] == list(range(target))
    assert all(s.base_offset <= target for s in plog.segments)
    assert plog.segments[-1].base_offset == max(b for b in bases if b <= target)
    assert not (tmp_path / "t-0" / plog.active.index_path.name).exists()
    assert entries(plog) == [(e, e * 15) for e in range(4) if e * 15 < target]
    # Lookups over what is left (sparse index trimmed and re-extended)
    for offset in range(target):
        first = next(iter_headers(plog.read(offset, 1)))
        assert first.base_offset <= offset <= first.last_offset
    if target > 14:
        assert plog.offset_for_timestamp(1_000 + 14) == (14, 1_014)
    if target > 0:
        stamp, at = plog.active.max_timestamp, plog.active.max_timestamp_offset
        rescanned = Segment(plog.directory, plog.active.base_offset, 120)
        rescanned.recover()
        assert (rescanned.max_timestamp, rescanned.max_timestamp_offset) == (stamp, at)
        assert rescanned.index_bytes() == plog.active.index_bytes()
        rescanned.close()
    plog.become_leader(9)
    fill(plog, 30, start_ts=5_000, prefix=b"new")
    records = read_all(plog)
    assert [r.offset for r in records] == list(range(target + 30))
    assert records[-1].key == b"new29"
    assert plog.offset_for_timestamp(5_000) == (target, 5_000)
    assert entries(plog)[-1] == (9, target)
    plog.close()
    again = open_named(tmp_path, **settings_)
    assert [r.key for r in read_all(again)] == [r.key for r in records]
    assert entries(again) == entries(plog)


def test_truncate_mid_batch_removes_the_whole_batch(tmp_path: Path) -> None:
    plog = open_named(tmp_path)
    produce(plog, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    produce(plog, [(b"d", b"4")])
    assert plog.truncate_to(4) is False  # at the log end: nothing to do
    assert plog.truncate_to(2)
    assert plog.log_end_offset == 0


def test_truncation_point_follows_kip_279(tmp_path: Path) -> None:
    # a wrote epoch 0 (offset 0), b led epoch 1 (offset 0), a led epoch 2 without
    # writing, b leads epoch 3: a's offset 0 diverges although its log end matches.
    a = open_named(tmp_path, "a")
    fill(a, 1)
    a.become_leader(2)
    b = open_named(tmp_path, "b")
    b.become_leader(1)
    fill(b, 1, prefix=b"b")
    b.become_leader(3)
    epoch, end = b.end_offset_for_epoch(a.latest_epoch)
    assert (epoch, end) == (1, 1)
    assert a.truncation_point(epoch, end) == (1, False)  # a does not know epoch 1
    assert a.truncate_to(1) is False  # nothing to cut, but the empty epoch 2 goes
    assert a.latest_epoch == 0
    epoch, end = b.end_offset_for_epoch(a.latest_epoch)
    assert (epoch, end) == (0, 0)
    assert a.truncation_point(epoch, end) == (0, True)
    assert a.truncate_to(0)
    replicate(b, a)
    assert log_bytes(a) == log_bytes(b)
    assert entries(a) == [(1, 0)]


def test_truncate_limits(tmp_path: Path) -> None:
    plog = open_named(tmp_path, segment_bytes=600)
    fill(plog, 30)
    plog.delete_records_before(12)
    with pytest.raises(OffsetOutOfRange):
        plog.truncate_to(11)
    assert plog.truncate_to(12)
    assert plog.log_end_offset == 12 == plog.log_start_offset
    plog.segments[0].cleaning = True
    with pytest.raises(LogCleaningInProgress):
        plog.truncate_fully_and_start_at(50)


def test_truncation_rebuilds_producer_state_and_drops_later_snapshots(tmp_path: Path) -> None:
    plog = open_named(tmp_path, segment_bytes=500)
    for seq in range(40):
        produce(plog, [(b"k%d" % seq, b"v")], producer=(5, 0, seq))
    snapshots = sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert snapshots
    assert plog.truncate_to(10)
    assert all(int(p.stem) <= 10 for p in (tmp_path / "t-0").glob("*.snapshot"))
    # Sequence 10 was cut: it is new again, not a duplicate; 11 is out of order.
    with pytest.raises(OutOfOrderSequence):
        produce(plog, [(b"x", b"y")], producer=(5, 0, 11))
    assert produce(plog, [(b"k10", b"again")], producer=(5, 0, 10)) == (10, 10)
    retry = bytearray(
        encode_batch([(b"k9", b"v")], producer_id=5, producer_epoch=0, base_sequence=9)
    )
    assert plog.append(retry, list(iter_headers(retry))).duplicate


def test_a_seal_started_before_a_truncation_writes_no_stale_snapshot(tmp_path: Path) -> None:
    plog = open_named(tmp_path, segment_bytes=400)
    fill(plog, 20)
    rolled = plog.segments[-2]
    generation = plog._truncations
    plog.truncate_to(rolled.base_offset + 1)
    snapshot = plog.producers.snapshot()
    plog._local.seal(rolled, lambda: plog._write_roll_snapshot(20, snapshot, generation))
    assert not (tmp_path / "t-0" / "00000000000000000020.snapshot").exists()
    assert not rolled.sealed  # it is the active segment again


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    leader = open_named(tmp_path, "leader", segment_bytes=600)
    follower = open_named(tmp_path, "follower", segment_bytes=600)
    leader.become_leader(2)
    fill(leader, 40)
    fill(follower, 5)
    follower.auto_high_watermark = False
    leader.delete_records_before(23)
    follower.truncate_fully_and_start_at(leader.log_start_offset)
    assert follower.log_start_offset == follower.log_end_offset == follower.high_watermark == 23
    assert entries(follower) == []
    assert not list((tmp_path / "follower").glob("*.snapshot"))
    replicate(leader, follower)
    assert follower.log_end_offset == 40
    assert entries(follower) == [(2, 23)]
    follower.close()
    again = open_named(tmp_path, "follower", segment_bytes=600)
    assert again.log_start_offset == 23
    assert [r.offset for r in read_all(again)] == list(range(23, 40))


def test_truncation_survives_a_crash_after_it_returned(tmp_path: Path) -> None:
    plog = _epoch_log(tmp_path, segment_bytes=700)
    plog.truncate_to(37)
    shutil.copytree(tmp_path / "t-0", tmp_path / "crashed")  # no clean close
    again = open_named(tmp_path, "crashed", segment_bytes=700)
    assert again.log_end_offset == 37
    assert [r.key for r in read_all(again)] == [r.key for r in read_all(plog)]
    assert entries(again) == [(0, 0), (1, 15), (2, 30)]
    assert again.latest_epoch == 2


@pytest.mark.parametrize("crash_at", ["after-derived-state", "after-later-segments"])
def test_a_truncation_interrupted_by_a_crash_leaves_a_loadable_log(
    tmp_path: Path, crash_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = _epoch_log(tmp_path, segment_bytes=700)
    original = [r.key for r in read_all(plog)]

    class Crash(Exception):
        pass

    def crash(*_: Any) -> None:
        shutil.copytree(tmp_path / "t-0", tmp_path / "crashed")
        raise Crash

    if crash_at == "after-derived-state":
        monkeypatch.setattr(Segment, "unlink_files", crash)
    else:
        monkeypatch.setattr(Segment, "reopen_truncated", crash)
    with pytest.raises(Crash):
        plog.truncate_to(20)
    monkeypatch.undo()
    again = open_named(tmp_path, "crashed", segment_bytes=700)
    keys = [r.key for r in read_all(again)]
    assert keys == original[: len(keys)]
    assert len(keys) >= 20
    last_epoch = (again.log_end_offset - 1) // 15
    assert again.latest_epoch == last_epoch  # the cache caught up with the batches
    assert again.truncate_to(20)
    assert entries(again) == [(0, 0), (1, 15)]
    again.close()
    third = open_named(tmp_path, "crashed", segment_bytes=700)
    assert [r.key for r in read_all(third)] == original[:20]


# --------------------------------------------------------------------------- high watermark


def test_auto_high_watermark_follows_the_log_end(tmp_path: Path) -> None:
    plog = open_named(tmp_path)
    fill(plog, 5)
    assert plog.high_watermark == plog.log_end_offset == 5
    plog.advance_high_watermark(2)
    assert plog.high_watermark == 5
    plog.truncate_to(3)
    assert plog.high_watermark == 3


def test_manual_high_watermark(tmp_path: Path) -> None:
    plog = open_named(tmp_path)
    plog.auto_high_watermark = False
    fill(plog, 10)
    assert plog.high_watermark == 0
    assert plog.read(0, 1000) == b""  # consumers see nothing yet
    assert plog.read(0, 1000, upper=plog.log_end_offset)
    assert plog.advance_high_watermark(4) == 4
    assert plog.advance_high_watermark(2) == 4  # never down
    assert plog.advance_high_watermark(99) == 10  # capped at the log end
    assert [r.offset for r in read_all(plog)] == list(range(10))
    assert plog.set_high_watermark(3) == 10  # a follower's goes down only by truncation
    plog.truncate_to(6)
    assert plog.high_watermark == 6
    fill(plog, 4, start_ts=9_000)
    assert plog.high_watermark == 6
    assert plog.offset_for_timestamp(9_000) is None  # above the high watermark


def test_high_watermark_checkpoint(tmp_path: Path) -> None:
    plog = open_named(tmp_path)
    plog.auto_high_watermark = False
    fill(plog, 10)
    plog.advance_high_watermark(7)
    plog.flush()
    path = tmp_path / "t-0" / HIGH_WATERMARK_FILE
    assert path.read_text() == "7\n"
    plog.advance_high_watermark(8)
    shutil.copytree(tmp_path / "t-0", tmp_path / "crashed")
    plog.close_cleanly()
    assert path.read_text() == "8\n"
    crashed = open_named(tmp_path, "crashed")
    crashed.auto_high_watermark = False
    assert crashed.high_watermark == 7  # the last checkpoint
    again = open_named(tmp_path)
    assert again.high_watermark == 10  # auto (the default): the log end
    again.auto_high_watermark = False
    assert again.high_watermark == 8
    # A checkpoint above the log end (e.g. the log was truncated) is capped on load.
    path.write_text("50\n")
    again.close()
    third = open_named(tmp_path)
    third.auto_high_watermark = False
    assert third.high_watermark == 10
    # Truncation below the checkpoint rewrites it at once.
    third.truncate_to(4)
    assert path.read_text() == "4\n"


async def test_advancing_the_high_watermark_wakes_long_polls(tmp_path: Path) -> None:
    plog = open_named(tmp_path)
    plog.auto_high_watermark = False
    fill(plog, 3)
    part = Partition(plog, 0)  # owns the long-polling fetches (the log's on_change hook)
    waiter = part.new_data_future()
    fill(plog, 1)  # an append wakes the waiter too (as before)
    assert waiter.done()
    waiter = part.new_data_future()
    plog.advance_high_watermark(0)
    assert not waiter.done()  # nothing moved
    task = asyncio.ensure_future(part.wait_for_data(30))
    await asyncio.sleep(0)
    plog.advance_high_watermark(4)
    assert waiter.done()
    await task
    waiter = part.new_data_future()
    plog.set_high_watermark(4)
    assert not waiter.done()


# --------------------------------------------------------------------------- property


class _Cluster:
    """Two replicas of one partition and the operations replication performs."""

    def __init__(self, root: Path) -> None:
        self.logs = [
            open_named(root, "a", segment_bytes=700),
            open_named(root, "b", segment_bytes=700),
        ]
        self.leader = 0
        self.epoch = 0
        self.logs[0].become_leader(0)
        self.written = 0

    def elect(self, which: int) -> None:
        self.epoch += 1
        self.leader = which
        self.logs[which].become_leader(self.epoch)

    def produce(self, count: int) -> None:
        for _ in range(count):
            produce(self.logs[self.leader], [(b"k%d" % self.written, b"v" * (self.written % 50))])
            self.written += 1

    def reconcile(self) -> None:
        """The follower's OffsetForLeaderEpoch exchange (KIP-101 / KIP-279)."""
        leader, follower = self.logs[self.leader], self.logs[1 - self.leader]
        for _ in range(100):
            if follower.latest_epoch < 0:
                return
            epoch, end = leader.end_offset_for_epoch(follower.latest_epoch)
            if epoch < 0:
                target, done = leader.log_start_offset, True
            else:
                target, done = follower.truncation_point(epoch, end)
            follower.truncate_to(max(target, follower.log_start_offset))
            if done:
                return
        raise AssertionError("reconciliation does not converge")

    def fetch(self, max_bytes: int, cut: int) -> None:
        self.reconcile()
        leader, follower = self.logs[self.leader], self.logs[1 - self.leader]
        if follower.log_end_offset >= leader.log_end_offset:
            return
        data = bytes(leader.read(follower.log_end_offset, max_bytes, upper=leader.log_end_offset))
        follower.append_replica(data[: max(len(data) - cut, 0)])

    def truncate_follower(self, back: int) -> None:
        follower = self.logs[1 - self.leader]
        follower.truncate_to(max(follower.log_end_offset - back, follower.log_start_offset))


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("elect"), st.integers(0, 1)),
        st.tuples(st.just("produce"), st.integers(1, 12)),
        st.tuples(st.just("fetch"), st.integers(1, 900), st.integers(0, 120)),
        st.tuples(st.just("truncate"), st.integers(0, 8)),
    ),
    max_size=30,
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=_operations)
def test_replicas_converge_byte_for_byte(tmp_path: Path, operations: list[tuple[Any, ...]]) -> None:
    root = tmp_path / f"run-{id(operations)}-{len(list(tmp_path.iterdir()))}"
    cluster = _Cluster(root)
    try:
        for op in operations:
            if op[0] == "elect":
                cluster.elect(op[1])
            elif op[0] == "produce":
                cluster.produce(op[1])
            elif op[0] == "fetch":
                cluster.fetch(op[1], op[2])
            else:
                cluster.truncate_follower(op[1])
        cluster.reconcile()
        leader = cluster.logs[cluster.leader]
        follower = cluster.logs[1 - cluster.leader]
        replicate(leader, follower)
        assert log_bytes(follower) == log_bytes(leader)
        # Both replicas agree on where every epoch ends, and survive a restart.
        for epoch in range(cluster.epoch + 1):
            theirs = follower.end_offset_for_epoch(epoch)
            if theirs != UNDEFINED and epoch != follower.latest_epoch:
                assert theirs == leader.end_offset_for_epoch(epoch)
        expected = log_bytes(leader)
        for plog in cluster.logs:
            plog.close()
        for name in ("a", "b"):
            reopened = open_named(root, name, segment_bytes=700)
            assert log_bytes(reopened) == expected
            reopened.close()
    finally:
        for plog in cluster.logs:
            if not plog.closed:
                plog.close()
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- compaction


async def test_truncation_below_the_cleaner_checkpoint_and_replicated_compaction(
    tmp_path: Path,
) -> None:
    now = 50_000_000
    compact = {
        "cleanup_policy": ["compact"],
        "segment_bytes": 500,
        "min_cleanable_dirty_ratio": 0.1,
    }
    plog = open_named(tmp_path, "leader", **compact)
    for i in range(60):
        produce(plog, [(b"k%d" % (i % 7), b"old-%d" % i)], timestamp_ms=now)
    cleaner = LogCleaner()
    await plog.settle()
    assert await cleaner.clean(plog, now_ms=now) is not None
    cleaned_to = plog.cleaner_offset
    assert cleaned_to > 20
    assert plog.truncate_to(20)
    assert plog.cleaner_offset == 20
    checkpoint = (plog.directory / "cleaner-offset-checkpoint").read_text().split()
    assert checkpoint[0] == "20"
    for i in range(60):
        produce(plog, [(b"k%d" % (i % 7), b"new-%d" % i)], timestamp_ms=now)
    plog.roll()
    await plog.settle()
    await cleaner.clean(plog, now_ms=now)
    latest = {r.key: r.value for r in read_all(plog)}
    assert latest == {
        b"k%d" % k: b"new-%d" % max(i for i in range(60) if i % 7 == k) for k in range(7)
    }
    # Records below the truncation point superseded later were compacted away.
    assert sum(1 for r in read_all(plog) if r.value and r.value.startswith(b"old")) <= 7
    # A follower copies the compacted log, gaps and all.
    follower = open_named(tmp_path, "follower", **compact)
    replicate(plog, follower, max_bytes=300)
    assert log_bytes(follower) == log_bytes(plog)
    assert read_all(follower) == read_all(plog)
