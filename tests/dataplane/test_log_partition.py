"""PartitionLog and Segment driven directly on a temporary directory: append, read, roll,
index lookups, timestamps, recovery of torn tails, index validation, log start offset."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crc32c
import pytest

from dataplane.config import BrokerConfig
from dataplane.handlers.list_offsets import tiered_lookup
from dataplane.log.loader import LOG_START_FILE
from dataplane.log.partition_log import PartitionLog
from dataplane.log.region import FileRegion
from dataplane.log.segment import Segment, segment_name
from dataplane.replication.partition import Partition
from wire.compression import CODEC_GZIP
from wire.errors import InvalidRecord, OffsetOutOfRange, OutOfOrderSequence
from wire.record_batch import (
    CODEC_ZSTD,
    Record,
    decode_records,
    encode_batch,
    iter_headers,
    validate_batches,
)

# --------------------------------------------------------------------------- helpers


def config_view(**overrides: Any) -> Callable[[str], Any]:
    """Topic config lookups with broker defaults; keys use underscores for dots."""
    broker = BrokerConfig.build(data_dir=".", listen="127.0.0.1:0")
    values = {k.replace("_", "."): v for k, v in overrides.items()}

    def view(key: str) -> Any:
        if key in values:
            return values[key]
        return broker.topic_default(key)

    return view


def open_log(directory: Path, **overrides: Any) -> PartitionLog:
    overrides.setdefault("file_delete_delay_ms", 0)
    return PartitionLog(directory / "t-0", "t", 0, config_view(**overrides))


def produce(
    plog: PartitionLog,
    pairs: list[tuple[bytes | None, bytes | None]],
    *,
    timestamp_ms: int = 1_000,
    codec: int = 0,
    producer: tuple[int, int, int] | None = None,
) -> tuple[int, int]:
    pid, epoch, seq = producer if producer is not None else (-1, -1, -1)
    data = bytearray(
        encode_batch(
            pairs,
            timestamp_ms=timestamp_ms,
            codec=codec,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
    )
    result = plog.append(data, validate_batches(data))
    return result.base_offset, result.last_offset


def read_all(
    plog: PartitionLog, start: int | None = None, max_bytes: int = 1 << 20
) -> list[Record]:
    """Every record from ``start`` (default: log start) to the high watermark, via read()."""
    offset = plog.log_start_offset if start is None else start
    records: list[Record] = []
    while offset < plog.high_watermark:
        data = plog.read(offset, max_bytes)
        assert data, f"no data at {offset} below the high watermark {plog.high_watermark}"
        for header in iter_headers(data):
            records.extend(
                r
                for r in decode_records(data[header.position : header.position + header.size])
                if r.offset >= offset
            )
            offset = header.next_offset
    return records


def fill(plog: PartitionLog, count: int, *, start_ts: int = 1_000, prefix: bytes = b"k") -> None:
    for i in range(count):
        produce(plog, [(prefix + b"%d" % i, b"value-%d" % i)], timestamp_ms=start_ts + i)


# --------------------------------------------------------------------------- append / read


def test_append_read_and_roll(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=1_000, index_interval_bytes=150)
    fill(plog, 300)
    assert plog.log_end_offset == 300
    assert len(plog.segments) > 10
    assert all(s.sealed for s in plog.segments[:-1])
    records = read_all(plog)
    assert [r.offset for r in records] == list(range(300))
    assert [r.key for r in records] == [b"k%d" % i for i in range(300)]
    # Every offset, looked up directly, starts the read at the batch that holds it.
    for offset in range(0, 300, 7):
        first = next(iter_headers(plog.read(offset, 1)))
        assert first.base_offset <= offset <= first.last_offset
    assert plog.read(300, 1000) == b""
    with pytest.raises(OffsetOutOfRange):
        plog.read(301, 1000)


def test_read_returns_whole_batches_within_max_bytes_but_at_least_one(tmp_path: Path) -> None:
    plog = open_log(tmp_path, index_interval_bytes=0)
    produce(plog, [(b"big", b"x" * 5_000)])
    fill(plog, 50)
    data = plog.read(0, 10)
    assert [h.base_offset for h in iter_headers(data)] == [0]
    assert len(data) == next(iter_headers(data)).size
    for max_bytes in (100, 250, 1_000, 3_333):
        data = plog.read(1, max_bytes)
        headers = list(iter_headers(data))
        assert sum(h.size for h in headers) == len(data) <= max_bytes
        assert headers[0].base_offset == 1


def test_read_stops_at_upper_bound(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, [(b"a", b"1"), (b"b", b"2")])
    produce(plog, [(b"c", b"3")])
    produce(plog, [(b"d", b"4")])
    assert [h.base_offset for h in iter_headers(plog.read(0, 10_000, upper=3))] == [0, 2]
    # A batch holding the bound itself is not served.
    assert plog.read(0, 10_000, upper=1) == b""
    assert [h.base_offset for h in iter_headers(plog.read(2, 10_000, upper=4))] == [2, 3]


def test_compressed_batches_are_stored_as_sent(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    data = bytearray(encode_batch([(b"k%d" % i, b"v" * 100) for i in range(20)], codec=CODEC_GZIP))
    sent = bytes(data)
    plog.append(data, validate_batches(data))
    stored = plog.read(0, 1 << 20)
    # Byte for byte as sent, but for the base offset and leader epoch the broker assigns.
    assert len(stored) == len(sent)
    assert stored[8:12] == sent[8:12]
    assert stored[16:] == sent[16:]
    assert [r.key for r in decode_records(stored)] == [b"k%d" % i for i in range(20)]


def test_index_lookup_every_offset_with_sparse_index(tmp_path: Path) -> None:
    plog = open_log(tmp_path, index_interval_bytes=500)
    for i in range(100):
        produce(plog, [(b"k", b"v")] * (1 + i % 5))
    segment = plog.active
    assert 1 < segment.index_entries < 100
    total = plog.log_end_offset
    for offset in range(total):
        found = segment.position_for(offset)
        assert found is not None
        position, header = found
        assert header.base_offset <= offset <= header.last_offset
        assert segment.header_at(position) == header
    assert segment.position_for(total) is None


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=800, index_interval_bytes=100)
    # Timestamps grow, with one batch out of order.
    stamps = [1_000 + 10 * i for i in range(60)]
    stamps[30] = 50_000
    for i, ts in enumerate(stamps):
        produce(plog, [(b"k%d" % i, b"v")], timestamp_ms=ts)
    assert len(plog.segments) > 3
    for target in (0, 1_000, 1_005, 1_290, 1_300, 1_590, 49_999, 50_000):
        expected = next(((i, ts) for i, ts in enumerate(stamps) if ts >= target), None)
        assert plog.offset_for_timestamp(target) == expected, target
    assert plog.offset_for_timestamp(50_001) is None
    assert plog.max_timestamp_offset() == (30, 50_000)


def test_offset_for_timestamp_inside_a_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    records = [Record(i, 100 + i * 10, b"k", b"v") for i in range(5)]
    data = bytearray(encode_batch(records))
    plog.append(data, validate_batches(data))
    assert plog.offset_for_timestamp(125) == (3, 130)
    assert plog.max_timestamp_offset() == (4, 140)


def test_null_key_refused_in_compacted_topic(tmp_path: Path) -> None:
    plog = open_log(tmp_path, cleanup_policy=["compact"])
    produce(plog, [(b"k", b"v")])
    for codec in (0, CODEC_ZSTD):
        with pytest.raises(InvalidRecord, match="without key"):
            produce(plog, [(b"k", b"v"), (None, b"v")], codec=codec)
    assert plog.log_end_offset == 1
    # A tombstone (key, null value) is fine.
    produce(plog, [(b"k", None)])
    plain = open_log(tmp_path / "plain")
    produce(plain, [(None, b"v")])


def test_duplicate_batches_survive_restart_via_snapshot(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=400)
    for seq in range(20):
        produce(plog, [(b"k", b"v%d" % seq)], producer=(42, 0, seq))
    plog.close_cleanly()
    snapshots = sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert snapshots[-1] == segment_name(20, ".snapshot")
    again = open_log(tmp_path, segment_bytes=400)
    data = bytearray(
        encode_batch([(b"k", b"v19")], producer_id=42, producer_epoch=0, base_sequence=19)
    )
    result = again.append(data, validate_batches(data))
    assert result.duplicate
    assert result.base_offset == 19
    with pytest.raises(OutOfOrderSequence):
        produce(again, [(b"k", b"v")], producer=(42, 0, 25))
    assert produce(again, [(b"k", b"v")], producer=(42, 0, 20)) == (20, 20)


def test_producer_state_rebuilt_without_snapshots(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=400)
    for seq in range(20):
        produce(plog, [(b"k", b"v")], producer=(7, 1, seq))
    plog.close()  # a crash: no clean-shutdown snapshot
    for path in (tmp_path / "t-0").glob("*.snapshot"):
        path.unlink()
    again = open_log(tmp_path, segment_bytes=400)
    assert again.producers.producers[7].last_seq == 19


# --------------------------------------------------------------------------- recovery


def test_torn_tail_is_truncated_on_load(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 10)
    plog.close()  # unclean: no index for the active segment
    path = tmp_path / "t-0" / segment_name(0, ".log")
    whole = path.stat().st_size
    half = encode_batch([(b"torn", b"x" * 100)], base_offset=10)[:70]
    with open(path, "ab") as fh:
        fh.write(half)
    again = open_log(tmp_path)
    assert path.stat().st_size == whole
    assert again.log_end_offset == 10
    assert [r.offset for r in read_all(again)] == list(range(10))
    assert produce(again, [(b"after", b"recovery")]) == (10, 10)


@pytest.mark.parametrize(
    "garbage",
    [b"\x00" * 4096, b"\xff" * 100, b"not a record batch at all, just text" * 3],
    ids=["zeros", "ones", "text"],
)
def test_garbage_tail_is_truncated(tmp_path: Path, garbage: bytes) -> None:
    plog = open_log(tmp_path)
    fill(plog, 5)
    plog.close()
    path = tmp_path / "t-0" / segment_name(0, ".log")
    with open(path, "ab") as fh:
        fh.write(garbage)
    again = open_log(tmp_path)
    assert again.log_end_offset == 5
    assert [r.offset for r in read_all(again)] == list(range(5))


def test_batch_with_bad_crc_and_everything_after_is_dropped(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 10)
    position = plog.active.position_for(6)
    assert position is not None
    plog.close()
    path = tmp_path / "t-0" / segment_name(0, ".log")
    with open(path, "r+b") as fh:
        fh.seek(position[0] + 70)
        byte = fh.read(1)
        fh.seek(position[0] + 70)
        fh.write(bytes([byte[0] ^ 0x40]))
    again = open_log(tmp_path)
    assert again.log_end_offset == 6


def test_torn_middle_segment_drops_later_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600)
    fill(plog, 40)
    bases = [s.base_offset for s in plog.segments]
    plog.close()
    directory = tmp_path / "t-0"
    victim = bases[2]
    (directory / segment_name(victim, ".index")).unlink()
    log_path = directory / segment_name(victim, ".log")
    os.truncate(log_path, log_path.stat().st_size - 5)
    again = open_log(tmp_path, segment_bytes=600)
    assert [s.base_offset for s in again.segments] == bases[:3]
    assert again.log_end_offset == again.segments[-1].next_offset < bases[3]
    records = read_all(again)
    assert [r.offset for r in records] == list(range(again.log_end_offset))
    assert not (directory / segment_name(bases[3], ".log")).exists()


def test_missing_or_damaged_index_files_are_rebuilt(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=700, index_interval_bytes=100)
    fill(plog, 60)
    before = read_all(plog)
    closed = plog.segments[:-1]
    plog.close_cleanly()
    directory = tmp_path / "t-0"
    (directory / segment_name(closed[0].base_offset, ".index")).unlink()
    damaged = directory / segment_name(closed[1].base_offset, ".index")
    raw = bytearray(damaged.read_bytes())
    raw[70] ^= 0xFF
    damaged.write_bytes(bytes(raw))
    stale = directory / segment_name(closed[2].base_offset, ".index")
    raw = bytearray(stale.read_bytes())
    struct.pack_into(">q", raw, 24, 12345)  # wrong log size (CRC fixed below)
    struct.pack_into(">I", raw, len(raw) - 4, crc32c.crc32c(bytes(raw[:-4])))
    stale.write_bytes(bytes(raw))
    again = open_log(tmp_path, segment_bytes=700, index_interval_bytes=100)
    assert read_all(again) == before
    for segment in again.segments[:3]:
        assert segment.index_path.exists()
        assert segment.sealed
    for offset in range(60):
        found = again.segments[0].position_for(offset) if offset < closed[0].next_offset else None
        if found is not None:
            assert found[1].base_offset <= offset <= found[1].last_offset


def test_index_file_round_trip_matches_a_rescan(tmp_path: Path) -> None:
    plog = open_log(tmp_path, index_interval_bytes=64)
    for i in range(40):
        produce(plog, [(b"k", b"v" * i)], timestamp_ms=5_000 - i * 3 if i % 7 else 9_000 + i)
    segment = plog.active
    segment.write_index()
    loaded = Segment(segment.directory, 0, 64)
    assert loaded.load_index()
    rescanned = Segment(segment.directory, 0, 64)
    assert rescanned.recover() == 0
    for other in (loaded, rescanned):
        assert other.index_bytes() == segment.index_bytes()
        other.close()


def test_clean_shutdown_skips_the_scan_and_is_invalidated_by_appends(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 10)
    plog.close_cleanly()
    active_index = tmp_path / "t-0" / segment_name(0, ".index")
    assert active_index.exists()
    again = open_log(tmp_path)
    assert not active_index.exists()  # removed before anything is appended
    assert again.log_end_offset == 10
    produce(again, [(b"x", b"y")])
    again.close()
    third = open_log(tmp_path)
    assert third.log_end_offset == 11


def test_log_start_offset_checkpoint(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600)
    fill(plog, 40)
    first_bases = [s.base_offset for s in plog.segments]
    inside = first_bases[2] + 1
    assert plog.delete_records_before(inside) == inside
    assert plog.segments[0].base_offset == first_bases[2]
    with pytest.raises(OffsetOutOfRange):
        plog.read(inside - 1, 100)
    assert read_all(plog)[0].offset == inside
    assert (tmp_path / "t-0" / LOG_START_FILE).read_text().strip() == str(inside)
    plog.close()
    again = open_log(tmp_path, segment_bytes=600)
    assert again.log_start_offset == inside
    assert again.delete_records_before(-1) == again.high_watermark == 40
    with pytest.raises(OffsetOutOfRange):
        again.delete_records_before(41)


def test_empty_log_restarts_at_the_stored_log_start(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 5)
    plog.delete_records_before(5)
    plog.close()
    for path in (tmp_path / "t-0").glob("*.log"):
        path.unlink()
    again = open_log(tmp_path)
    assert again.log_start_offset == again.log_end_offset == 5


def test_overlapping_segment_is_moved_aside(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=600)
    fill(plog, 30)
    second = plog.segments[1]
    plog.close_cleanly()
    directory = tmp_path / "t-0"
    bogus = directory / segment_name(second.base_offset - 2, ".log")
    bogus.write_bytes(encode_batch([(b"dup", b"dup")], base_offset=second.base_offset - 2))
    again = open_log(tmp_path, segment_bytes=600)
    assert (directory / (bogus.name + ".overlap")).exists()
    assert [r.offset for r in read_all(again)] == list(range(30))


# --------------------------------------------------------------------------- async


async def test_roll_seals_off_the_loop_and_flush_covers_unsealed(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=500)
    fill(plog, 30)
    assert plog._local._seals or all(s.sealed for s in plog.segments[:-1])
    fds = plog.sync_fds()
    assert plog.active.fd in fds
    await plog.settle()
    assert all(s.sealed for s in plog.segments[:-1])
    assert plog.sync_fds() == [plog.active.fd]
    for segment in plog.segments[:-1]:
        assert segment.index_path.exists()


async def test_long_poll_waiters_do_not_accumulate(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    part = Partition(plog, 0)  # owns the long-polling fetches (the log's on_change hook)
    for _ in range(1_000):
        future = part.new_data_future()
        future.cancel()
    assert len(part.fetch_waiters) <= 64
    waiter = asyncio.ensure_future(part.wait_for_data(5))
    await asyncio.sleep(0)
    produce(plog, [(b"k", b"v")])
    await asyncio.wait_for(waiter, 5)


def test_producer_expiry_uses_broker_time_not_record_timestamps(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, [(b"k", b"v")], producer=(9, 0, 0), timestamp_ms=1)  # an ancient timestamp
    now = plog.producers.producers[9].last_timestamp_ms
    plog.producers.expire(now + 1_000, 60_000)
    assert 9 in plog.producers.producers
    plog.producers.expire(now + 61_000, 60_000)
    assert 9 not in plog.producers.producers


def test_tiered_timestamp_lookup_survives_local_retention(tmp_path: Path) -> None:
    """ListOffsets by time on a tiered partition: the remote tier said "the local log
    answers" (the segment holding the record began at the local log start), and local
    retention then deleted that uploaded segment before the local log was asked. The lookup
    asks the remote tier again and finds the record there, not the first one after it."""
    plog = open_log(tmp_path, segment_bytes=800)
    stamps = [1_000 + 10 * i for i in range(40)]
    for i, ts in enumerate(stamps):
        produce(plog, [(b"k%d" % i, b"v")], timestamp_ms=ts)
    plog.advance_high_watermark(plog.log_end_offset)
    assert len(plog.segments) > 2
    first = plog.segments[0]
    target = first.max_timestamp  # held by the oldest local segment
    wanted = next((i, ts) for i, ts in enumerate(stamps) if ts >= target)
    calls = []

    async def remote(log: PartitionLog, timestamp: int) -> tuple[int, int] | None:
        calls.append(log.log_start_offset)
        if len(calls) == 1:
            log.delete_oldest_segment()  # uploaded, so local retention may delete it
            return None  # what the remote tier answered before the deletion
        # the remote tier holds the deleted segment
        return wanted if log.log_start_offset > wanted[0] else None

    got = asyncio.run(tiered_lookup(plog, target, remote))
    assert got == wanted
    assert len(calls) == 2
    assert calls[1] > calls[0]


@pytest.mark.parametrize("index_interval", [0, 300, 4096])
def test_a_region_holds_what_read_returns(tmp_path: Path, index_interval: int) -> None:
    """``read_region`` (a fetch answer sent with sendfile) covers the very batches ``read``
    returns, for every start offset, size bound and upper bound, and knows the offset
    after its last batch (read_committed's aborted-transaction range)."""
    plog = open_log(tmp_path, index_interval_bytes=index_interval, segment_bytes=40_000)
    for i in range(60):  # batches of 1-9 records, some large
        size = 2_000 if i % 7 == 0 else 40
        produce(plog, [(b"k%d" % j, bytes([i]) * size) for j in range(1 + i % 9)])
    end = plog.high_watermark
    checked = 0
    for offset in range(0, end, 3):
        for max_bytes in (1, 500, 3_000, 9_000):
            for upper in (end, offset + 5):
                want = bytes(plog.read(offset, max_bytes, upper=min(upper, end)))
                got = plog.read_region(offset, max_bytes, upper=min(upper, end), region_min=1)
                if not isinstance(got, FileRegion):
                    assert want == bytes(got) == b""
                    continue
                assert got.read() == want
                assert got.next_offset == list(iter_headers(want))[-1].next_offset
                checked += 1
    assert checked > 500
    plog.close()
