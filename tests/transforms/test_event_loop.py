"""A guest never holds the event loop: while one loops until its budget stops it, a
concurrent asyncio task keeps making progress (no timing asserted, only progress)."""

from __future__ import annotations

import asyncio

import pytest

from tests.transforms.conftest import Start
from tests.transforms.data import records
from transforms.errors import FailureReason, TransformFailure
from transforms.limits import Limits
from transforms.records import InputBatch, InputRecord


async def test_event_loop_runs_while_a_guest_loops(start: Start) -> None:
    instance = start("go", "loop", limits=Limits(fuel_per_record=2_000_000_000))
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    with pytest.raises(TransformFailure) as info:
        await instance.aprocess(InputBatch.of([InputRecord(0, 1, None, b"spin")]))
    during = ticks
    stop.set()
    await task
    assert info.value.reason is FailureReason.BUDGET_EXHAUSTED
    assert during >= 5


async def test_instances_run_side_by_side(start: Start) -> None:
    go = start("go", "identity")
    c = start("c", "identity")
    batch = InputBatch.of(records(300))
    results = await asyncio.gather(*(i.aprocess(batch) for i in (go, c, go, c)))
    assert all(r.records() == results[0].records() for r in results)
    # the blocking call, from a worker thread, gives the same
    assert (await asyncio.to_thread(go.process, batch)).records() == results[0].records()
