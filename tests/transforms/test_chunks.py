"""How a runner groups the stored batches of one read into guest calls: large batches as
stored, consecutive small ones merged (a producer with linger.ms=0 writes one record per
batch), records before the position skipped, control batches passed over."""

from __future__ import annotations

from dataplane.transforms.runner import MERGE_RECORDS, chunks
from wire.compression import CODEC_GZIP
from wire.record_batch import encode_batch


def stored(base: int, count: int, **kw: object) -> bytes:
    values = [(b"k%d" % (base + i), b"v%d" % (base + i)) for i in range(count)]
    return encode_batch(values, base_offset=base, timestamp_ms=1000 + base, **kw)  # type: ignore[arg-type]


def offsets(chunk: object) -> list[int]:
    batch = chunk.batch  # type: ignore[attr-defined]
    return [] if batch is None else [r.offset for r in batch.decode()]


def test_small_batches_become_one_call() -> None:
    batches = [stored(i, 1) for i in range(10)]
    [chunk] = chunks(batches, 0)
    assert offsets(chunk) == list(range(10))
    assert chunk.records == 10
    assert chunk.next_position == 10
    assert [r.value for r in chunk.batch.decode()] == [b"v%d" % i for i in range(10)]
    assert [r.timestamp for r in chunk.batch.decode()] == [1000 + i for i in range(10)]


def test_large_batch_is_handed_over_as_stored_between_merged_ones() -> None:
    big = MERGE_RECORDS
    batches = [stored(0, 1), stored(1, 1), stored(2, big, codec=CODEC_GZIP), stored(2 + big, 1)]
    got = chunks(batches, 0)
    assert [offsets(c) for c in got] == [[0, 1], list(range(2, 2 + big)), [2 + big]]
    assert [c.next_position for c in got] == [2, 2 + big, 3 + big]
    assert [c.records for c in got] == [2, big, 1]


def test_merge_is_bounded() -> None:
    batches = [stored(i * 100, 100) for i in range(12)]
    got = chunks(batches, 0)
    assert all(c.records <= MERGE_RECORDS for c in got)
    assert [o for c in got for o in offsets(c)] == list(range(1200))
    assert got[-1].next_position == 1200


def test_records_before_the_position_are_skipped() -> None:
    got = chunks([stored(0, 10), stored(10, 5)], 7)
    assert [o for c in got for o in offsets(c)] == [7, 8, 9, 10, 11, 12, 13, 14]
    assert got[-1].next_position == 15


def test_nothing_left_still_advances() -> None:
    [chunk] = chunks([stored(0, 10)], 10)
    assert chunk.batch is None
    assert chunk.next_position == 10
