"""Every way a guest fails gives its typed failure with the guest's own words, leaves that
instance FAILED (every later call raises the same failure) and the process healthy: a new
instance of the same module works."""

from __future__ import annotations

import pytest

from tests.transforms.conftest import Start
from tests.transforms.data import records
from transforms.errors import FailureReason, TransformFailure
from transforms.limits import MIB, Limits
from transforms.records import InputBatch, InputRecord
from transforms.runtime import Instance, InstanceState

SMALL_BUDGET = Limits(fuel_per_record=5_000_000, fuel_per_batch=1_000_000)


def one(value: bytes, offset: int = 0) -> InputBatch:
    return InputBatch.of([InputRecord(offset, 1_700_000_000_000, None, value)])


def fails(instance_process: object, batch: InputBatch) -> TransformFailure:
    assert callable(instance_process)
    with pytest.raises(TransformFailure) as info:
        instance_process(batch)
    return info.value


def check_unusable_then_recover(start: Start, family: str, name: str, failed: Instance) -> None:
    """The failed instance refuses further calls; a new instance of the module works."""
    assert failed.state is InstanceState.FAILED
    with pytest.raises(TransformFailure) as again:
        failed.process(one(b"x"))
    assert again.value is failed.failure
    fresh = start(family, name)
    if family == "wat":
        assert fresh.process(one(b"x")).records() == []
    else:
        assert fresh.process(one(b"fine")).record_count == 1


def test_go_panic(start: Start) -> None:
    instance = start("go", "panic")
    batch = InputBatch.of(
        [InputRecord(40 + i, 1, None, v) for i, v in enumerate([b"a", b"b", b"boom", b"c"])]
    )
    failure = fails(instance.process, batch)
    assert failure.reason is FailureReason.PANIC
    assert "boom at offset 42" in failure.guest_text
    assert failure.exit_code == 2
    assert "boom at offset 42" in str(failure)
    check_unusable_then_recover(start, "go", "panic", instance)


def test_go_endless_loop_is_stopped_by_the_budget(start: Start) -> None:
    instance = start("go", "loop", limits=SMALL_BUDGET)
    failure = fails(instance.process, one(b"spin", offset=7))
    assert failure.reason is FailureReason.BUDGET_EXHAUSTED
    assert "spinning on offset 7" in failure.guest_text
    assert "transforms.cpu.fuel" in failure.message
    assert any("spinning on offset 7" in line.text for line in failure.logs)
    check_unusable_then_recover(start, "go", "identity", instance)


def test_go_unbounded_allocation_is_stopped_by_the_memory_limit(start: Start) -> None:
    instance = start("go", "alloc", limits=Limits(memory_max_bytes=32 * MIB, output_max_bytes=MIB))
    failure = fails(instance.process, one(b"more", offset=3))
    assert failure.reason is FailureReason.MEMORY_LIMIT
    assert "hoarding from offset 3" in failure.guest_text
    assert "out of memory" in failure.guest_text
    assert "transforms.memory.max.bytes" in failure.message
    check_unusable_then_recover(start, "go", "identity", instance)


@pytest.mark.parametrize("family", ["go", "c", "as"])
def test_oversized_output(start: Start, family: str) -> None:
    instance = start(family, "identity", limits=Limits(output_max_bytes=10_000))
    batch = InputBatch.of([InputRecord(i, 1, b"k", b"v" * 100) for i in range(200)])
    failure = fails(instance.process, batch)
    assert failure.reason is FailureReason.OUTPUT_TOO_LARGE
    assert "transforms.output.max.bytes" in failure.message
    check_unusable_then_recover(start, family, "identity", instance)


def test_go_write_to_a_topic_it_was_not_given(start: Start) -> None:
    instance = start("go", "route", outputs=("out", "second"), env={"ROUTE_TO": "elsewhere"})
    failure = fails(instance.process, InputBatch.of(records(10)))
    assert failure.reason is FailureReason.UNKNOWN_TOPIC
    assert "'elsewhere'" in failure.message
    assert "errno: -3" in failure.guest_text  # the SDK saw Redpanda's INVALID_WRITE and panicked
    check_unusable_then_recover(start, "go", "identity", instance)


def test_redpanda_guest_that_ignores_the_refused_write_still_fails(start: Start) -> None:
    # rp_meta writes to topic "second" and carries on when it gets -3
    instance = start("wat", "rp_meta", outputs=("first",))
    failure = fails(instance.process, InputBatch.of(records(3)))
    assert failure.reason is FailureReason.UNKNOWN_TOPIC
    assert "'second'" in failure.message


WAT_CASES = [
    (b"t", FailureReason.TRAP, "unreachable"),
    (b"l", FailureReason.BUDGET_EXHAUSTED, "fuel"),
    (b"m", FailureReason.MEMORY_LIMIT, "transforms.memory.max.bytes"),
    (b"f", FailureReason.PANIC, "guest says no"),
    (b"u", FailureReason.UNKNOWN_TOPIC, "index 5"),
    (b"z", FailureReason.PANIC, "returned 0"),
    (b"g", FailureReason.INVALID_OUTPUT, "malformed"),
]


@pytest.mark.parametrize(("value", "reason", "words"), WAT_CASES, ids=[c[1] for c in WAT_CASES])
def test_batch_abi_failures(start: Start, value: bytes, reason: FailureReason, words: str) -> None:
    limits = Limits(
        fuel_per_record=5_000_000,
        fuel_per_batch=1_000_000,
        memory_max_bytes=16 * MIB,
        output_max_bytes=MIB,
    )
    instance = start("wat", "failures", limits=limits)
    failure = fails(instance.process, one(value))
    assert failure.reason is reason
    assert words in str(failure) + failure.detail
    check_unusable_then_recover(start, "wat", "failures", instance)


def test_batch_abi_logs(start: Start) -> None:
    result = start("wat", "failures").process(one(b"p"))
    assert [(line.stream.value, line.text) for line in result.logs] == [
        ("stdout", "first line"),
        ("stderr", "second line"),
    ]


def test_assemblyscript_abort_is_a_panic_with_its_message(start: Start) -> None:
    # an input buffer the guest cannot use: the SDK's own check aborts through sluice_batch.fail
    instance = start(
        "as", "identity", limits=Limits(memory_max_bytes=2 * MIB, output_max_bytes=256 * 1024)
    )
    failure = fails(instance.process, InputBatch.of([InputRecord(0, 1, None, b"v" * (3 * MIB))]))
    assert failure.reason in (FailureReason.MEMORY_LIMIT, FailureReason.PANIC)


def test_closed_instance_refuses_calls(start: Start) -> None:
    instance = start("c", "identity")
    instance.close()
    assert instance.state is InstanceState.CLOSED
    failure = fails(instance.process, one(b"x"))
    assert failure.reason is FailureReason.CLOSED
    instance.close()  # idempotent


def test_module_that_needs_more_memory_than_the_limit(start: Start) -> None:
    with pytest.raises(TransformFailure) as info:
        start("go", "identity", limits=Limits(memory_max_bytes=2 * MIB, output_max_bytes=64 * 1024))
    assert info.value.reason is FailureReason.MEMORY_LIMIT
    assert "transforms.memory.max.bytes" in str(info.value)


def test_startup_budget(start: Start) -> None:
    with pytest.raises(TransformFailure) as info:
        start("go", "identity", limits=Limits(fuel_startup=100_000))
    assert info.value.reason is FailureReason.STARTUP
    assert "CPU budget" in str(info.value)
