"""A Go guest that allocates per record grows its memory without bound: Go's runtime on
wasip1 never schedules its background GC worker while Redpanda's SDK loops in host calls.
The engine says when an instance's memory is nearly full (``memory_nearly_full``), before it
would fail, and a fresh instance carries on with an empty heap — what the broker's runners
do between batches (dataplane/transforms/runner.py)."""

from __future__ import annotations

from tests.transforms.conftest import Start
from transforms import InputBatch, InputRecord, Limits, TransformFailure
from transforms.records import RECYCLE_FRACTION

MIB = 1024 * 1024
LIMITS = Limits(memory_max_bytes=24 * MIB, output_max_bytes=4 * MIB)
KEEP = b'{"level":"error","msg":"' + b"x" * 60 + b'"}'


def test_go_json_filter_is_recycled_before_it_runs_out_of_memory(start: Start) -> None:
    batch = InputBatch.of([InputRecord(i, 1, b"k", KEEP) for i in range(1000)])
    instance = start("go", "jsonfilter", limits=LIMITS)
    calls = 0
    while True:
        calls += 1
        assert calls < 2000, "the guest's memory never grew: the workaround may be obsolete"
        result = instance.process(batch)
        assert result.record_count == 1000
        if result.memory_nearly_full:
            break
    assert result.memory_bytes > LIMITS.memory_max_bytes * RECYCLE_FRACTION
    assert result.memory_limit == LIMITS.memory_max_bytes

    # left alone, the same instance runs out of memory soon after
    failed = None
    for _ in range(calls):
        try:
            instance.process(batch)
        except TransformFailure as exc:
            failed = exc
            break
    assert failed is not None, "kept running past the limit"
    assert "out of memory" in failed.guest_text

    fresh = start("go", "jsonfilter", limits=LIMITS)
    again = fresh.process(batch)
    assert again.record_count == 1000
    assert not again.memory_nearly_full
