"""Producer ids handed out by this broker from blocks the controller commits (KIP-730).

The active controller gives a broker a block of ``producer.id.block.size`` ids at a time,
committed to the metadata log before it is returned (``QuorumController.
allocate_producer_ids``). Blocks never overlap: the log holds the end of the last block
given out, which every later controller starts from. So ids stay unique across brokers,
restarts (a restarted broker asks for a new block; the rest of its old one is never used)
and controller failover, and InitProducerId needs no controller round trip for most ids.

As Kafka's RPCProducerIdManager, the next block is asked for in the background once 90% of
the current one is handed out; an InitProducerId that finds no id left waits for it up to
``producer.id.wait.ms`` and is then answered COORDINATOR_LOAD_IN_PROGRESS (retriable).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from wire.errors import BrokerError, CoordinatorLoadInProgress

log = logging.getLogger(__name__)

PREFETCH_FRACTION = 0.1
"""Ask for the next block when this fraction of the current one is left (Kafka's 90%)."""
RETRY_BACKOFF_S = 0.05

Allocate = Callable[[], Awaitable[tuple[int, int]]]


class ProducerIdManager:
    def __init__(self, allocate: Allocate, wait_s: float) -> None:
        self._allocate = allocate
        self._wait_s = wait_s
        self._next = 0
        self._end = 0
        """The current block: ids in [_next, _end) are still free."""
        self._threshold = 0
        """Once ``_next`` reaches it, the next block is fetched in the background."""
        self._spare: tuple[int, int] | None = None
        """A fetched block waiting for the current one to run out: (start, length)."""
        self._fetch: asyncio.Task[None] | None = None
        self._error: str | None = None

    async def generate(self) -> int:
        """A producer id no other producer of the cluster has had."""
        deadline = time.monotonic() + self._wait_s
        while True:
            if self._next >= self._end and self._spare is not None:
                self._install(*self._spare)
                self._spare = None
            if self._next < self._end:
                pid = self._next
                self._next += 1
                if self._next >= self._threshold and self._spare is None:
                    self._start_fetch()
                return pid
            fetch = self._start_fetch()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CoordinatorLoadInProgress(
                    "no block of producer ids from the controller yet"
                    + (f" ({self._error})" if self._error else "")
                    + "; retry"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(fetch), remaining)

    async def stop(self) -> None:
        if self._fetch is not None:
            self._fetch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._fetch
            self._fetch = None

    def _install(self, start: int, length: int) -> None:
        self._next, self._end = start, start + length
        self._threshold = self._end - max(1, int(length * PREFETCH_FRACTION))

    def _start_fetch(self) -> asyncio.Task[None]:
        if self._fetch is None or self._fetch.done():
            self._fetch = asyncio.get_running_loop().create_task(self._fetch_block())
        return self._fetch

    async def _fetch_block(self) -> None:
        deadline = time.monotonic() + self._wait_s
        while True:
            try:
                start, length = await self._allocate()
                break
            except (BrokerError, OSError, TimeoutError) as exc:
                self._error = str(exc)
                if time.monotonic() >= deadline:
                    log.warning("no block of producer ids from the controller: %s", exc)
                    return
                await asyncio.sleep(RETRY_BACKOFF_S)
        self._error = None
        if self._next >= self._end:
            self._install(start, length)
        else:
            self._spare = (start, length)
