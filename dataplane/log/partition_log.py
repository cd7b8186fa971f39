"""The log of one partition: an ordered list of segments, the last one active.

Offsets: ``log_start_offset`` <= every readable offset < ``log_end_offset``. The high
watermark is the end of what consumers may read. With ``auto_high_watermark`` (the
default: single-replica partitions) it is the log end offset; otherwise replication moves
it with :meth:`PartitionLog.advance_high_watermark` (leader) and
:meth:`PartitionLog.set_high_watermark` (follower), and only truncation lowers it.

Files in the partition directory (``DATA_DIR/TOPIC-PARTITION``)::

    B.log, B.index          segments (see segment.py)
    S.snapshot              producer state at offset S (see producer_state.py)
    log-start-offset        the log start offset when DeleteRecords moved it inside a
                            segment (otherwise it is the first segment's base offset)
    leader-epoch-checkpoint leader epoch -> start offset (see leader_epochs.py)
    high-watermark          the high watermark at the last flush / clean shutdown; on
                            load the high watermark is min(it, log end offset)
    cleaner-offset-checkpoint  first dirty offset and latest tombstone delete horizon
    B.cleaned, B.E.swap     log cleaner output in flight (see cleaner.py)

Everything here runs on the event loop except sealing (fsync + index write of a rolled
segment) and the log cleaner's rewrite, which run in threads on segments no longer
written to. The segment list is only changed by synchronous code on the loop, so a reader
never sees a half-made change; a replaced or deleted segment keeps its descriptor open for
``file.delete.delay.ms`` so a reader holding it finishes on the old (unlinked) file.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import errno
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import crc32c

from dataplane.durable import fsync_dir, write_atomically
from dataplane.errors import (
    CorruptRecord,
    LogCleaningInProgress,
    LogDirFull,
    MessageTooLarge,
    OffsetMismatch,
    OffsetOutOfRange,
    UnknownTopicOrPartition,
    UnsupportedCompression,
    UnsupportedMessageFormat,
)
from dataplane.log import retention
from dataplane.log.leader_epochs import CHECKPOINT_FILE as EPOCH_CHECKPOINT_FILE
from dataplane.log.leader_epochs import LeaderEpochCache
from dataplane.log.producer_state import ProducerStateTable
from dataplane.log.segment import (
    LOOKUP_CHUNK,
    MAX_RELATIVE_OFFSET,
    Segment,
    background_executor,
    parse_base,
    segment_name,
)
from dataplane.protocol.record_batch import (
    CODEC_ZSTD,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LEVEL_KEYS,
    LOG_OVERHEAD,
    TARGET_CODECS,
    BatchHeader,
    decode_records,
    parse_header,
    patched_header,
    validate_records,
)

log = logging.getLogger(__name__)

LOG_START_FILE = "log-start-offset"
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
HIGH_WATERMARK_FILE = "high-watermark"
SNAPSHOT_SUFFIX = ".snapshot"
KEEP_SNAPSHOTS = 2
_BATCH_LENGTH = struct.Struct(">i")
_WAITER_PRUNE = 64
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
SEAL_WORKERS = 2


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    """-1 unless the topic uses LogAppendTime."""
    log_start_offset: int
    duplicate: bool = False


ConfigView = Callable[[str], Any]


class RemoteTier(Protocol):
    """What the log needs to know of its remote tier (from the metadata image)."""

    def end_offset(self) -> int:
        """One past the last offset uploaded (0 when nothing is)."""

    def start_offset(self) -> int:
        """The first offset readable from the remote tier, -1 when it holds nothing."""


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: ConfigView,
        *,
        max_producer_entries: int = 5,
        settings: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._settings = settings or (lambda: _SettingsView(config))
        """All effective topic settings at once (the append path reads several)."""
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.leader_epoch = 0
        """The epoch stamped on batches appended by :meth:`append` (see become_leader)."""
        self.epochs = LeaderEpochCache(directory / EPOCH_CHECKPOINT_FILE)
        self.auto_high_watermark = True
        """True: the high watermark is the log end offset. False: replication moves it."""
        self._high_watermark = 0
        self._hw_checkpointed = -1
        self._hw_lock = threading.Lock()
        self._snapshot_lock = threading.Lock()
        self._truncations = 0
        """Bumped by every truncation: a roll's snapshot taken before one is not written."""
        self.producers = ProducerStateTable(max_producer_entries)
        self._waiters: list[asyncio.Future[None]] = []
        self.dirty = False
        """True when bytes were written since the last fsync."""
        self.closed = False
        self.remote_tier: RemoteTier | None = None
        """The partition's remote tier (set when the broker has tiered storage); it acts
        only while the topic has ``remote.storage.enable``."""
        self._closing: list[Segment] = []
        """Rolled segments whose seal (fsync + index) has not finished."""
        self._seals: set[asyncio.Future[None]] = set()
        self._graveyard: list[tuple[float, Segment]] = []
        self.cleaner_offset = 0
        """First dirty offset: the log cleaner has deduplicated everything below it."""
        self.latest_delete_horizon = -1
        """Largest tombstone delete horizon the cleaner set or kept, -1 if none."""
        self.cleaner_backoff_until = 0.0
        directory.mkdir(parents=True, exist_ok=True)
        self._load()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    # ------------------------------------------------------------------ load

    def _index_interval(self) -> int:
        return int(self.config("index.interval.bytes"))

    def _load(self) -> None:
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
            if base is not None and base not in present:
                (directory / name).unlink()
        interval = self._index_interval()
        stored_start = _read_int(directory / LOG_START_FILE, 0)
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
        self.segments = segments
        self._rebase()
        self.log_start_offset = min(max(segments[0].base_offset, stored_start), self.log_end_offset)
        self._load_producer_state()
        self._load_cleaner_checkpoint()
        self._load_epoch_cache()
        self._load_high_watermark()
        # Appends must not stamp an epoch older than the log already holds.
        self.leader_epoch = max(self.leader_epoch, self.epochs.latest_epoch)

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
                    with contextlib.suppress(FileNotFoundError):
                        (directory / segment_name(base, ".index")).unlink()
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
            for suffix in (".log", ".index"):
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / segment_name(base, suffix)).unlink()
        fsync_dir(self.directory)

    def _load_producer_state(self) -> None:
        leo = self.log_end_offset
        snapshots = self._snapshots()
        start: int | None = None
        for offset, path in reversed(snapshots):
            if offset > leo:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                continue
            if start is None:
                try:
                    raw = path.read_bytes()
                except OSError:
                    continue
                if self.producers.load_snapshot(raw):
                    start = offset
        self._replay_producers(self.segments[0].base_offset if start is None else start)
        self.producers.touch_all(int(time.time() * 1000))

    def _replay_producers(self, start: int) -> None:
        for segment in self.segments:
            if segment.next_offset <= start:
                continue
            position = 0
            if segment.base_offset < start:
                found = segment.position_for(start)
                if found is None:
                    continue
                position = found[0]
            for _, header in segment.iter_batches(position):
                if header.base_offset >= start:
                    self.producers.record(header)

    def _snapshots(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.glob("*" + SNAPSHOT_SUFFIX):
            offset = parse_base(path.name, SNAPSHOT_SUFFIX)
            if offset is not None:
                found.append((offset, path))
        return sorted(found)

    def _write_snapshot(self, offset: int, content: bytes) -> None:
        write_atomically(self.directory / segment_name(offset, SNAPSHOT_SUFFIX), content)
        # the newest KEEP_SNAPSHOTS stay; with a remote tier so do those of segments not
        # uploaded yet (each segment is uploaded with the snapshot at its end)
        tier = self.remote_tier
        uploaded = tier.end_offset() if tier is not None and self.tiered else None
        for at, path in self._snapshots()[:-KEEP_SNAPSHOTS]:
            if uploaded is not None and at > uploaded:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _load_cleaner_checkpoint(self) -> None:
        try:
            first, horizon = (self.directory / CLEANER_CHECKPOINT_FILE).read_text().split()
            self.cleaner_offset = int(first)
            self.latest_delete_horizon = int(horizon)
        except (OSError, ValueError):
            self.cleaner_offset = 0
            self.latest_delete_horizon = -1

    def write_cleaner_checkpoint(self, first_dirty: int, horizon: int) -> None:
        """Persist the cleaner's progress (called by the cleaner, possibly off the loop)."""
        content = f"{first_dirty} {horizon}\n".encode()
        write_atomically(self.directory / CLEANER_CHECKPOINT_FILE, content)

    def _load_epoch_cache(self) -> None:
        """The checkpoint, cut to the log; rebuilt from batch headers when it is missing,
        malformed or lacks the epoch of the last batch (written before this file existed,
        or a crash between the two writes of a truncation)."""
        path = self.directory / EPOCH_CHECKPOINT_FILE
        cache = LeaderEpochCache.load(path)
        has_data = any(s.size for s in self.segments)
        if cache is not None and has_data:
            last = self._last_batch_header()
            if last is not None and last.leader_epoch > cache.latest_epoch:
                log.warning("%s: leader-epoch checkpoint lags the log; rebuilding it", self.name)
                cache = None
        if cache is None:
            cache = LeaderEpochCache(path)
            if has_data:
                self._rebuild_epochs(cache)
                cache.flush()
        else:
            cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        self.epochs = cache

    def _last_batch_header(self) -> BatchHeader | None:
        for segment in reversed(self.segments):
            if segment.size == 0:
                continue
            positions = segment.index_positions()
            last = None
            for _, header in segment.iter_batches(positions[-1] if positions else 0):
                last = header
            return last
        return None

    def _rebuild_epochs(self, cache: LeaderEpochCache) -> None:
        """Epoch start offsets from batch headers, without reading the whole log.

        Epochs never decrease along the log, so the index entries of all segments are
        bisected: a stretch whose first and last indexed batches share an epoch holds no
        change; only the stretches between two adjacent entries whose epochs differ (and
        the tail after the last entry) are walked batch by batch.
        """
        probes = [(s, p) for s in self.segments if s.size for p in s.index_positions()]
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

    def _load_high_watermark(self) -> None:
        stored = _read_int(self.directory / HIGH_WATERMARK_FILE, -1)
        leo = self.log_end_offset
        hw = leo if stored < 0 else min(stored, leo)
        self._high_watermark = max(hw, self.log_start_offset)
        self._hw_checkpointed = stored

    # ------------------------------------------------------------------ offsets

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        if self.auto_high_watermark:
            return self.segments[-1].next_offset
        return self._high_watermark

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch in the epoch cache, -1 if none."""
        return self.epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers (see LeaderEpochCache)."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def become_leader(self, epoch: int) -> None:
        """Lead at ``epoch``: appends are stamped with it and it starts at the log end."""
        self.leader_epoch = epoch
        self.epochs.assign(epoch, self.log_end_offset)

    def _follow_log_end(self) -> None:
        if self.auto_high_watermark:
            self._high_watermark = self.log_end_offset

    def advance_high_watermark(self, offset: int) -> int:
        """Leader: move the high watermark up to ``offset`` (capped at the log end); never
        down. Wakes long-polling fetches when it moves. Returns the high watermark."""
        new = min(offset, self.log_end_offset)
        if new > self._high_watermark:
            self._high_watermark = new
            self._wake()
        return self.high_watermark

    def set_high_watermark(self, offset: int) -> int:
        """Follower: take the leader's high watermark, capped at this log's end.

        Like :meth:`advance_high_watermark` it only moves up: a follower's high watermark
        goes down only when its log is truncated below it.
        """
        return self.advance_high_watermark(offset)

    def checkpoint_high_watermark(self) -> None:
        """Write ``high-watermark`` (atomically) if it changed; safe off the loop."""
        with self._hw_lock:
            value = self.high_watermark
            if value != self._hw_checkpointed:
                write_atomically(self.directory / HIGH_WATERMARK_FILE, b"%d\n" % value)
                self._hw_checkpointed = value

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def _rebase(self) -> None:
        self._bases = [s.base_offset for s in self.segments]

    # ------------------------------------------------------------------ append

    def append(self, data: bytes | bytearray, headers: list[BatchHeader]) -> AppendResult:
        """Append validated batches from a produce request (``data`` is not modified).

        Raises MessageTooLarge, InvalidRecords / InvalidTimestamps (records that break the
        topic's rules, see record_batch.validate_records), OutOfOrderSequence,
        InvalidProducerEpoch. Batches are recompressed when the topic's compression.type
        asks. A batch that repeats an already-written idempotent batch is not written
        again; its original offsets are returned.
        """
        config = self._settings()
        max_message = int(config["max.message.bytes"])
        newest = -1
        count = 0
        for header in headers:
            if header.size > max_message:
                raise MessageTooLarge(
                    f"record batch of {header.size} bytes exceeds max.message.bytes={max_message}"
                )
            newest = max(newest, header.max_timestamp)
            count += header.last_offset_delta + 1
        now_ms = int(time.time() * 1000)
        log_append_time = -1
        if config["message.timestamp.type"] == "LogAppendTime":
            log_append_time = newest = now_ms
        codec = TARGET_CODECS.get(config["compression.type"], -1)
        checked, headers = validate_records(
            data,
            headers,
            topic_partition=self.name,
            now_ms=now_ms,
            compacted="compact" in config["cleanup.policy"],
            log_append_time=log_append_time >= 0,
            before_ms=int(config["message.timestamp.before.max.ms"]),
            after_ms=int(config["message.timestamp.after.max.ms"]),
            codec=codec,
            level=int(config[LEVEL_KEYS[codec]]) if codec in LEVEL_KEYS else None,
        )
        if checked is not data:  # recompressed
            data = checked
            for header in headers:
                if header.size > max_message:
                    raise MessageTooLarge(
                        f"record batch of {header.size} bytes recompressed to "
                        f"{config['compression.type']} exceeds max.message.bytes={max_message}"
                    )
        if len(headers) == 1:
            duplicate = self.producers.check(headers[0])
            if duplicate is not None:
                return AppendResult(
                    duplicate.first_offset, duplicate.last_offset, -1, self.log_start_offset, True
                )
        else:
            for header in headers:
                if self.producers.check(header) is not None:
                    raise CorruptRecord("a duplicate batch inside a multi-batch request")
        self._maybe_roll(
            len(data),
            count,
            newest,
            now_ms,
            segment_bytes=config["segment.bytes"],
            segment_ms=config["segment.ms"],
        )
        offset = self.log_end_offset
        if self.leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(self.leader_epoch, offset)  # durable before the data
        patched: list[BatchHeader] = []
        pieces: list[bytes | bytearray | memoryview] = []
        view = memoryview(data)
        for header in headers:
            # Only the 61-byte header is copied and patched; the records are written
            # from the request buffer as they came (one writev for the whole request).
            head = patched_header(view, header, offset, self.leader_epoch, log_append_time)
            fixed = BatchHeader(header.position, *HEADER.unpack_from(head, 0))
            patched.append(fixed)
            pieces.append(head)
            pieces.append(view[header.position + HEADER_SIZE : header.position + header.size])
            offset = fixed.next_offset
        self._write(self.active, pieces, len(data), patched)
        for header in patched:
            self.producers.record(header, now_ms)
        self.dirty = True
        self._follow_log_end()
        self._wake()
        return AppendResult(
            patched[0].base_offset,
            patched[-1].last_offset,
            log_append_time,
            self.log_start_offset,
        )

    def append_replica(self, data: bytes | bytearray | memoryview) -> AppendResult:
        """Append batches fetched from the leader as they are (offsets and epochs assigned).

        Every complete batch is checked (magic, lengths, CRC, codec) before anything is
        written; a trailing partial batch is ignored. The first batch must start at or
        after the log end and each batch after the one before it (compaction on the leader
        leaves gaps), else OffsetMismatch. New epochs go to the epoch cache (before the
        data), producer state is updated without sequence checks, segments roll by
        segment.bytes / segment.ms as for :meth:`append`. With nothing complete to append
        the result has ``last_offset == base_offset - 1``.
        """
        if self.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        view = memoryview(data)
        leo = self.log_end_offset
        headers = _replica_batches(view, leo)
        if not headers:
            return AppendResult(leo, leo - 1, -1, self.log_start_offset)
        for header in headers:
            if header.leader_epoch != self.epochs.latest_epoch:
                self.epochs.assign(header.leader_epoch, header.base_offset)
        config = self._settings()
        segment_bytes = int(config["segment.bytes"])
        segment_ms = int(config["segment.ms"])
        now_ms = int(time.time() * 1000)
        start = 0
        while start < len(headers):
            end = start + 1
            while (
                end < len(headers)
                and headers[end].last_offset - self.log_end_offset <= MAX_RELATIVE_OFFSET
            ):
                end += 1
            group = headers[start:end]
            first, last = group[0], group[-1]
            size = last.position + last.size - first.position
            active = self.active
            if active.size and (
                active.size + size > segment_bytes
                or last.last_offset - active.base_offset > MAX_RELATIVE_OFFSET
                or active.time_to_roll(max(h.max_timestamp for h in group), now_ms, segment_ms)
            ):
                self.roll()
            shifted = [replace(h, position=h.position - first.position) for h in group]
            self._write(self.active, [view[first.position : first.position + size]], size, shifted)
            start = end
        for header in headers:
            self.producers.record(header, now_ms)
        self.dirty = True
        self._follow_log_end()
        self._wake()
        return AppendResult(
            headers[0].base_offset, headers[-1].last_offset, -1, self.log_start_offset
        )

    def _write(
        self,
        segment: Segment,
        pieces: list[bytes | bytearray | memoryview],
        size: int,
        headers: list[BatchHeader],
    ) -> None:
        try:
            segment.append_pieces(pieces, size, headers)
        except OSError as exc:
            if exc.errno in _DISK_FULL:
                log.error(
                    "%s: the disk of %s is full (%s): writes to it fail until space is freed",
                    self.name,
                    self.directory.parent,
                    exc.strerror,
                )
                raise LogDirFull(
                    f"{self.name}: no space left in {self.directory.parent} ({exc.strerror}); "
                    "nothing of this write was kept; free disk space and retry"
                ) from exc
            raise

    def append_internal(self, batch: bytes) -> AppendResult:
        """Append one broker-built batch (internal topics, tests)."""
        return self.append(batch, [parse_header(batch, 0)])

    def _maybe_roll(
        self,
        incoming: int,
        count: int,
        newest_ts: int,
        now_ms: int,
        *,
        segment_bytes: int,
        segment_ms: int,
    ) -> None:
        active = self.active
        if active.size == 0:
            return
        if (
            active.size + incoming > segment_bytes
            or active.next_offset + count - 1 - active.base_offset > MAX_RELATIVE_OFFSET
            or active.time_to_roll(newest_ts, now_ms, segment_ms)
        ):
            self.roll()

    def roll(self) -> Segment:
        """Close the active segment and start a new one at the log end offset.

        The closed segment is sealed (fsynced, index written) in a thread when an event
        loop runs, inline otherwise; a producer-state snapshot at the roll offset is
        written with it. Until sealed it is in :meth:`sync_fds`, so an fsync round still
        covers writes made to it.
        """
        old = self.active
        if old.size == 0:
            return old
        old.closed = True
        segment = Segment(self.directory, old.next_offset, self._index_interval())
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        self._closing.append(old)
        snapshot = self.producers.snapshot()
        generation = self._truncations
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._seal(old, segment.base_offset, snapshot, generation)
            return segment
        future = loop.run_in_executor(
            background_executor("seal", SEAL_WORKERS),
            self._seal,
            old,
            segment.base_offset,
            snapshot,
            generation,
        )
        self._seals.add(future)
        future.add_done_callback(self._seals.discard)
        return segment

    def _seal(
        self, segment: Segment, snapshot_offset: int, snapshot: bytes, generation: int
    ) -> None:
        if self.closed:
            return  # closed for deletion or shutdown; close_cleanly seals what it needs
        try:
            segment.seal()
            with self._snapshot_lock:
                # A truncation since the roll may have cut the log below this snapshot.
                if generation == self._truncations and not self.closed:
                    self._write_snapshot(snapshot_offset, snapshot)
        except OSError as exc:
            if not self.closed:
                log.error("%s: sealing segment %d failed: %s", self.name, segment.base_offset, exc)

    async def settle(self) -> None:
        """Wait until every rolled segment is sealed (tests, shutdown)."""
        while self._seals:
            await asyncio.gather(*list(self._seals))

    def maybe_roll_by_time(self, now_ms: int | None = None) -> bool:
        """Background segment.ms roll of an active segment whose first append is too old."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if self.active.idle_roll_due(now, int(self.config("segment.ms"))):
            self.roll()
            return True
        return False

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, *, upper: int | None = None) -> bytes | memoryview:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``.

        At least one batch is returned when any is available, even if larger than
        ``max_bytes`` (as Kafka does, so consumers always make progress). No batch holding
        an offset at or after ``upper`` (default: the high watermark) is returned. Reads
        stay within one segment.
        """
        if self.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        limit = self.high_watermark if upper is None else upper
        if offset == limit:
            return b""
        if offset < self.log_start_offset or offset > limit:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.log_start_offset}, {limit}] of {self.name}"
            )
        segments = self.segments
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        while index < len(segments):
            segment = segments[index]
            found = segment.position_for(offset)
            if found is not None:
                return _read_from(segment, found[0], found[1], max_bytes, limit)
            index += 1
        return b""

    async def wait_for_data(self, timeout: float) -> None:
        """Wait until an append happens or ``timeout`` seconds pass."""
        future = self.new_data_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(future, timeout)

    def new_data_future(self) -> asyncio.Future[None]:
        """A future resolved by the next append. Callers may cancel it."""
        if len(self._waiters) >= _WAITER_PRUNE:
            self._waiters = [f for f in self._waiters if not f.done()]
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return future

    def _wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    # ------------------------------------------------------------------ lookups

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``."""
        hw = self.high_watermark
        start = self.log_start_offset
        for segment in list(self.segments):
            if segment.max_timestamp < timestamp or segment.next_offset <= start:
                continue
            position = segment.position_for_timestamp(timestamp)
            for pos, header in segment.iter_batches(position, chunk=1 << 16):
                if header.base_offset >= hw:
                    return None
                if header.max_timestamp < timestamp or header.last_offset < start:
                    continue
                for record in decode_records(segment.read_at(pos, header.size)):
                    if record.offset >= hw:
                        return None
                    if record.timestamp >= timestamp and record.offset >= start:
                        return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets -3)."""
        best: Segment | None = None
        for segment in self.segments:
            if segment.max_timestamp >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        if best is None:
            return None
        found = best.position_for(best.max_timestamp_offset)
        if found is None:
            return None
        position, header = found
        for record in decode_records(best.read_at(position, header.size)):
            if record.timestamp == header.max_timestamp:
                return record.offset, record.timestamp
        return header.last_offset, header.max_timestamp

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset at or after ``offset`` (a follower whose
        log diverged from the leader's). False (nothing done) when ``offset`` >= the log
        end; OffsetOutOfRange below the log start offset. A batch holding ``offset`` goes
        whole, so the log end may end up below ``offset`` if it was not a batch boundary.

        Crash-safe: everything derived from the removed part is cut first (epoch cache,
        cleaner checkpoint, producer snapshots above ``offset``), then later segments are
        deleted newest first, the containing segment truncated and fsynced and the
        directory fsynced. A crash in between leaves a log that loads (a prefix of the
        old one, perhaps with records at or after ``offset``; its epoch cache is rebuilt
        from the batches); once this returns nothing at or after ``offset`` comes back.
        LogCleaningInProgress if the cleaner is rewriting a segment to cut (only possible
        below the high watermark): retry after the pass.
        """
        if self.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        if offset >= self.log_end_offset:
            # As Kafka: an epoch this replica began as leader without writing anything
            # must not outlive the reconciliation with the new leader.
            self.epochs.truncate_from_end(self.log_end_offset)
            return False
        if offset < self.log_start_offset:
            raise OffsetOutOfRange(
                f"cannot truncate {self.name} to {offset}, below its log start offset "
                f"{self.log_start_offset}"
            )
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        keep, doomed = self.segments[index], self.segments[index + 1 :]
        if keep.cleaning or any(s.cleaning for s in doomed):
            raise LogCleaningInProgress(
                f"{self.name}: the log cleaner is rewriting segments at or after {offset}"
            )
        old_end = self.log_end_offset
        self._cut_derived_state(offset)
        for segment in reversed(doomed):
            segment.unlink_files()
        keep.reopen_truncated(offset)
        fsync_dir(self.directory)
        self.segments = self.segments[: index + 1]
        self._rebase()
        self._closing = [s for s in self._closing if s is not keep and not s.deleted]
        self._bury(doomed)
        self.producers = ProducerStateTable(self.producers.max_entries)
        self._load_producer_state()
        self._after_truncation()
        log.info(
            "%s: truncated from %d to %d (requested %d)",
            self.name,
            old_end,
            self.log_end_offset,
            offset,
        )
        return True

    def truncation_point(self, leader_epoch: int, leader_end_offset: int) -> tuple[int, bool]:
        """Where a follower truncates after the leader answered OffsetForLeaderEpoch for
        this log's ``latest_epoch`` with (``leader_epoch``, ``leader_end_offset``).

        Kafka's rule (KIP-101, KIP-279): returns (offset, done). When this log does not
        know ``leader_epoch`` itself, the answer is the end of its own largest epoch below
        it and ``done`` is False: truncate there (:meth:`truncate_to`, also when it is the
        log end, which drops epochs led without writing) and ask again with the new
        ``latest_epoch``. An undefined answer (-1) is the caller's business (Kafka then
        truncates to the high watermark).
        """
        leo = self.log_end_offset
        own_epoch, own_end = self.epochs.end_offset_for(leader_epoch, leo)
        if own_epoch < 0:
            return min(leader_end_offset, leo), True
        if own_epoch != leader_epoch:
            return min(own_end, leo), False
        return min(own_end, leader_end_offset, leo), True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete the whole log and restart it, empty, at ``offset`` (a follower whose log
        ends below the leader's log start). Crash-safe like :meth:`truncate_to`: the log
        start checkpoint is written first, so a crash part-way leaves an empty readable
        log; once this returns the log is empty at ``offset``."""
        if self.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        if offset < 0:
            raise OffsetOutOfRange(f"cannot restart {self.name} at {offset}")
        doomed = list(self.segments)
        if any(s.cleaning for s in doomed):
            raise LogCleaningInProgress(f"{self.name}: the log cleaner is rewriting segments")
        self.log_start_offset = offset
        self._persist_log_start()
        self._cut_derived_state(-1)
        self.epochs.clear()
        for segment in reversed(doomed):
            segment.unlink_files()
        self.segments = [Segment(self.directory, offset, self._index_interval())]
        fsync_dir(self.directory)
        self._rebase()
        self._closing = []
        self._bury(doomed)
        self.producers = ProducerStateTable(self.producers.max_entries)
        self._high_watermark = offset
        self._after_truncation()
        log.info("%s: emptied, restarting at offset %d", self.name, offset)

    def restore_producer_snapshot(self, offset: int, snapshot: bytes) -> bool:
        """Adopt a producer-state snapshot taken at ``offset`` by another replica (from the
        remote tier), while this log is empty at ``offset``; False if it does not load."""
        if self.log_end_offset != offset or self.segments[0].size:
            return False
        table = ProducerStateTable(self.producers.max_entries)
        if not table.load_snapshot(snapshot):
            return False
        self._write_snapshot(offset, snapshot)
        self.producers = table
        self.producers.touch_all(int(time.time() * 1000))
        return True

    def _cut_derived_state(self, offset: int) -> None:
        """Before a truncation at ``offset`` (-1: everything): epoch cache, cleaner
        checkpoint and producer snapshots forget what is about to go."""
        if offset >= 0:
            self.epochs.truncate_from_end(offset)
        first_dirty = max(offset, self.log_start_offset)
        if self.cleaner_offset > first_dirty or offset < 0:
            self.cleaner_offset = first_dirty
            self.write_cleaner_checkpoint(first_dirty, self.latest_delete_horizon)
        with self._snapshot_lock:
            self._truncations += 1  # a seal in flight must not write its older snapshot
            for at, path in self._snapshots():
                if offset < 0 or at > offset:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()

    def _bury(self, doomed: list[Segment]) -> None:
        deadline = time.monotonic() + self._delete_delay()
        for segment in doomed:
            self._graveyard.append((deadline, segment))

    def _after_truncation(self) -> None:
        leo = self.log_end_offset
        if self._high_watermark > leo or self.auto_high_watermark:
            self._high_watermark = leo
        if self._hw_checkpointed > self.high_watermark:
            self.checkpoint_high_watermark()
        self._wake()  # long polls re-read: their offset may be gone

    # ------------------------------------------------------------------ deletion

    @property
    def tiered(self) -> bool:
        return self.remote_tier is not None and bool(self.config("remote.storage.enable"))

    @property
    def first_offset(self) -> int:
        """The log start offset clients see: the remote tier's start when it holds the
        oldest data, else the local log start (``log_start_offset``, the hot tier's)."""
        tier = self.remote_tier
        if tier is None or not self.tiered:
            return self.log_start_offset
        remote = tier.start_offset()
        return self.log_start_offset if remote < 0 else min(remote, self.log_start_offset)

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete segments by retention.ms / retention.bytes (``delete`` policy) and those
        wholly below the log start offset; returns how many went.

        With a remote tier the local limits are local.retention.ms / .bytes (-2: the same
        as retention.*), and only segments wholly uploaded may go: while the object store
        is down, local data stays (the remote manager expires remote data by retention.*).
        """
        if self.closed:
            return 0
        now = int(time.time() * 1000) if now_ms is None else now_ms
        deleted = 0
        if "delete" in self.config("cleanup.policy"):
            retention_ms = int(self.config("retention.ms"))
            retention_bytes = int(self.config("retention.bytes"))
            uploaded: Callable[[Segment], bool] = _always
            if self.tiered:
                assert self.remote_tier is not None
                local_ms = int(self.config("local.retention.ms"))
                local_bytes = int(self.config("local.retention.bytes"))
                retention_ms = retention_ms if local_ms == -2 else local_ms
                retention_bytes = retention_bytes if local_bytes == -2 else local_bytes
                remote_end = self.remote_tier.end_offset()
                active = self.active

                def uploaded(segment: Segment) -> bool:
                    return segment is not active and segment.next_offset <= remote_end

            if retention_ms >= 0:
                expired = retention.by_time(now, retention_ms)
                deleted += self._delete_prefix(lambda s: uploaded(s) and expired(s))
            if retention_bytes >= 0:
                over = retention.by_size(self.size_bytes, retention_bytes)
                deleted += self._delete_prefix(lambda s: uploaded(s) and over(s))
        return deleted + self.delete_segments_below_start()

    def _delete_prefix(self, predicate: Callable[[Segment], bool]) -> int:
        count = retention.deletable_prefix(
            self.segments, self.log_end_offset, self.high_watermark, predicate
        )
        if count == 0:
            return 0
        if count == len(self.segments):
            self.roll()
        self._remove_prefix(count, "retention")
        return count

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset (DeleteRecords; -1 means the high watermark).

        Returns the new low watermark. Segments wholly below it are deleted.
        """
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"cannot delete before {offset}: high watermark is {self.high_watermark}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._persist_log_start()
            self.epochs.truncate_from_start(offset)
            self.delete_segments_below_start()
        return self.log_start_offset

    def _persist_log_start(self) -> None:
        write_atomically(self.directory / LOG_START_FILE, f"{self.log_start_offset}\n".encode())

    def delete_segments_below_start(self) -> int:
        """Delete segments whose every offset is below the log start offset."""
        segments = self.segments
        count = 0
        while (
            count + 1 < len(segments)
            and segments[count + 1].base_offset <= self.log_start_offset
            and not segments[count].cleaning
        ):
            count += 1
        if count:
            self._remove_prefix(count, "log start offset")
        return count

    def delete_oldest_segment(self) -> None:
        """Drop the oldest closed segment and move the log start past it."""
        if len(self.segments) > 1 and not self.segments[0].cleaning:
            self._remove_prefix(1, "request")

    def _remove_prefix(self, count: int, reason: str) -> None:
        doomed = self.segments[:count]
        del self.segments[:count]
        self._rebase()
        # Moving to a segment boundary needs no checkpoint: on load the log start is at
        # least the first segment's base offset.
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        deadline = time.monotonic() + self._delete_delay()
        for segment in doomed:
            segment.unlink_files()
            self._graveyard.append((deadline, segment))
        log.info(
            "%s: deleted %d segment(s) by %s; log start offset %d",
            self.name,
            count,
            reason,
            self.log_start_offset,
        )

    def _delete_delay(self) -> float:
        try:
            return int(self.config("file.delete.delay.ms")) / 1000
        except KeyError:
            return 60.0

    def replace_segments(self, old: list[Segment], new: Segment) -> bool:
        """Swap consecutive closed segments for their rewrite (the log cleaner).

        False (nothing changed) when ``old`` is no longer in the log. The old segments'
        files were already replaced on disk; their descriptors close after the delay.
        """
        try:
            first = next(i for i, s in enumerate(self.segments) if s is old[0])
        except StopIteration:
            return False
        current = self.segments[first : first + len(old)]
        if len(current) != len(old) or any(a is not b for a, b in zip(current, old, strict=True)):
            return False
        self.segments[first : first + len(old)] = [new]
        self._rebase()
        deadline = time.monotonic() + self._delete_delay()
        for segment in old:
            segment.cleaning = False
            segment.deleted = True
            self._graveyard.append((deadline, segment))
        return True

    def reap(self, now: float | None = None) -> int:
        """Close descriptors of deleted segments whose grace period is over."""
        if not self._graveyard:
            return 0
        moment = time.monotonic() if now is None else now
        keep = [(d, s) for d, s in self._graveyard if d > moment]
        done = [s for d, s in self._graveyard if d <= moment]
        self._graveyard = keep
        for segment in done:
            segment.close()
        return len(done)

    # ------------------------------------------------------------------ durability

    def sync_fds(self) -> list[int]:
        """Descriptors an fsync round must cover: the active segment and unsealed rolls."""
        fds = [self.active.fd]
        if self._closing:
            self._closing = [s for s in self._closing if not (s.sealed or s.deleted)]
            fds.extend(s.fd for s in self._closing)
        return [fd for fd in fds if fd >= 0]

    def flush(self) -> None:
        """fsync what was written, then checkpoint the high watermark."""
        for fd in self.sync_fds():
            os.fsync(fd)
        self.dirty = False
        self.checkpoint_high_watermark()

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self.closed = True
        self._wake()  # long-polling fetches re-read and see the log is gone
        for segment in self.segments:
            segment.close()
        for _, segment in self._graveyard:
            segment.close()
        self._graveyard.clear()

    def close_cleanly(self) -> None:
        """Seal everything, persist the active index and a producer snapshot, close.

        The next start then needs no recovery scan.
        """
        try:
            for segment in self._closing:
                segment.seal()
            active = self.active
            if active.fd >= 0:
                os.fsync(active.fd)
                active.write_index()
                with self._snapshot_lock:
                    self._write_snapshot(self.log_end_offset, self.producers.snapshot())
                self.checkpoint_high_watermark()
        finally:
            self.close()

    def segment_files(self) -> list[str]:
        return [segment_name(s.base_offset, ".log") for s in self.segments]


def _read_from(
    segment: Segment, position: int, first: BatchHeader, max_bytes: int, limit: int
) -> bytes | memoryview:
    """Whole batches from ``position``: below ``limit``, about ``max_bytes``, at least one."""
    if first.last_offset >= limit:
        return b""
    end_cap = segment.size
    if limit < segment.next_offset:
        cut = segment.position_for(limit)
        if cut is not None:
            end_cap = cut[0]
    want_end = max(min(end_cap, position + max_bytes), position + first.size)
    data = segment.read_at(position, want_end - position)
    if want_end == end_cap or len(data) < want_end - position:
        return data if want_end == end_cap else _cut(data, 0)
    # want_end fell inside a batch: cut after the last whole batch, walking from the
    # nearest index entry instead of from the first batch.
    hint = segment.floor_position(want_end)
    return _cut(data, hint - position if hint > position else 0)


def _cut(data: bytes, start: int) -> bytes | memoryview:
    """``data`` up to its last whole batch (a view: a megabyte is not copied to drop a tail)."""
    end = start
    size = len(data)
    while end + 12 <= size:
        (length,) = _BATCH_LENGTH.unpack_from(data, end + 8)
        step = length + 12
        if end + step > size:
            break
        end += step
    return data if end == size else memoryview(data)[:end]


def _replica_batches(view: memoryview, log_end_offset: int) -> list[BatchHeader]:
    """Headers of the complete batches of a fetch response's records, all checked.

    The checks of ``record_batch.validate_batches`` that hold for any stored batch (magic,
    lengths, CRC, codec) -- not the client-only rules: a leader's log holds control
    batches and the empty batches compaction keeps. Offsets must not go backwards.
    """
    headers: list[BatchHeader] = []
    position = 0
    end = len(view)
    expected = log_end_offset
    while end - position >= HEADER_SIZE:
        header = parse_header(view, position)
        if header.magic != 2:
            raise UnsupportedMessageFormat(
                f"record batch magic {header.magic} at byte {position} of replicated data"
            )
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecord(f"record batch length {header.batch_length} at byte {position}")
        if position + header.size > end:
            break  # a fetch response may end with a partial batch
        actual = crc32c.crc32c(view[position + CRC_START : position + header.size])
        if actual != header.crc:
            raise CorruptRecord(
                f"record batch CRC mismatch at offset {header.base_offset}: header says "
                f"{header.crc:#010x}, data gives {actual:#010x}"
            )
        if header.codec > CODEC_ZSTD:
            raise UnsupportedCompression(f"unknown compression codec {header.codec}")
        if header.last_offset_delta < 0 or header.record_count < 0:
            raise CorruptRecord(f"negative offset delta or count at offset {header.base_offset}")
        if header.base_offset < expected:
            raise OffsetMismatch(
                f"replicated batch at offset {header.base_offset} does not follow "
                f"{expected - 1} (log end offset {log_end_offset})"
            )
        headers.append(header)
        expected = header.next_offset
        position += header.size
    return headers


def _always(_segment: Segment) -> bool:
    return True


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return default


class _SettingsView(Mapping[str, Any]):
    """Settings read key by key through a config view (logs opened without a manager)."""

    def __init__(self, view: ConfigView) -> None:
        self._view = view

    def __getitem__(self, key: str) -> Any:
        return self._view(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0
