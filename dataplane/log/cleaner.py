"""The log cleaner: compaction of ``cleanup.policy=compact`` partitions, as Kafka does it.

Terms. The *cleanable* part of a log is its sealed, closed segments from the log start up
to (not including) the first segment that is too young (largest timestamp within
``min.compaction.lag.ms`` of now), the active segment, or anything at or above the last
stable offset (so no open transaction is ever cleaned). Below the *first dirty offset*
(the cleaner's checkpoint) every key has been deduplicated already; the *dirty ratio* is
dirty bytes / cleanable bytes. A partition is cleaned when its dirty ratio exceeds
``min.cleanable.dirty.ratio``, or when the latest tombstone delete horizon it recorded has
passed (so tombstones go even without new writes, KIP-534).

One pass:

1. On the loop: plan (which segments), mark them ``cleaning`` (retention and DeleteRecords
   leave them alone meanwhile) and duplicate their descriptors.
2. In the cleaner's own thread: build a key -> latest offset map from the dirty
   segments (as many as ``log.cleaner.dedupe.buffer.size`` allows, at least one), then
   rewrite the cleanable segments up to the map's end in groups whose total size fits
   ``segment.bytes``. A record survives when it has a key, no later record in the map has
   the same key, and it is not a tombstone whose batch's delete horizon has passed. Batches
   keep their base offset, last offset delta, producer id / epoch / base sequence, leader
   epoch, attributes and codec (compressed batches are decompressed to look inside and
   recompressed with the same codec); a batch with nothing removed is copied byte for byte.
   A batch that keeps tombstones and has no delete horizon gets one (now +
   ``delete.retention.ms``) in its base timestamp. A batch left empty is dropped, except
   the last batch of a live idempotent producer, which stays as an empty batch so the
   producer's sequence state survives a restart. Control batches are kept. Transactions
   (Kafka's ``CleanedTransactionMetadata``): the transactional data batches of aborted
   transactions (known from the transaction indexes) are dropped, and never enter the key
   map; committed transactional records are compacted like any others; markers and
   transaction index entries stay (the group's entries are merged into the output's
   ``B.txnindex``, written before the swap is committed).
3. Still in the thread, each group is committed crash-safely: the output ``B.cleaned`` is
   fsynced and renamed to ``B.E.swap`` (E: the group's end offset) and the directory
   fsynced -- from here a crash completes the swap on the next load -- then the old
   segments' files are removed, the swap is renamed to ``B.log``, the directory fsynced
   and the new index written. A crash before the ``.swap`` rename leaves the old segments
   untouched (``.cleaned`` files are deleted on load).
4. On the loop: swap the segment objects in one synchronous step (readers see the old list
   or the new one, never a mix); the old segments' descriptors stay open for
   ``file.delete.delay.ms`` so an in-flight read of an old segment still works.

Records keep their offsets; consumers see gaps, as with Kafka. Records without a key are
removed (a compacted topic refuses them on produce anyway).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dataplane import clock
from dataplane.durable import fsync_dir, write_atomically
from dataplane.log.segment import (
    MAX_RELATIVE_OFFSET,
    SCAN_CHUNK,
    Segment,
    background_executor,
    segment_name,
)
from dataplane.log.transactions import AbortedBatches, collect_aborted
from wire.errors import CorruptRecord
from wire.record_batch import (
    DELETE_HORIZON_BIT,
    HEADER,
    HEADER_SIZE,
    BatchHeader,
    decode_records,
    encode_batch,
    encode_empty_batch,
    parse_header,
)
from wire.transactions import AbortedTxn, encode_txn_index

if TYPE_CHECKING:
    from dataplane.log.manager import LogManager
    from dataplane.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

MAP_ENTRY_OVERHEAD = 100
"""Approximate bytes of a key-map entry besides the key (dict slot, int, bytes object)."""
WRITE_CHUNK = 1 << 20
ERROR_BACKOFF_S = 600.0


@dataclass
class CleanPlan:
    plog: PartitionLog
    segments: list[Segment]
    """The cleanable segments, oldest first."""
    dirty_index: int
    """Index in ``segments`` of the first segment holding dirty offsets."""
    first_dirty: int
    now_ms: int
    delete_retention_ms: int
    producer_last: dict[int, int]
    segment_bytes: int
    index_interval: int
    map_budget: int
    aborted: list[AbortedTxn] = field(default_factory=list)
    """Aborted transactions overlapping the cleanable segments."""
    fds: dict[int, int] = field(default_factory=dict)
    """id(segment) -> a duplicated descriptor the thread reads through."""


@dataclass
class CleanedGroup:
    old: list[Segment]
    new: Segment


@dataclass
class CleanResult:
    groups: list[CleanedGroup]
    """Groups committed on disk, in order; they must be installed even after an error."""
    first_dirty: int
    latest_delete_horizon: int
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0
    error: Exception | None = None
    """Why the pass stopped early (later groups untouched), or None."""
    stuck: list[Segment] = field(default_factory=list)
    """Segments of a group whose swap is pending until the next load (SwapIncomplete)."""


def plan_cleaning(plog: PartitionLog, now_ms: int, map_budget: int) -> CleanPlan | None:
    """Decide whether and what to clean (on the loop). None when nothing is due."""
    config = plog.config
    if plog.closed or "compact" not in config.get_list("cleanup.policy"):
        return None
    stable = plog.last_stable_offset
    start = plog.log_start_offset
    candidates: list[Segment] = []
    for segment in plog.segments[:-1]:
        if (
            not segment.sealed
            or segment.deleted
            or segment.cleaning
            or segment.fd < 0
            or segment.next_offset > stable
        ):
            break
        if segment.next_offset <= start:
            continue  # wholly below the log start: retention deletes it
        candidates.append(segment)
    lag = config.get_int("min.compaction.lag.ms")
    cleanable = candidates
    if lag > 0:
        for i, segment in enumerate(candidates):
            if segment.largest_timestamp() > now_ms - lag:
                cleanable = candidates[:i]
                break
    if not cleanable:
        return None
    checkpoint = plog.cleaner_offset
    if checkpoint > plog.log_end_offset:
        checkpoint = 0  # the log was truncated below it
    first_dirty = max(checkpoint, start)
    dirty_index = next(
        (i for i, s in enumerate(cleanable) if s.next_offset > first_dirty), len(cleanable)
    )
    clean_bytes = sum(s.size for s in cleanable[:dirty_index])
    dirty_bytes = sum(s.size for s in cleanable[dirty_index:])
    total = clean_bytes + dirty_bytes
    ratio = dirty_bytes / total if total else 0.0
    horizon_due = 0 <= plog.latest_delete_horizon <= now_ms
    min_ratio = config.get_float("min.cleanable.dirty.ratio")
    if not ((dirty_bytes > 0 and ratio > min_ratio) or horizon_due):
        return None
    return CleanPlan(
        plog=plog,
        segments=list(cleanable),
        dirty_index=dirty_index,
        first_dirty=first_dirty,
        now_ms=now_ms,
        delete_retention_ms=config.get_int("delete.retention.ms"),
        producer_last=plog.producers.last_batch_offsets(),
        segment_bytes=config.get_int("segment.bytes"),
        index_interval=config.get_int("index.interval.bytes"),
        map_budget=map_budget,
        aborted=collect_aborted(plog.segments, cleanable[0].base_offset, cleanable[-1].next_offset),
    )


# --------------------------------------------------------------------------- thread side


def _batches(fd: int, size: int) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, whole batch bytes) of every batch of a sealed segment, via ``fd``."""
    position = 0
    buf = b""
    buf_start = 0
    while position + HEADER_SIZE <= size:
        rel = position - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf = os.pread(fd, SCAN_CHUNK, position)
            buf_start = position
            rel = 0
        header = parse_header(buf, rel)
        if header.batch_length < HEADER_SIZE - 12 or position + header.size > size:
            raise CorruptRecord(f"bad batch at position {position} of a sealed segment")
        if rel + header.size > len(buf):
            buf = os.pread(fd, max(SCAN_CHUNK, header.size), position)
            buf_start = position
            rel = 0
        raw = buf[rel : rel + header.size]
        yield parse_header(raw, 0), raw
        position += header.size


def build_offset_map(plan: CleanPlan) -> tuple[dict[bytes, int], int, int]:
    """Key -> latest offset over the dirty segments that fit the budget.

    Returns (map, number of dirty segments covered, end offset of the covered range).
    """
    offsets: dict[bytes, int] = {}
    used = 0
    covered = 0
    end = plan.first_dirty
    aborted = AbortedBatches(plan.aborted)
    for segment in plan.segments[plan.dirty_index :]:
        if covered and used > plan.map_budget:
            break
        fd = plan.fds[id(segment)]
        for header, raw in _batches(fd, segment.size):
            if aborted.is_aborted(header) or header.is_control or header.record_count == 0:
                continue
            for record in decode_records(raw):
                key = record.key
                if key is None or record.offset < plan.first_dirty:
                    continue
                if key not in offsets:
                    used += len(key) + MAP_ENTRY_OVERHEAD
                offsets[key] = record.offset
        covered += 1
        end = segment.next_offset
    return offsets, covered, end


def filter_batch(
    raw: bytes,
    header: BatchHeader,
    *,
    offsets: dict[bytes, int],
    now_ms: int,
    delete_retention_ms: int,
    producer_last: dict[int, int],
    aborted: bool = False,
) -> tuple[bytes | None, int, int]:
    """What of one batch survives: (bytes or None, delete horizon kept or -1, records removed).

    Returns ``raw`` itself when nothing changes. ``aborted``: a transactional batch of an
    aborted transaction, whose records all go.
    """
    if header.is_control:
        return raw, -1, 0
    if aborted:
        return _aborted_batch(raw, header, producer_last), -1, header.record_count
    records = decode_records(raw)
    horizon = header.delete_horizon
    expired = 0 <= horizon <= now_ms
    kept = [
        r
        for r in records
        if r.key is not None
        and offsets.get(r.key, -1) <= r.offset
        and not (r.value is None and expired)
    ]
    removed = len(records) - len(kept)
    tombstones = any(r.value is None for r in kept)
    if not tombstones:
        horizon = -1
    elif horizon < 0:
        horizon = now_ms + delete_retention_ms
    if not removed and horizon == header.delete_horizon:
        return raw, horizon, 0
    if not kept:
        if header.producer_id >= 0 and producer_last.get(header.producer_id) == header.last_offset:
            return encode_empty_batch(header), -1, removed
        return None, -1, removed
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if horizon >= 0:
        attributes |= DELETE_HORIZON_BIT
    rewritten = encode_batch(
        kept,
        base_offset=header.base_offset,
        codec=header.codec,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        attributes=attributes,
        leader_epoch=header.leader_epoch,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=horizon if horizon >= 0 else None,
        max_timestamp=header.max_timestamp if header.log_append_time else None,
    )
    return rewritten, horizon, removed


def _aborted_batch(raw: bytes, header: BatchHeader, producer_last: dict[int, int]) -> bytes | None:
    """What stays of a batch of an aborted transaction: nothing, or an empty batch when it
    is its producer's last (its sequence state must survive)."""
    if header.producer_id >= 0 and producer_last.get(header.producer_id) == header.last_offset:
        return encode_empty_batch(header) if header.record_count else raw
    return None


def group_segments(segments: list[Segment], max_bytes: int) -> list[list[Segment]]:
    """Consecutive runs whose total size fits ``max_bytes`` (each at least one segment)."""
    groups: list[list[Segment]] = []
    current: list[Segment] = []
    size = 0
    for segment in segments:
        if current and (
            size + segment.size > max_bytes
            or segment.next_offset - 1 - current[0].base_offset > MAX_RELATIVE_OFFSET
        ):
            groups.append(current)
            current, size = [], 0
        current.append(segment)
        size += segment.size
    if current:
        groups.append(current)
    return groups


def _clean_group(
    plan: CleanPlan,
    group: list[Segment],
    offsets: dict[bytes, int],
    result: CleanResult,
    aborted: AbortedBatches,
) -> tuple[Segment | None, int]:
    """Rewrite one group into a new segment and commit it on disk (None: unchanged)."""
    directory = plan.plog.directory
    base = group[0].base_offset
    cleaned = directory / segment_name(base, ".cleaned")
    cleaned.unlink(missing_ok=True)
    out = Segment(directory, base, plan.index_interval, path=cleaned)
    changed = len(group) > 1
    latest_horizon = -1
    try:
        buf = bytearray()
        headers: list[BatchHeader] = []
        for segment in group:
            result.bytes_before += segment.size
            for header, raw in _batches(plan.fds[id(segment)], segment.size):
                kept, horizon, removed = filter_batch(
                    raw,
                    header,
                    offsets=offsets,
                    now_ms=plan.now_ms,
                    delete_retention_ms=plan.delete_retention_ms,
                    producer_last=plan.producer_last,
                    aborted=aborted.is_aborted(header),
                )
                latest_horizon = max(latest_horizon, horizon)
                result.records_removed += removed
                if kept is not raw:
                    changed = True
                if kept is None:
                    continue
                headers.append(BatchHeader(len(buf), *HEADER.unpack_from(kept, 0)))
                buf += kept
                if len(buf) >= WRITE_CHUNK:
                    out.append_pieces([buf], len(buf), headers)
                    buf, headers = bytearray(), []
        if not changed:
            out.delete()
            result.bytes_after += sum(s.size for s in group)
            return None, latest_horizon
        if buf:
            out.append_pieces([buf], len(buf), headers)
        out.next_offset = group[-1].next_offset
        out.closed = True
        # closed segments' entries no longer change (markers go to the active segment)
        out.aborted = [e for segment in group for e in segment.aborted]
    except BaseException:
        out.delete()  # nothing was committed: the old segments are untouched
        raise
    try:
        _commit(out, group, directory)
    except SwapIncomplete:
        out.close()  # the .swap file is the data now: never delete it
        raise
    except BaseException:
        out.delete()  # failed before the .swap rename
        raise
    result.bytes_after += out.size
    return out, latest_horizon


class SwapIncomplete(OSError):
    """The .swap file is durable but the swap did not finish; the next load completes it.

    The group's segments stay marked ``cleaning`` so retention leaves them alone until
    then (their files may already be gone; their open descriptors still read).
    """


def _commit(out: Segment, group: list[Segment], path: Path) -> None:
    """Replace ``group`` on disk by ``out``; crash-safe from the .swap rename on."""
    os.fsync(out.fd)
    first = group[0].base_offset
    if out.aborted and len(group) > 1:
        # before the swap exists: if it never does, the old first segment loads this
        # superset and drops the entries outside its offsets
        write_atomically(out.txn_index_path, encode_txn_index(out.aborted))
    swap = path / f"{first:020d}.{group[-1].next_offset:020d}.swap"
    os.rename(out.path, swap)
    out.path = swap
    try:
        fsync_dir(path)
        for segment in group:
            segment.drop_index_file()
        for segment in group[1:]:
            segment.path.unlink(missing_ok=True)
            segment.txn_index_path.unlink(missing_ok=True)
        final = path / segment_name(first, ".log")
        os.rename(swap, final)
        out.path = final
        fsync_dir(path)
    except OSError as exc:
        raise SwapIncomplete(f"compaction swap at {first} interrupted: {exc}") from exc
    try:
        out.write_index()
    except OSError as exc:
        # The data is in place; without an index the segment is rescanned on the next
        # load (and, unsealed, not cleaned again before that).
        log.warning("%s: cannot write index of cleaned segment %d: %s", path, first, exc)
    else:
        out.sealed = True


def execute(plan: CleanPlan) -> CleanResult:
    """The thread side of one pass: map, rewrite, commit. Closes the plan's descriptors."""
    try:
        offsets, covered, map_end = build_offset_map(plan)
        # Nothing dirty (a pass for expired tombstones): every cleanable segment.
        to_clean = plan.segments[: plan.dirty_index + covered] if covered else plan.segments
        result = CleanResult([], max(plan.first_dirty, map_end), -1)
        aborted = AbortedBatches(plan.aborted)
        try:
            for group in group_segments(to_clean, plan.segment_bytes):
                new, horizon = _clean_group(plan, group, offsets, result, aborted)
                result.latest_delete_horizon = max(result.latest_delete_horizon, horizon)
                if new is not None:
                    result.groups.append(CleanedGroup(group, new))
        except SwapIncomplete as exc:
            result.error = exc
            result.stuck = group
        except Exception as exc:
            result.error = exc
        if result.error is None:
            plan.plog.write_cleaner_checkpoint(result.first_dirty, result.latest_delete_horizon)
        return result
    finally:
        for fd in plan.fds.values():
            os.close(fd)


# --------------------------------------------------------------------------- loop side


class LogCleaner:
    """Runs cleaning passes; one partition at a time, the rewrite off the event loop."""

    def __init__(self, *, dedupe_buffer_size: int = 128 * 1024 * 1024) -> None:
        self.dedupe_buffer_size = dedupe_buffer_size

    async def clean_all(self, manager: LogManager) -> int:
        """One pass over every partition that needs it; returns partitions cleaned."""
        cleaned = 0
        for plog in list(manager.logs.values()):
            if await self.clean(plog) is not None:
                cleaned += 1
        return cleaned

    async def clean(self, plog: PartitionLog, now_ms: int | None = None) -> CleanResult | None:
        """Clean ``plog`` if due; returns what was done, None when nothing was due.

        The rewrite runs in a thread; its result is installed on the loop by a callback
        when the thread finishes, so cancelling this coroutine (shutdown) never leaves the
        segment list out of step with the disk. Cancelling waits for the thread.
        """
        if plog.closed or time.monotonic() < plog.cleaner_backoff_until:
            return None
        now = clock.now_ms() if now_ms is None else now_ms
        plan = plan_cleaning(plog, now, self.dedupe_buffer_size)
        if plan is None:
            return None
        for segment in plan.segments:
            segment.cleaning = True
        loop = asyncio.get_running_loop()
        plan.fds = {id(s): os.dup(s.fd) for s in plan.segments}
        done: asyncio.Future[CleanResult | None] = loop.create_future()

        def finish(future: asyncio.Future[CleanResult]) -> None:
            result: CleanResult | None = None
            try:
                result = future.result()
                install(plog, result)  # what was committed, even if the pass then failed
            except Exception as exc:
                result = None
                _failed(plog, exc, stuck=False)
            else:
                if result.error is not None:
                    _failed(plog, result.error, stuck=bool(result.stuck))
                    stuck = {id(s) for s in result.stuck}
                    plan.segments[:] = [s for s in plan.segments if id(s) not in stuck]
                    result = None
            finally:
                _unmark(plan.segments)
                if not plog.closed:
                    plog.delete_segments_below_start()  # deletions deferred by the marks
            if not done.done():
                done.set_result(result)

        executor = background_executor("cleaner", 1)
        loop.run_in_executor(executor, execute, plan).add_done_callback(finish)
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            await done
            raise


def _failed(plog: PartitionLog, exc: BaseException, *, stuck: bool) -> None:
    if stuck:
        log.error(
            "cleaning %s: %s; the swap completes on the next start, until then the log is "
            "not cleaned and those segments are kept",
            plog.name,
            exc,
        )
        plog.cleaner_backoff_until = float("inf")
        return
    log.error(
        "cleaning %s failed; retrying in %.0fs: %s",
        plog.name,
        ERROR_BACKOFF_S,
        exc,
        exc_info=exc,
    )
    plog.cleaner_backoff_until = time.monotonic() + ERROR_BACKOFF_S


def _unmark(segments: list[Segment]) -> None:
    for segment in segments:
        segment.cleaning = False


def install(plog: PartitionLog, result: CleanResult) -> None:
    """Swap the cleaned segments in (on the loop) and record the cleaner's progress."""
    if plog.closed:
        for group in result.groups:
            group.new.close()
        return
    for group in result.groups:
        if not plog.replace_segments(group.old, group.new):
            log.error(
                "%s: segments %d.. changed during cleaning; the cleaned copy is on disk "
                "and is loaded on the next start",
                plog.name,
                group.old[0].base_offset,
            )
            group.new.close()
    if result.error is None:
        plog.cleaner_offset = result.first_dirty
        plog.latest_delete_horizon = result.latest_delete_horizon
    if result.groups:
        log.info(
            "%s: compacted %d group(s), %d -> %d bytes, %d record(s) removed",
            plog.name,
            len(result.groups),
            result.bytes_before,
            result.bytes_after,
            result.records_removed,
        )
