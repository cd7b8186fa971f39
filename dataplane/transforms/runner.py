"""One transform on one input partition, on that partition's leader.

The loop: read committed records (below the high watermark) from the local log, hand each
batch to the transform's instance (the ``transforms`` engine, on the instance's own
thread: the event loop never runs guest code), write the outputs of input partition P to
partition P modulo each output topic's partition count through the normal produce path
(``OutputProducer``: acks=all, idempotent), then commit the offset after the batches whose
outputs were acknowledged (``Progress``). So outputs are at least once: a crash, a
failover or a redeploy between the write and the commit repeats those batches' outputs.

States: STARTING (loading and compiling the module, instantiating, reading the committed
offset), RUNNING, FAILED (the guest trapped, panicked, exhausted its budget or memory, or
wrote what it may not: the error and the guest's own words are kept; nothing more runs
until a resume or a redeploy), and STOPPED. Failures of the broker's side (the module not
readable yet, the coordinator or an output's leader away) are retried with backoff, from
the committed offset with a new producer id. Guest log lines go to the logs topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dataplane import clock
from dataplane.cluster import records as r
from dataplane.cluster.image import MetadataImage
from dataplane.replication.partition import Partition
from dataplane.transforms.producer import OutputProducer
from transforms import InputBatch, InputRecord, TransformFailure, TransformResult
from wire.errors import BrokerError
from wire.record_batch import CONTROL_BIT, iter_headers

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0
"""A runner with nothing to read wakes at least this often (leadership, deletion)."""
BACKOFF_S = (0.1, 5.0)
MERGE_RECORDS = 500
"""Stored batches smaller than this are merged into one guest call (``chunks``)."""
STOP_GRACE_S = 2.0
"""How long a stop waits for the round in progress to commit before it cancels it."""
ERROR_TEXT_CHARS = 400
"""The guest's own words kept in a failed partition's error (all of them go to the logs)."""


class RunnerState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(slots=True)
class RunnerStatus:
    state: RunnerState = RunnerState.STARTING
    error: str = ""
    committed_offset: int = -1
    position: int = -1
    """The next input offset to process."""
    processed: int = 0
    outputs: int = 0
    fuel_used: int = 0
    retries: int = 0
    since: float = field(default_factory=clock.now)


class Instance(Protocol):
    """What the runner needs of an engine instance (``transforms.Instance``)."""

    async def aprocess(self, batch: InputBatch) -> TransformResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RunnerContext:
    """What runners share on one broker."""

    image: MetadataImage
    new_instance: Callable[[r.Transform, int], Awaitable[Instance]]
    """An instance of the transform's module for one input partition."""
    new_producer: Callable[[], OutputProducer]
    committed: Callable[[r.Transform, int], Awaitable[int]]
    commit: Callable[[r.Transform, int, int], Awaitable[None]]
    write_logs: Callable[[r.Transform, int, Sequence[tuple[str, str]]], Awaitable[None]]
    read_max_bytes: int
    start_from_latest: bool
    metered: Callable[[str, int, int], None] = lambda _name, _records, _ns: None
    """Usage metering: (transform, input records, guest nanoseconds) of each guest call."""


class Runner:
    def __init__(self, transform: r.Transform, partition: Partition, ctx: RunnerContext) -> None:
        self.transform = transform
        self.partition = partition
        self.ctx = ctx
        self.status = RunnerStatus()
        self._task: asyncio.Task[None] | None = None
        self._instance: Instance | None = None
        self._busy = False
        """A round is between its read and its commit."""
        self._stopping = False
        self.recycled = 0
        """Fresh instances started because the guest's memory was nearly full."""

    @property
    def key(self) -> tuple[str, int]:
        return self.transform.name, self.partition.index

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop after the round in progress, if any, has committed (up to STOP_GRACE_S), so
        a pause or a redeploy does not repeat outputs; then cancel."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True
            if self._busy:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), STOP_GRACE_S)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.status.state is not RunnerState.FAILED:
            self._set(RunnerState.STOPPED)

    def lag(self) -> int:
        """Input records not yet processed (committed offsets, as a consumer group's)."""
        start = self.status.committed_offset
        if start < 0:  # nothing committed: from where this runner started
            start = max(self.status.position, self.partition.plog.log_start_offset)
        # on a new leader whose high watermark is not known yet (KIP-207) the records of
        # the previous epoch are still to come: they count as lag, not as done
        end = max(self.partition.plog.high_watermark, self.partition.epoch_start_offset)
        return max(0, end - start)

    def _set(self, state: RunnerState, error: str = "") -> None:
        self.status.state = state
        self.status.error = error
        self.status.since = clock.now()

    async def _run(self) -> None:
        name, p = self.key
        delay = BACKOFF_S[0]
        while True:
            try:
                self._instance = await self.ctx.new_instance(self.transform, p)
                await self._loop()
                return
            except TransformFailure as failure:
                await self._failed(failure)
                return
            except asyncio.CancelledError:
                raise
            except (BrokerError, OSError, TimeoutError) as exc:
                self.status.retries += 1
                self._set(RunnerState.STARTING, f"retrying: {exc}")
                log.info(
                    "transform %s on partition %d: %s; retrying in %.1f s", name, p, exc, delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_S[1])
            finally:
                self._busy = False
                if self._instance is not None:
                    self._instance.close()
                    self._instance = None

    async def _loop(self) -> None:
        name, p = self.key
        plog = self.partition.plog
        committed = await self.ctx.committed(self.transform, p)
        self.status.committed_offset = committed  # -1: nothing committed yet
        if committed < 0:
            committed = plog.high_watermark if self.ctx.start_from_latest else plog.log_start_offset
        position = max(committed, plog.log_start_offset)
        self.status.position = position
        producer = self.ctx.new_producer()
        await producer.reset()
        self._set(RunnerState.RUNNING)
        log.info("transform %s running on partition %d from offset %d", name, p, position)
        while True:
            if position >= plog.high_watermark:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.partition.new_data_future(), IDLE_WAIT_S)
                continue
            data = plog.read(position, self.ctx.read_max_bytes, upper=plog.high_watermark)
            batches = [
                bytes(data[h.position : h.position + h.size])
                for h in iter_headers(data)
                if h.last_offset >= position
            ]
            if not batches:
                position = max(position + 1, plog.log_start_offset)  # a gap (compaction)
                continue
            self._busy = True
            for chunk in chunks(batches, position):
                position = await self._one(producer, chunk)
            await self.ctx.commit(self.transform, p, position)
            self.status.committed_offset = position
            self._busy = False
            if self._stopping:
                return

    async def _one(self, producer: OutputProducer, chunk: Chunk) -> int:
        """Process one chunk of stored batches as one guest call; the next position."""
        input_batch = chunk.batch
        if input_batch is None or self._instance is None:
            return chunk.next_position
        began = time.perf_counter_ns()
        result = await self._instance.aprocess(input_batch)
        self.ctx.metered(self.transform.name, chunk.records, time.perf_counter_ns() - began)
        if result.memory_nearly_full:
            # between batches a guest keeps nothing that matters (Redpanda restarts its VMs
            # too): a fresh instance for the next batch, with an empty heap
            self._instance.close()
            self._instance = None
            self._instance = await self.ctx.new_instance(self.transform, self.partition.index)
            self.recycled += 1
        _, p = self.key
        for out in result.outputs:
            info = self.ctx.image.topics.get(out.topic)
            if info is None:
                raise BrokerError(f"output topic {out.topic} does not exist")
            partition = p % info.partitions
            await producer.send_section(out.topic, partition, out.records, out.record_count)
            self.status.outputs += out.record_count
        if result.logs:
            await self.ctx.write_logs(
                self.transform, p, [(line.stream.value, line.text) for line in result.logs]
            )
        self.status.processed += chunk.records
        self.status.fuel_used += result.fuel_used
        self.status.position = chunk.next_position
        return chunk.next_position

    async def _failed(self, failure: TransformFailure) -> None:
        name, p = self.key
        error = f"{failure.reason.value}: {failure.message}"
        text = failure.guest_text.strip()
        if text:  # a panic's message comes first, its stack after
            error += f" ({text[:ERROR_TEXT_CHARS]}{'...' if len(text) > ERROR_TEXT_CHARS else ''})"
        self._set(RunnerState.FAILED, error)
        log.warning("transform %s on partition %d failed: %s", name, p, error)
        lines = [(line.stream.value, line.text) for line in failure.logs]
        lines.append(("stderr", f"transform failed: {error}"))
        try:
            await self.ctx.write_logs(self.transform, p, lines)
        except (BrokerError, OSError, TimeoutError) as exc:
            log.warning(
                "transform %s on partition %d: its log lines were not written: %s", name, p, exc
            )


@dataclass(frozen=True, slots=True)
class Chunk:
    """Input for one guest call: consecutive stored batches (their records at or after the
    position), or nothing to run (control batches, records already processed)."""

    batch: InputBatch | None
    records: int
    next_position: int


def chunks(batches: Sequence[bytes], position: int) -> list[Chunk]:
    """Group the stored batches of one read into guest calls. A large batch is one call as
    stored (its records section handed over as it is, decompressed); consecutive small ones
    (under MERGE_RECORDS records together, as a producer with linger.ms=0 writes them) are
    merged into one call, so each call, output write and commit carries many records."""
    out: list[Chunk] = []
    pending: list[InputRecord] = []
    epoch = 0

    def flush(next_position: int) -> None:
        if pending:
            merged = InputBatch.of(pending, leader_epoch=epoch)
            out.append(Chunk(merged, len(pending), next_position))
            pending.clear()

    for stored in batches:
        header = next(iter_headers(stored))
        after = header.last_offset + 1
        if not header.attributes & CONTROL_BIT:
            if header.base_offset >= position and header.record_count >= MERGE_RECORDS:
                flush(position)
                out.append(Chunk(InputBatch.from_kafka(stored), header.record_count, after))
            else:
                kept = [x for x in InputBatch.from_kafka(stored).decode() if x.offset >= position]
                if len(pending) + len(kept) > MERGE_RECORDS:
                    flush(position)
                pending.extend(kept)
                epoch = header.leader_epoch
        position = after
    flush(position)
    if not out or out[-1].next_position < position:
        out.append(Chunk(None, 0, position))  # control batches, records already processed
    return out
