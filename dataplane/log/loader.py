"""Recovery of a partition log from its directory (Kafka's ``LogLoader``).

:meth:`LogLoader.load` turns a partition directory into the state a :class:`PartitionLog`
starts from (:class:`LoadedLog`), in this order:

1. Leftovers are cleared: ``*.tmp`` and ``*.cleaned`` files are deleted; a ``B.E.swap``
   (the cleaner's durable output) completes its swap: segments in ``[B, E)`` are deleted
   and the swap becomes ``B.log`` (the cleaner wrote the group's merged ``B.txnindex``
   before the swap existed; the other segments' are deleted). Index and transaction index
   files without their ``.log`` are deleted.
2. Each closed segment uses its ``.index`` if valid, otherwise it is scanned (CRC of every
   batch) and re-sealed; a closed segment with a torn tail is truncated and every later
   segment deleted (offsets stay dense). A segment overlapping the one before it is moved
   aside (``.overlap``). The active segment is scanned unless the broker stopped cleanly;
   its index file is removed before anything is appended.
3. The log start offset: the larger of the first segment's base offset and the
   ``log-start-offset`` checkpoint, at most the log end.
4. The high watermark: min(``high-watermark`` file, log end), at least the log start
   (the log end without a file).
5. Transaction indexes are read (``transactions.load_txn_indexes``); producer state: the
   newest valid snapshot at or below the log end (later ones are deleted) -- at or below
   the first torn ``.txnindex`` if there is one -- then the batches after it are replayed
   (markers decoded: open transactions, coordinator epochs, ABORT entries), and the
   transaction indexes from the replay's start are rebuilt from it; idle clocks restart.
6. The cleaner checkpoint, then the leader-epoch cache (cut to the log, or rebuilt from
   batch headers when missing, malformed or lagging the log).

The file names of a partition directory that more than one piece reads or writes are
defined here; :func:`load_producer_state` and :func:`snapshot_files` also serve
truncation (producer state is rebuilt the same way) and snapshot pruning. Imports only
the segment, producer-state, transactions and leader-epoch modules of this package.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path

from dataplane import clock
from dataplane.durable import fsync_dir
from dataplane.log.leader_epochs import CHECKPOINT_FILE as EPOCH_CHECKPOINT_FILE
from dataplane.log.leader_epochs import LeaderEpochCache
from dataplane.log.producer_state import ProducerStateTable
from dataplane.log.segment import (
    LOOKUP_CHUNK,
    TXN_INDEX_SUFFIX,
    Segment,
    parse_base,
    segment_name,
)
from dataplane.log.transactions import (
    apply_marker,
    load_txn_indexes,
    read_marker,
    rebuild_txn_indexes,
)
from wire.record_batch import CONTROL_BIT, BatchHeader
from wire.transactions import AbortedTxn

log = logging.getLogger(__name__)

LOG_START_FILE = "log-start-offset"
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
HIGH_WATERMARK_FILE = "high-watermark"
SNAPSHOT_SUFFIX = ".snapshot"


@dataclass(slots=True)
class LoadedLog:
    """What a partition directory holds once recovered."""

    segments: list[Segment]
    """Oldest first; the last is the active segment (open for appends)."""
    log_start_offset: int
    producers: ProducerStateTable
    epochs: LeaderEpochCache
    cleaner_offset: int
    latest_delete_horizon: int
    high_watermark: int
    hw_checkpointed: int
    """The value in the ``high-watermark`` file, -1 without one."""


@dataclass(frozen=True, slots=True)
class Replay:
    """What :func:`load_producer_state` replayed."""

    start: int
    """First offset replayed (the snapshot's offset, or the first segment's base)."""
    aborted: list[tuple[Segment, AbortedTxn]]
    """Transaction index entries of the ABORT markers replayed, with their segment."""


class LogLoader:
    def __init__(
        self, directory: Path, name: str, index_interval: int, max_producer_entries: int
    ) -> None:
        self.directory = directory
        self.name = name
        self.index_interval = index_interval
        self.max_producer_entries = max_producer_entries

    def load(self) -> LoadedLog:
        directory = self.directory
        for path in directory.iterdir():
            if path.name.endswith((".tmp", ".cleaned")):
                path.unlink()
        self._complete_swaps()
        names = [p.name for p in directory.iterdir()]
        bases = sorted(b for b in (parse_base(n, ".log") for n in names) if b is not None)
        present = set(bases)
        for name in names:
            base = parse_base(name, ".index")
            if base is None:
                base = parse_base(name, TXN_INDEX_SUFFIX)
            if base is not None and base not in present:
                (directory / name).unlink()
        interval = self.index_interval
        stored_start = read_int(directory / LOG_START_FILE, 0)
        segments: list[Segment] = []
        for i, base in enumerate(bases):
            segment = Segment(directory, base, interval)
            if segments and base < segments[-1].next_offset:
                log.error(
                    "%s overlaps the segment before it (which ends at %d); moving it aside",
                    segment.path,
                    segments[-1].next_offset,
                )
                segment.close()
                segment.path.rename(segment.path.with_name(segment.path.name + ".overlap"))
                segment.drop_index_file()
                continue
            last = i == len(bases) - 1
            if not segment.load_index():
                truncated = segment.recover()
                if truncated and not last:
                    segments.append(segment)
                    self._drop_after_torn_segment(segment, bases[i + 1 :])
                    break
                if not last:
                    segment.closed = True
                    segment.seal()
            elif not last:
                segment.closed = segment.sealed = True
            segments.append(segment)
        if not segments:
            segments.append(Segment(directory, stored_start, interval))
        active = segments[-1]
        active.closed = active.sealed = False
        # The index of a cleanly closed active segment spared us the scan; remove it before
        # anything is appended so a later crash cannot pair it with a longer file.
        active.drop_index_file()
        log_end = active.next_offset
        log_start = min(max(segments[0].base_offset, stored_start), log_end)
        stored_hw = read_int(directory / HIGH_WATERMARK_FILE, -1)
        hw = max(log_end if stored_hw < 0 else min(stored_hw, log_end), log_start)
        stale, damaged = load_txn_indexes(segments)
        producers = ProducerStateTable(self.max_producer_entries)
        replay = load_producer_state(
            directory, segments, producers, high_watermark=hw, at_or_below=damaged
        )
        rebuild_txn_indexes(segments, replay.start, replay.aborted, stale)
        cleaner_offset, horizon = load_cleaner_checkpoint(directory)
        epochs = self._load_epoch_cache(segments, log_start)
        return LoadedLog(
            segments=segments,
            log_start_offset=log_start,
            producers=producers,
            epochs=epochs,
            cleaner_offset=cleaner_offset,
            latest_delete_horizon=horizon,
            high_watermark=hw,
            hw_checkpointed=stored_hw,
        )

    def _complete_swaps(self) -> None:
        """Finish a log cleaner swap interrupted by a crash (``B.E.swap`` is durable)."""
        directory = self.directory
        for swap in sorted(directory.glob("*.swap")):
            parts = swap.name.split(".")
            if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
                swap.unlink()
                continue
            first, end = int(parts[0]), int(parts[1])
            for path in directory.glob("*.log"):
                base = parse_base(path.name, ".log")
                if base is not None and first <= base < end:
                    path.unlink()
                    suffixes = (".index",) if base == first else (".index", TXN_INDEX_SUFFIX)
                    for suffix in suffixes:  # the first's .txnindex is the merged one
                        with contextlib.suppress(FileNotFoundError):
                            (directory / segment_name(base, suffix)).unlink()
            os.rename(swap, directory / segment_name(first, ".log"))
            fsync_dir(directory)
            log.info("%s: completed an interrupted compaction swap at %d", self.name, first)

    def _drop_after_torn_segment(self, torn: Segment, later: list[int]) -> None:
        if not later:
            return
        log.warning(
            "%s: segment %d had a torn tail; deleting %d later segment(s) so offsets stay dense",
            self.name,
            torn.base_offset,
            len(later),
        )
        for base in later:
            for suffix in (".log", ".index", TXN_INDEX_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / segment_name(base, suffix)).unlink()
        fsync_dir(self.directory)

    def _load_epoch_cache(self, segments: list[Segment], log_start: int) -> LeaderEpochCache:
        """The checkpoint, cut to the log; rebuilt from batch headers when it is missing,
        malformed or lacks the epoch of the last batch (written before this file existed,
        or a crash between the two writes of a truncation)."""
        path = self.directory / EPOCH_CHECKPOINT_FILE
        cache = LeaderEpochCache.load(path)
        has_data = any(s.size for s in segments)
        if cache is not None and has_data:
            last = _last_batch_header(segments)
            if last is not None and last.leader_epoch > cache.latest_epoch:
                log.warning("%s: leader-epoch checkpoint lags the log; rebuilding it", self.name)
                cache = None
        if cache is None:
            cache = LeaderEpochCache(path)
            if has_data:
                _rebuild_epochs(segments, cache)
                cache.flush()
        else:
            cache.truncate_from_end(segments[-1].next_offset)
        cache.truncate_from_start(log_start)
        return cache


def load_producer_state(
    directory: Path,
    segments: list[Segment],
    producers: ProducerStateTable,
    *,
    high_watermark: int,
    at_or_below: int | None = None,
) -> Replay:
    """Fill an empty ``producers`` from the newest valid snapshot at or below the log end
    (snapshots above it are deleted) and ``at_or_below``, then replay the batches after it
    (transactions completed at or above ``high_watermark`` stay unreplicated)."""
    leo = segments[-1].next_offset
    limit = leo if at_or_below is None else min(leo, at_or_below)
    start: int | None = None
    for offset, path in reversed(snapshot_files(directory)):
        if offset > leo:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        if start is None and offset <= limit:
            try:
                raw = path.read_bytes()
            except OSError:
                continue
            if producers.load_snapshot(raw):
                start = offset
    if start is None:
        start = segments[0].base_offset
    aborted = _replay_producers(segments, producers, start, high_watermark)
    producers.touch_all(clock.now_ms())
    return Replay(start, aborted)


def _replay_producers(
    segments: list[Segment], producers: ProducerStateTable, start: int, high_watermark: int
) -> list[tuple[Segment, AbortedTxn]]:
    aborted: list[tuple[Segment, AbortedTxn]] = []
    for segment in segments:
        if segment.next_offset <= start:
            continue
        position = 0
        if segment.base_offset < start:
            found = segment.position_for(start)
            if found is None:
                continue
            position = found[0]
        for at, header in segment.iter_batches(position):
            if header.base_offset < start:
                continue
            if not header.attributes & CONTROL_BIT:
                producers.record(header)
                continue
            raw = segment.read_at(at, header.size)
            marker = read_marker(raw, replace(header, position=0), str(segment.path))
            if marker is not None:
                entry = apply_marker(
                    producers, header, marker, header.max_timestamp, high_watermark
                )
                if entry is not None:
                    aborted.append((segment, entry))
    return aborted


def snapshot_files(directory: Path) -> list[tuple[int, Path]]:
    """The producer snapshots of a partition directory, (offset, path), oldest first."""
    found = []
    for path in directory.glob("*" + SNAPSHOT_SUFFIX):
        offset = parse_base(path.name, SNAPSHOT_SUFFIX)
        if offset is not None:
            found.append((offset, path))
    return sorted(found)


def load_cleaner_checkpoint(directory: Path) -> tuple[int, int]:
    """(first dirty offset, latest delete horizon); (0, -1) without a valid checkpoint."""
    try:
        first, horizon = (directory / CLEANER_CHECKPOINT_FILE).read_text().split()
        return int(first), int(horizon)
    except (OSError, ValueError):
        return 0, -1


def _last_batch_header(segments: list[Segment]) -> BatchHeader | None:
    for segment in reversed(segments):
        if segment.size == 0:
            continue
        positions = segment.index_positions()
        last = None
        for _, header in segment.iter_batches(positions[-1] if positions else 0):
            last = header
        return last
    return None


def _rebuild_epochs(segments: list[Segment], cache: LeaderEpochCache) -> None:
    """Epoch start offsets from batch headers, without reading the whole log.

    Epochs never decrease along the log, so the index entries of all segments are
    bisected: a stretch whose first and last indexed batches share an epoch holds no
    change; only the stretches between two adjacent entries whose epochs differ (and
    the tail after the last entry) are walked batch by batch.
    """
    probes = [(s, p) for s in segments if s.size for p in s.index_positions()]
    if not probes:
        return
    headers: dict[int, BatchHeader] = {}

    def header(i: int) -> BatchHeader:
        found = headers.get(i)
        if found is None:
            segment, position = probes[i]
            found = segment.header_at(position)
            assert found is not None
            headers[i] = found
        return found

    def see(h: BatchHeader) -> None:
        if h.leader_epoch > cache.latest_epoch:
            cache.assign(h.leader_epoch, h.base_offset, flush=False)

    def walk(i: int) -> None:
        segment, position = probes[i]
        nxt = probes[i + 1] if i + 1 < len(probes) else None
        limit = nxt[1] if nxt is not None and nxt[0] is segment else segment.size
        for pos, h in segment.iter_batches(position, chunk=LOOKUP_CHUNK):
            if pos >= limit:
                break
            see(h)

    see(header(0))
    stack = [(0, len(probes) - 1)]
    while stack:
        lo, hi = stack.pop()
        if hi <= lo or header(lo).leader_epoch == header(hi).leader_epoch:
            continue
        if hi == lo + 1:
            walk(lo)
            see(header(hi))
            continue
        mid = (lo + hi) // 2
        stack.append((mid, hi))  # popped after (lo, mid): changes stay in order
        stack.append((lo, mid))
    walk(len(probes) - 1)


def read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return default
