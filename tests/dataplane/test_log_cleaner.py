"""The log cleaner against a model of Kafka's compaction, plus its crash and concurrency rules."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane.log import cleaner as cleaner_module
from dataplane.log.cleaner import LogCleaner, plan_cleaning
from dataplane.log.partition_log import PartitionLog
from dataplane.log.segment import Segment
from tests.dataplane.test_log_partition import open_log, produce, read_all
from wire.compression import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY
from wire.record_batch import CODEC_NONE, CODEC_ZSTD, Record, decode_records, iter_headers

NOW = 50_000_000
RETENTION = 1_000  # delete.retention.ms in these tests


def compacted_log(tmp_path: Path, **overrides: Any) -> PartitionLog:
    settings_: dict[str, Any] = {
        "cleanup_policy": ["compact"],
        "segment_bytes": 700,
        "delete_retention_ms": RETENTION,
        "min_cleanable_dirty_ratio": 0.5,
    }
    settings_.update(overrides)
    return open_log(tmp_path, **settings_)


def batches(plog: PartitionLog) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, record count, codec) of every stored batch."""
    out = []
    for segment in plog.segments:
        for _, header in segment.iter_batches():
            out.append((header.base_offset, header.last_offset, header.record_count, header.codec))
    return out


def model(
    writes: list[tuple[int, bytes, bytes | None]], cleaned_end: int, tombstones_gone: bool
) -> list[tuple[int, bytes, bytes | None]]:
    """Kafka's result: below ``cleaned_end`` only the latest record per key survives (and
    not a tombstone once its horizon passed); everything from ``cleaned_end`` stays."""
    latest: dict[bytes, int] = {}
    for offset, key, _ in writes:
        if offset < cleaned_end:
            latest[key] = offset
    kept = []
    for offset, key, value in writes:
        if offset >= cleaned_end or (
            latest[key] == offset and not (value is None and tombstones_gone)
        ):
            kept.append((offset, key, value))
    return kept


def as_triples(records: list[Record]) -> list[tuple[int, bytes, bytes | None]]:
    return [(r.offset, r.key or b"", r.value) for r in records]


# --------------------------------------------------------------------------- semantics


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
            st.none() | st.binary(min_size=1, max_size=40),
        ),
        min_size=1,
        max_size=120,
    ),
    per_batch=st.integers(1, 4),
    codec=st.sampled_from([CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]),
)
def test_compaction_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[bytes, bytes | None]],
    per_batch: int,
    codec: int,
) -> None:
    tmp_path = tmp_path_factory.mktemp("model")
    plog = compacted_log(tmp_path, segment_bytes=400)
    writes: list[tuple[int, bytes, bytes | None]] = []
    for i in range(0, len(ops), per_batch):
        chunk = ops[i : i + per_batch]
        base, _ = produce(plog, list(chunk), timestamp_ms=NOW, codec=codec)
        writes.extend((base + j, key, value) for j, (key, value) in enumerate(chunk))
    before = read_all(plog)
    cleanable_end = plog.active.base_offset

    async def passes() -> None:
        cleaner = LogCleaner()
        await cleaner.clean(plog, now_ms=NOW)
        assert as_triples(read_all(plog)) == model(writes, cleanable_end, False)
        # Later, past every delete horizon: a pass runs although nothing is dirty.
        await cleaner.clean(plog, now_ms=NOW + RETENTION + 1)
        assert as_triples(read_all(plog)) == model(writes, cleanable_end, True)
        assert plog.latest_delete_horizon == -1

    asyncio.run(passes())
    for offset, _, _, batch_codec in batches(plog):
        assert batch_codec in (codec, CODEC_NONE), offset
    if cleanable_end == 0:
        assert read_all(plog) == before
    # The result survives a restart exactly.
    after = read_all(plog)
    plog.close()
    again = compacted_log(tmp_path, segment_bytes=400)
    assert read_all(again) == after
    again.close()


async def test_offsets_codecs_and_batch_fields_are_kept(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path)
    produce(plog, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], codec=CODEC_ZSTD, timestamp_ms=NOW)
    produce(plog, [(b"a", b"2"), (b"x", b"1")], codec=CODEC_GZIP, timestamp_ms=NOW)
    for i in range(20):
        produce(plog, [(b"f%d" % i, b"x" * 30)], timestamp_ms=NOW)
    produce(plog, [(b"b", b"2")], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    result = await LogCleaner().clean(plog, now_ms=NOW)
    assert result is not None
    assert result.records_removed == 2
    stored = batches(plog)
    first = stored[0]
    assert first == (0, 2, 1, CODEC_ZSTD)  # keeps base and last offset; only c remains
    assert stored[1] == (3, 4, 2, CODEC_GZIP)  # untouched: copied byte for byte
    records = read_all(plog)
    assert [(r.offset, r.key, r.value) for r in records[:3]] == [
        (2, b"c", b"1"),
        (3, b"a", b"2"),
        (4, b"x", b"1"),
    ]
    assert plog.cleaner_offset == plog.active.base_offset


async def test_tombstones_get_a_horizon_then_go(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path)
    produce(plog, [(b"gone", b"v")], timestamp_ms=NOW)
    produce(plog, [(b"gone", None)], timestamp_ms=NOW)
    produce(plog, [(b"kept", b"v")], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    cleaner = LogCleaner()
    await cleaner.clean(plog, now_ms=NOW)
    assert [(r.key, r.value) for r in read_all(plog)] == [(b"gone", None), (b"kept", b"v")]
    tombstone = next(h for _, h in plog.segments[0].iter_batches() if h.base_offset == 1)
    assert tombstone.delete_horizon == NOW + RETENTION
    assert plog.latest_delete_horizon == NOW + RETENTION
    # Not yet: horizon not reached, nothing dirty.
    assert await cleaner.clean(plog, now_ms=NOW + RETENTION - 1) is None
    await cleaner.clean(plog, now_ms=NOW + RETENTION)
    assert [(r.key, r.value) for r in read_all(plog)] == [(b"kept", b"v")]
    assert plog.latest_delete_horizon == -1


async def test_min_compaction_lag_and_dirty_ratio(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path, min_compaction_lag_ms=10_000)
    for i in range(10):
        produce(plog, [(b"k", b"%d" % i)], timestamp_ms=NOW - 20_000)
        produce(plog, [(b"pad%d" % i, b"x" * 50)], timestamp_ms=NOW - 20_000)
    plog.roll()
    for i in range(10):
        produce(plog, [(b"k", b"young%d" % i)], timestamp_ms=NOW)
        produce(plog, [(b"pad%d" % i, b"y" * 50)], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    plan = plan_cleaning(plog, NOW, 1 << 20)
    assert plan is not None
    assert all(s.largest_timestamp() <= NOW - 10_000 for s in plan.segments)
    await LogCleaner().clean(plog, now_ms=NOW)
    values = [(r.key, r.value) for r in read_all(plog)]
    # The old part is deduplicated on its own; the young part is untouched.
    assert values.count((b"k", b"9")) == 1
    assert [v for k, v in values if k == b"k"][1:] == [b"young%d" % i for i in range(10)]
    # Dirty ratio: a little new data over a big clean part does not trigger a pass.
    produce(plog, [(b"k", b"late")], timestamp_ms=NOW - 30_000)
    plog.roll()
    await plog.settle()
    clean_plan = plan_cleaning(plog, NOW + 10**6, 1 << 20)
    assert clean_plan is None or clean_plan.dirty_index < len(clean_plan.segments)


async def test_idempotent_producer_state_survives_compaction(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path)
    for seq in range(10):
        produce(plog, [(b"a", b"%d" % seq)], producer=(5, 0, seq), timestamp_ms=NOW)
    produce(plog, [(b"a", b"from someone else")], timestamp_ms=NOW)
    for i in range(20):
        produce(plog, [(b"pad%d" % i, b"x" * 30)], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    await LogCleaner().clean(plog, now_ms=NOW)
    stored = batches(plog)
    assert stored[0] == (9, 9, 0, CODEC_NONE)  # the producer's last batch, kept empty
    assert stored[1][0] == 10
    plog.close()
    for path in (tmp_path / "t-0").glob("*.snapshot"):
        path.unlink()  # rebuild producer state from the batches alone
    again = compacted_log(tmp_path)
    assert again.producers.producers[5].last_seq == 9
    assert produce(again, [(b"a", b"10")], producer=(5, 0, 10), timestamp_ms=NOW)[0] > 10


async def test_small_dedupe_buffer_cleans_in_several_passes(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path, segment_bytes=300, min_cleanable_dirty_ratio=0.0)
    for i in range(60):
        produce(plog, [(b"key-%d" % (i % 15), b"v%d" % i)], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    cleaner = LogCleaner(dedupe_buffer_size=1)  # one segment per pass
    passes = 0
    while await cleaner.clean(plog, now_ms=NOW) is not None:
        passes += 1
        assert passes < 100
    assert passes > 1
    records = read_all(plog)
    assert sorted(r.key or b"" for r in records) == sorted(b"key-%d" % i for i in range(15))
    assert all(r.value == b"v%d" % r.offset for r in records)


async def test_compact_delete_applies_both(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path, cleanup_policy=["compact", "delete"], retention_ms=1_000)
    for i in range(30):
        produce(plog, [(b"k%d" % (i % 3), b"v")], timestamp_ms=NOW - 10**6)
    for i in range(30):
        produce(plog, [(b"k%d" % (i % 3), b"w")], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    assert plog.apply_retention(NOW) > 0
    await LogCleaner().clean(plog, now_ms=NOW)
    assert sorted((r.key, r.value) for r in read_all(plog)) == [
        (b"k0", b"w"),
        (b"k1", b"w"),
        (b"k2", b"w"),
    ]


# --------------------------------------------------------------------------- concurrency


async def test_readers_of_replaced_segments_keep_working(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path, file_delete_delay_ms=60_000)
    for i in range(40):
        produce(plog, [(b"k%d" % (i % 4), b"v%d" % i)], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    held = plog.segments[0]
    old_bytes = held.read_at(0, held.size)
    old_records = read_all(plog)
    task = asyncio.create_task(LogCleaner().clean(plog, now_ms=NOW))
    await asyncio.sleep(0)  # the rewrite is running in its thread
    # Appends and reads go on meanwhile; reads see the old segments until the swap.
    produce(plog, [(b"during", b"clean")], timestamp_ms=NOW)
    assert read_all(plog)[: len(old_records)] == old_records
    await task
    assert held not in plog.segments
    assert held.read_at(0, held.size) == old_bytes  # the old descriptor still reads
    assert read_all(plog)[-1].key == b"during"
    plog.reap(float("inf"))
    with pytest.raises(OSError, match="closed"):
        held.read_at(0, 1)


async def test_delete_records_during_cleaning_waits_for_the_swap(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path, segment_bytes=400)
    for i in range(60):
        produce(plog, [(b"k%d" % (i % 7), b"v%d" % i)], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    task = asyncio.create_task(LogCleaner().clean(plog, now_ms=NOW))
    await asyncio.sleep(0)
    cut = 45
    assert plog.delete_records_before(cut) == cut
    assert plog.segments[0].base_offset < cut  # cleaning segments stay for now
    await task
    assert all(s.next_offset > cut for s in plog.segments)
    records = read_all(plog)
    assert records[0].offset >= cut
    assert {r.key for r in records} == {b"k%d" % (i % 7) for i in range(cut, 60)}


async def test_cancelled_pass_still_installs(tmp_path: Path) -> None:
    plog = compacted_log(tmp_path)
    for i in range(40):
        produce(plog, [(b"k%d" % (i % 2), b"v%d" % i)], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    task = asyncio.create_task(LogCleaner().clean(plog, now_ms=NOW))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r.offset for r in read_all(plog)] == [38, 39]
    assert not any(s.cleaning for s in plog.segments)


# --------------------------------------------------------------------------- crashes


def _crash_at(monkeypatch: pytest.MonkeyPatch, source_suffix: str, target_suffix: str) -> None:
    real = os.rename

    def rename(src: Any, dst: Any) -> None:
        if str(src).endswith(source_suffix) and str(dst).endswith(target_suffix):
            raise OSError("simulated crash")
        real(src, dst)

    monkeypatch.setattr(cleaner_module.os, "rename", rename)


async def _prepare(tmp_path: Path) -> tuple[PartitionLog, list[Record], list[Record]]:
    plog = compacted_log(tmp_path, segment_bytes=400)
    for i in range(50):
        produce(plog, [(b"k%d" % (i % 5), b"v%d" % i)], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    before = read_all(plog)
    cleanable_end = plog.active.base_offset
    triples = model([(r.offset, r.key or b"", r.value) for r in before], cleanable_end, False)
    expected = [r for r in before if (r.offset, r.key, r.value) in triples]
    return plog, before, expected


async def test_crash_before_the_swap_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog, before, _ = await _prepare(tmp_path)
    _crash_at(monkeypatch, ".cleaned", ".swap")
    assert await LogCleaner().clean(plog, now_ms=NOW) is None
    assert read_all(plog) == before  # the failed pass changed nothing in memory
    assert list((tmp_path / "t-0").glob("*.cleaned")) == []
    monkeypatch.undo()
    plog.close()
    assert read_all(compacted_log(tmp_path, segment_bytes=400)) == before


async def test_crash_after_the_swap_is_completed_on_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog, before, compacted = await _prepare(tmp_path)
    _crash_at(monkeypatch, ".swap", ".log")
    assert await LogCleaner().clean(plog, now_ms=NOW) is None
    (swap,) = (tmp_path / "t-0").glob("*.swap")
    swap_end = int(swap.name.split(".")[1])
    # The old files are gone already, but the log still serves them (open descriptors),
    # and retention must not touch segments whose swap is pending.
    assert read_all(plog) == before
    assert plog.segments[0].cleaning
    monkeypatch.undo()
    plog.close()
    again = compacted_log(tmp_path, segment_bytes=400)
    assert not list((tmp_path / "t-0").glob("*.swap"))
    # The first group (up to the swap's end offset) is compacted, the rest is as it was.
    expected = [r for r in before if r.offset >= swap_end or r in compacted]
    assert read_all(again) == expected
    assert expected != before
    for offset in range(again.log_start_offset, again.log_end_offset):
        data = again.read(offset, 1)
        header = next(iter_headers(data))
        assert header.last_offset >= offset
        assert decode_records(data)


async def test_failure_in_a_later_group_still_installs_the_committed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog, before, compacted = await _prepare(tmp_path)
    real = cleaner_module._clean_group
    calls = 0

    def flaky(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("disk trouble")
        return real(*args)

    monkeypatch.setattr(cleaner_module, "_clean_group", flaky)
    assert await LogCleaner().clean(plog, now_ms=NOW) is None
    assert not any(s.cleaning for s in plog.segments)
    assert plog.cleaner_backoff_until > 0
    assert plog.cleaner_offset == 0  # the pass did not finish: no progress recorded
    in_memory = read_all(plog)
    assert in_memory != before  # the first group is compacted
    # Memory matches disk: retention can delete through these segment objects safely.
    plog.close()
    assert read_all(compacted_log(tmp_path, segment_bytes=400)) == in_memory
    assert set(in_memory) >= set(compacted)


async def test_index_write_failure_after_the_swap_keeps_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog, _, compacted = await _prepare(tmp_path)

    def broken(self: Segment) -> None:
        raise OSError("no space for the index")

    monkeypatch.setattr(Segment, "write_index", broken)
    result = await LogCleaner().clean(plog, now_ms=NOW)
    monkeypatch.undo()
    assert result is not None
    assert result.groups
    assert read_all(plog) == compacted
    plog.close()
    assert read_all(compacted_log(tmp_path, segment_bytes=400)) == compacted
