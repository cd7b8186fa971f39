"""ProducerIdManager: ids from committed blocks, unique under concurrency, prefetched."""

from __future__ import annotations

import asyncio

import pytest

from dataplane.cluster.producer_ids import ProducerIdManager
from wire.errors import CoordinatorLoadInProgress, NotController


class Blocks:
    """Stands in for the controller: hands out consecutive blocks after a delay."""

    def __init__(self, size: int, delay: float = 0.001) -> None:
        self.size = size
        self.delay = delay
        self.next = 1000
        self.calls = 0
        self.fail: Exception | None = None

    async def __call__(self) -> tuple[int, int]:
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        start, self.next = self.next, self.next + self.size
        return start, self.size


async def test_concurrent_callers_get_distinct_ids() -> None:
    blocks = Blocks(size=10)
    # 100 blocks one after the other for 1000 waiting callers: generous on a loaded machine
    manager = ProducerIdManager(blocks, wait_s=120)
    ids = await asyncio.gather(*(manager.generate() for _ in range(1000)))
    assert len(set(ids)) == 1000
    assert set(ids) <= set(range(1000, blocks.next))
    await manager.stop()


async def test_next_block_is_fetched_before_the_current_runs_out() -> None:
    blocks = Blocks(size=100)
    manager = ProducerIdManager(blocks, wait_s=5)
    first = [await manager.generate() for _ in range(89)]
    assert first == list(range(1000, 1089))
    assert blocks.calls == 1
    await manager.generate()  # the 90th id: 10% left, the next block is asked for
    await asyncio.sleep(0.05)
    assert blocks.calls == 2
    rest = [await manager.generate() for _ in range(110)]
    assert rest == list(range(1090, 1200))
    await asyncio.sleep(0.05)
    assert blocks.calls == 3  # the third block was asked for at 90% of the second
    await manager.stop()


async def test_no_block_in_time_is_a_retriable_error_then_recovers() -> None:
    blocks = Blocks(size=5)
    blocks.fail = NotController("no controller is known yet")
    manager = ProducerIdManager(blocks, wait_s=0.2)
    with pytest.raises(CoordinatorLoadInProgress, match="no controller is known yet"):
        await manager.generate()
    blocks.fail = None
    assert await manager.generate() == 1000
    await manager.stop()
