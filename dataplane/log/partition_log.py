"""The log of one partition (Kafka's ``UnifiedLog``): what every caller uses.

Offsets: ``log_start_offset`` <= every readable offset < ``log_end_offset``. The high
watermark is the end of what consumers may read. With ``auto_high_watermark`` (the
default: single-replica partitions) it is the log end offset; otherwise replication moves
it with :meth:`PartitionLog.advance_high_watermark` (leader) and
:meth:`PartitionLog.set_high_watermark` (follower), and only truncation lowers it.

:class:`PartitionLog` owns the log start offset, the high watermark, the leader-epoch
cache, producer state, the cleaner's checkpoint and the checks of an append; it is built
from three pieces, as Kafka builds ``UnifiedLog``:

- ``loader.py`` (:class:`LogLoader`): recovery when the log is opened;
- ``local_log.py`` (:class:`LocalLog`): the segments -- write, roll and seal, read,
  truncate, lookups, fsync descriptors;
- ``deletion.py`` (:class:`LogDeletion`): retention, DeleteRecords and the delayed close
  of deleted segments;
- ``transactions.py``: transaction markers, the per-segment aborted-transaction index
  and the last stable offset (what read_committed consumers may read).

Whoever owns the log (the replication ``Partition``) sets :attr:`PartitionLog.on_change`:
it is called after an append, a high-watermark advance, a truncation and when the log
closes. The log keeps no waiters of its own.

The files of a partition directory are listed in ``dataplane/log/README.md``.

Everything here runs on the event loop except sealing (fsync + index write of a rolled
segment, then the roll's producer snapshot) and the log cleaner's rewrite, which run in
threads on segments no longer written to. The segment list is only changed by
synchronous code on the loop, so a reader never sees a half-made change; a replaced or
deleted segment keeps its descriptor open for ``file.delete.delay.ms`` so a reader
holding it finishes on the old (unlinked) file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from dataplane import clock
from dataplane.config import Settings, ViewSettings
from dataplane.durable import write_atomically
from dataplane.log.deletion import ConfigView, LogDeletion, RemoteTier
from dataplane.log.loader import (
    CLEANER_CHECKPOINT_FILE,
    HIGH_WATERMARK_FILE,
    SNAPSHOT_SUFFIX,
    LogLoader,
    load_producer_state,
    snapshot_files,
)
from dataplane.log.local_log import LocalLog
from dataplane.log.producer_state import ProducerStateTable
from dataplane.log.region import FileRegion
from dataplane.log.replica_batches import replica_batches
from dataplane.log.segment import MAX_RELATIVE_OFFSET, Segment, segment_name
from dataplane.log.transactions import (
    apply_marker,
    collect_aborted,
    cut_txn_index,
    record_batches,
)
from wire.compression import LEVEL_KEYS, TARGET_CODECS
from wire.errors import (
    BrokerError,
    CorruptRecord,
    LogCleaningInProgress,
    MessageTooLarge,
    OffsetOutOfRange,
    UnknownTopicOrPartition,
)
from wire.record_batch import (
    HEADER,
    HEADER_SIZE,
    BatchHeader,
    parse_header,
    patched_header,
    validate_records,
)
from wire.transactions import ControlType, Marker, encode_marker

__all__ = ["AppendResult", "ConfigView", "PartitionLog", "RemoteTier"]

log = logging.getLogger(__name__)

KEEP_SNAPSHOTS = 2


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    """-1 unless the topic uses LogAppendTime."""
    log_start_offset: int
    duplicate: bool = False


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: ConfigView,
        *,
        max_producer_entries: int = 5,
        settings: Callable[[], Settings] | None = None,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config: Settings = ViewSettings(config)
        """The topic's effective settings, read one key at a time."""
        self._settings: Callable[[], Settings] = settings or (lambda: self.config)
        """All effective topic settings at once (the append path reads several)."""
        self.auto_high_watermark = True
        """True: the high watermark is the log end offset. False: replication moves it."""
        self._hw_lock = threading.Lock()
        self._snapshot_lock = threading.Lock()
        self._truncations = 0
        """Bumped by every truncation: a roll's snapshot taken before one is not written."""
        self.dirty = False
        """True when bytes were written since the last fsync."""
        self.remote_tier: RemoteTier | None = None
        """The partition's remote tier (set when the broker has tiered storage); it acts
        only while the topic has ``remote.storage.enable``."""
        self.cleaner_backoff_until = 0.0
        self.on_change: Callable[[], None] | None = None
        """Set by the log's owner: called (no arguments) after data is appended, the high
        watermark advances, the log is truncated, and when it closes."""
        directory.mkdir(parents=True, exist_ok=True)
        loaded = LogLoader(
            directory, self.name, self._index_interval(), max_producer_entries
        ).load()
        self._local = LocalLog(directory, self.name, loaded.segments)
        self._deletion = LogDeletion(self, self._local)
        self.log_start_offset = loaded.log_start_offset
        self.producers = loaded.producers
        self.epochs = loaded.epochs
        self.cleaner_offset = loaded.cleaner_offset
        """First dirty offset: the log cleaner has deduplicated everything below it."""
        self.latest_delete_horizon = loaded.latest_delete_horizon
        """Largest tombstone delete horizon the cleaner set or kept, -1 if none."""
        self._high_watermark = loaded.high_watermark
        self._hw_checkpointed = loaded.hw_checkpointed
        # Appends must not stamp an epoch older than the log already holds.
        self.leader_epoch = max(0, self.epochs.latest_epoch)
        """The epoch stamped on batches appended by :meth:`append` (see become_leader)."""

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _index_interval(self) -> int:
        return self.config.get_int("index.interval.bytes")

    def _notify(self) -> None:
        hook = self.on_change
        if hook is not None:
            hook()

    # ------------------------------------------------------------------ offsets

    @property
    def segments(self) -> list[Segment]:
        """The segments, oldest first (the list is replaced, never half-changed)."""
        return self._local.segments

    @property
    def active(self) -> Segment:
        return self._local.segments[-1]

    @property
    def closed(self) -> bool:
        return self._local.closed

    @property
    def log_end_offset(self) -> int:
        return self._local.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        if self.auto_high_watermark:
            return self._local.segments[-1].next_offset
        return self._high_watermark

    @property
    def size_bytes(self) -> int:
        return self._local.size_bytes

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

    def advance_high_watermark(self, offset: int) -> int:
        """Leader: move the high watermark up to ``offset`` (capped at the log end); never
        down. Calls :attr:`on_change` when it moves. Returns the high watermark."""
        new = min(offset, self.log_end_offset)
        if new > self._high_watermark:
            self._high_watermark = new
            self.producers.prune_unreplicated(new)
            self._notify()  # also wakes read_committed fetches: the LSO may have moved
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
    def tiered(self) -> bool:
        return self.remote_tier is not None and self.config.get_bool("remote.storage.enable")

    @property
    def first_offset(self) -> int:
        """The log start offset clients see: the remote tier's start when it holds the
        oldest data, else the local log start (``log_start_offset``, the hot tier's)."""
        tier = self.remote_tier
        if tier is None or not self.tiered:
            return self.log_start_offset
        remote = tier.start_offset()
        return self.log_start_offset if remote < 0 else min(remote, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """The end of what read_committed consumers may read: the first offset of the
        oldest transaction still open or whose marker is not below the high watermark
        (at least the log start), else the high watermark; never above it."""
        hw = self.high_watermark
        first = self.producers.first_unstable_offset(hw)
        return hw if first < 0 else min(max(first, self.log_start_offset), hw)

    def aborted_transactions(self, fetch_offset: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping
        [``fetch_offset``, ``upper``), from the local segments' transaction indexes."""
        found = collect_aborted(self._local.segments_from(fetch_offset), fetch_offset, upper)
        return [(e.producer_id, e.first_offset) for e in found]

    # ------------------------------------------------------------------ append

    def append(self, data: bytes | bytearray, headers: list[BatchHeader]) -> AppendResult:  # noqa: C901, PLR0912, PLR0915 - the append path: one flat sequence of checks
        """Append validated batches from a produce request (``data`` is not modified).

        Raises MessageTooLarge, InvalidRecords / InvalidTimestamps (records that break the
        topic's rules, see record_batch.validate_records), OutOfOrderSequence,
        InvalidProducerEpoch. Batches are recompressed when the topic's compression.type
        asks. A batch that repeats an already-written idempotent batch is not written
        again; its original offsets are returned.
        """
        config = self._settings()
        max_message = config.get_int("max.message.bytes")
        newest = -1
        count = 0
        for header in headers:
            if header.size > max_message:
                raise MessageTooLarge(
                    f"record batch of {header.size} bytes exceeds max.message.bytes={max_message}"
                )
            newest = max(newest, header.max_timestamp)
            count += header.last_offset_delta + 1
        now_ms = clock.now_ms()
        log_append_time = -1
        if config.get_str("message.timestamp.type") == "LogAppendTime":
            log_append_time = newest = now_ms
        codec = TARGET_CODECS.get(config.get_str("compression.type"), -1)
        checked, headers = validate_records(
            data,
            headers,
            topic_partition=self.name,
            now_ms=now_ms,
            compacted="compact" in config.get_list("cleanup.policy"),
            log_append_time=log_append_time >= 0,
            before_ms=config.get_int("message.timestamp.before.max.ms"),
            after_ms=config.get_int("message.timestamp.after.max.ms"),
            codec=codec,
            level=config.get_int(LEVEL_KEYS[codec]) if codec in LEVEL_KEYS else None,
        )
        if checked is not data:  # recompressed
            data = checked
            for header in headers:
                if header.size > max_message:
                    raise MessageTooLarge(
                        f"record batch of {header.size} bytes recompressed to "
                        f"{config['compression.type']} exceeds max.message.bytes={max_message}"
                    )
        with self.producers.noting_refusals(headers):
            if (retried := self._refuse_while_full(headers)) is not None:
                return retried
            if len(headers) == 1:
                duplicate = self.producers.check(headers[0])
                if duplicate is not None:
                    return AppendResult(
                        duplicate.first_offset,
                        duplicate.last_offset,
                        -1,
                        self.log_start_offset,
                        True,
                    )
            else:
                for header in headers:
                    if self.producers.check(header) is not None:
                        raise CorruptRecord("a duplicate batch inside a multi-batch request")
            local = self._local
            with local.refusing_when_full():
                if local.roll_due(
                    len(data),
                    count,
                    newest,
                    now_ms,
                    segment_bytes=config.get_int("segment.bytes"),
                    segment_ms=config.get_int("segment.ms"),
                ):
                    self.roll()
                offset = local.segments[-1].next_offset
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
            local.write(pieces, len(data), patched)
        for header in patched:
            self.producers.record(header, now_ms)
        self.dirty = True
        if self.auto_high_watermark:
            self._high_watermark = offset  # the log end
        hook = self.on_change
        if hook is not None:
            hook()
        return AppendResult(
            patched[0].base_offset,
            patched[-1].last_offset,
            log_append_time,
            self.log_start_offset,
        )

    def _refuse_while_full(self, headers: list[BatchHeader]) -> AppendResult | None:
        """While the disk refuses writes (``LocalLog.full_error``): LogDirFull, but the
        original offsets of a retried batch that was written before."""
        if (full := self._local.full_error()) is None:
            return None
        with contextlib.suppress(BrokerError):
            duplicate = self.producers.check(headers[0]) if len(headers) == 1 else None
            if duplicate is not None:
                return AppendResult(
                    duplicate.first_offset, duplicate.last_offset, -1, self.log_start_offset, True
                )
        raise full

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
        local = self._local
        if local.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        view = memoryview(data)
        leo = local.log_end_offset
        headers = replica_batches(view, leo)
        if not headers:
            return AppendResult(leo, leo - 1, -1, self.log_start_offset)
        for header in headers:
            if header.leader_epoch != self.epochs.latest_epoch:
                self.epochs.assign(header.leader_epoch, header.base_offset)
        config = self._settings()
        segment_bytes = config.get_int("segment.bytes")
        segment_ms = config.get_int("segment.ms")
        now_ms = clock.now_ms()
        start = 0
        while start < len(headers):
            end = start + 1
            while (
                end < len(headers)
                and headers[end].last_offset - local.log_end_offset <= MAX_RELATIVE_OFFSET
            ):
                end += 1
            group = headers[start:end]
            first, last = group[0], group[-1]
            size = last.position + last.size - first.position
            active = local.active
            if active.size and (
                active.size + size > segment_bytes
                or last.last_offset - active.base_offset > MAX_RELATIVE_OFFSET
                or active.time_to_roll(max(h.max_timestamp for h in group), now_ms, segment_ms)
            ):
                self.roll()
            shifted = [replace(h, position=h.position - first.position) for h in group]
            local.write([view[first.position : first.position + size]], size, shifted)
            start = end
        self.dirty = True
        if self.auto_high_watermark:
            self._high_watermark = local.log_end_offset
        record_batches(
            self.producers,
            headers,
            view,
            segment_for=lambda offset: local.segments_from(offset)[0],
            now_ms=now_ms,
            high_watermark=self.high_watermark,
        )
        self._notify()
        return AppendResult(
            headers[0].base_offset, headers[-1].last_offset, -1, self.log_start_offset
        )

    def append_internal(self, batch: bytes) -> AppendResult:
        """Append one broker-built batch (internal topics, tests)."""
        return self.append(batch, [parse_header(batch, 0)])

    def append_marker(
        self, producer_id: int, producer_epoch: int, control: ControlType, coordinator_epoch: int
    ) -> AppendResult:
        """Leader: write a COMMIT / ABORT marker (a control batch) for ``producer_id`` at
        the log end, ending its open transaction here if it has one (Kafka writes the
        marker either way). An ABORT of an open transaction adds an entry to the
        transaction index of the segment the marker lands in. InvalidProducerEpoch if
        ``producer_epoch`` is older than the producer's (a newer one becomes its epoch),
        TransactionCoordinatorFenced if ``coordinator_epoch`` is older than its last
        marker's."""
        local = self._local
        if local.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        now_ms = clock.now_ms()
        batch = encode_marker(
            producer_id, producer_epoch, control, coordinator_epoch, timestamp_ms=now_ms
        )
        config = self._settings()
        if local.roll_due(
            len(batch),
            1,
            now_ms,
            now_ms,
            segment_bytes=config.get_int("segment.bytes"),
            segment_ms=config.get_int("segment.ms"),
        ):
            self.roll()
        offset = local.log_end_offset
        if self.leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(self.leader_epoch, offset)  # durable before the data
        view = memoryview(batch)
        head = patched_header(view, parse_header(batch), offset, self.leader_epoch, -1)
        header = BatchHeader(0, *HEADER.unpack_from(head, 0))
        local.write([head, view[HEADER_SIZE:]], len(batch), [header])
        self.dirty = True
        if self.auto_high_watermark:
            self._high_watermark = offset + 1
        marker = Marker(control, coordinator_epoch)
        entry = apply_marker(self.producers, header, marker, now_ms, self.high_watermark)
        if entry is not None:
            local.active.append_aborted(entry)
        self._notify()  # the LSO may have moved: read_committed long polls re-read
        return AppendResult(offset, offset, -1, self.log_start_offset)

    def roll(self) -> Segment:
        """Close the active segment and start a new one at the log end offset.

        The closed segment is sealed (fsynced, index written) in a thread when an event
        loop runs, inline otherwise; a producer-state snapshot at the roll offset is
        written after it. Until sealed it is in :meth:`sync_fds`, so an fsync round still
        covers writes made to it.
        """
        local = self._local
        active = local.segments[-1]
        if active.size == 0:
            return active
        after_seal = functools.partial(
            self._write_roll_snapshot,
            active.next_offset,
            self.producers.snapshot(),
            self._truncations,
        )
        return local.roll(self._index_interval(), after_seal)

    def _write_roll_snapshot(self, offset: int, snapshot: bytes, generation: int) -> None:
        """After a rolled segment is sealed (in its thread): the roll's producer snapshot."""
        with self._snapshot_lock:
            # A truncation since the roll may have cut the log below this snapshot.
            if generation == self._truncations and not self._local.closed:
                self._write_snapshot(offset, snapshot)

    async def settle(self) -> None:
        """Wait until every rolled segment is sealed (tests, shutdown)."""
        await self._local.settle()

    def maybe_roll_by_time(self, now_ms: int | None = None) -> bool:
        """Background segment.ms roll of an active segment whose first append is too old."""
        now = clock.now_ms() if now_ms is None else now_ms
        if self._local.active.idle_roll_due(now, self.config.get_int("segment.ms")):
            self.roll()
            return True
        return False

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, *, upper: int | None = None) -> bytes | memoryview:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``: at least
        one when any is available, even if larger than ``max_bytes`` (as Kafka does, so
        consumers always make progress), none holding an offset at or after ``upper``
        (default: the high watermark), within one segment. ``read_region``: batches adding
        up to ``region_min`` bytes or more (if above 0) come as a ``FileRegion``, not read.
        """
        data = self.read_region(offset, max_bytes, upper=upper)
        return data if not isinstance(data, FileRegion) else data.read()

    def read_region(
        self, offset: int, max_bytes: int, *, upper: int | None = None, region_min: int = 0
    ) -> bytes | memoryview | FileRegion:
        local = self._local
        if local.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        limit = upper if upper is not None else self._high_watermark
        if upper is None and self.auto_high_watermark:
            limit = local.segments[-1].next_offset
        if offset == limit:
            return b""
        if offset < self.log_start_offset or offset > limit:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.log_start_offset}, {limit}] of {self.name}"
            )
        return local.read(offset, max_bytes, limit, region_min)

    # ------------------------------------------------------------------ lookups

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``."""
        return self._local.offset_for_timestamp(
            timestamp, self.log_start_offset, self.high_watermark
        )

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets -3)."""
        return self._local.max_timestamp_offset()

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
        local = self._local
        if local.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        old_end = local.log_end_offset
        if offset >= old_end:
            # As Kafka: an epoch this replica began as leader without writing anything
            # must not outlive the reconciliation with the new leader.
            self.epochs.truncate_from_end(old_end)
            return False
        if offset < self.log_start_offset:
            raise OffsetOutOfRange(
                f"cannot truncate {self.name} to {offset}, below its log start offset "
                f"{self.log_start_offset}"
            )
        if any(s.cleaning for s in local.segments_from(offset)):
            raise LogCleaningInProgress(
                f"{self.name}: the log cleaner is rewriting segments at or after {offset}"
            )
        self._cut_derived_state(offset)
        self._deletion.bury(local.truncate_to(offset))
        self.producers = ProducerStateTable(self.producers.max_entries)
        hw = min(self._high_watermark, self.log_end_offset)
        load_producer_state(self.directory, local.segments, self.producers, high_watermark=hw)
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
        local = self._local
        if local.closed:
            raise UnknownTopicOrPartition(f"{self.name} was deleted or is shutting down")
        if offset < 0:
            raise OffsetOutOfRange(f"cannot restart {self.name} at {offset}")
        if any(s.cleaning for s in local.segments):
            raise LogCleaningInProgress(f"{self.name}: the log cleaner is rewriting segments")
        self.log_start_offset = offset
        self._deletion.persist_log_start()
        self._cut_derived_state(-1)
        self.epochs.clear()
        self._deletion.bury(local.restart_at(offset, self._index_interval()))
        self.producers = ProducerStateTable(self.producers.max_entries)
        self._high_watermark = offset
        self._after_truncation()
        log.info("%s: emptied, restarting at offset %d", self.name, offset)

    def restore_producer_snapshot(self, offset: int, snapshot: bytes) -> bool:
        """Adopt a producer-state snapshot taken at ``offset`` by another replica (from the
        remote tier), while this log is empty at ``offset``; False if it does not load."""
        if self.log_end_offset != offset or self._local.segments[0].size:
            return False
        table = ProducerStateTable(self.producers.max_entries)
        if not table.load_snapshot(snapshot):
            return False
        self._write_snapshot(offset, snapshot)
        self.producers = table
        self.producers.touch_all(clock.now_ms())
        return True

    def _cut_derived_state(self, offset: int) -> None:
        """Before a truncation at ``offset`` (-1: everything): epoch cache, cleaner
        checkpoint and producer snapshots forget what is about to go."""
        if offset >= 0:
            self.epochs.truncate_from_end(offset)
            cut_txn_index(self._local.segments_from(offset)[0], offset)
        first_dirty = max(offset, self.log_start_offset)
        if self.cleaner_offset > first_dirty or offset < 0:
            self.cleaner_offset = first_dirty
            self.write_cleaner_checkpoint(first_dirty, self.latest_delete_horizon)
        with self._snapshot_lock:
            self._truncations += 1  # a seal in flight must not write its older snapshot
            for at, path in snapshot_files(self.directory):
                if offset < 0 or at > offset:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()

    def _after_truncation(self) -> None:
        leo = self.log_end_offset
        if self._high_watermark > leo or self.auto_high_watermark:
            self._high_watermark = leo
        if self._hw_checkpointed > self.high_watermark:
            self.checkpoint_high_watermark()
        self._notify()  # long polls re-read: their offset may be gone

    # ------------------------------------------------------------------ derived files

    def _write_snapshot(self, offset: int, content: bytes) -> None:
        write_atomically(self.directory / segment_name(offset, SNAPSHOT_SUFFIX), content)
        # the newest KEEP_SNAPSHOTS stay; with a remote tier so do those of segments not
        # uploaded yet (each segment is uploaded with the snapshot at its end)
        tier = self.remote_tier
        uploaded = tier.end_offset() if tier is not None and self.tiered else None
        for at, path in snapshot_files(self.directory)[:-KEEP_SNAPSHOTS]:
            if uploaded is not None and at > uploaded:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def write_cleaner_checkpoint(self, first_dirty: int, horizon: int) -> None:
        """Persist the cleaner's progress (called by the cleaner, possibly off the loop)."""
        content = f"{first_dirty} {horizon}\n".encode()
        write_atomically(self.directory / CLEANER_CHECKPOINT_FILE, content)

    # ------------------------------------------------------------------ deletion

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Retention (see :meth:`LogDeletion.apply_retention`); segments deleted."""
        return self._deletion.apply_retention(now_ms)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords (-1: the high watermark); returns the new low watermark."""
        return self._deletion.delete_records_before(offset)

    def delete_segments_below_start(self) -> int:
        """Delete segments whose every offset is below the log start offset."""
        return self._deletion.delete_segments_below_start()

    def delete_oldest_segment(self) -> None:
        """Drop the oldest closed segment and move the log start past it."""
        self._deletion.delete_oldest_segment()

    def replace_segments(self, old: list[Segment], new: Segment) -> bool:
        """Swap consecutive closed segments for their rewrite (the log cleaner).

        False (nothing changed) when ``old`` is no longer in the log. The old segments'
        files were already replaced on disk; their descriptors close after the delay.
        """
        if not self._local.replace_segments(old, new):
            return False
        self._deletion.bury(old)
        return True

    def reap(self, now: float | None = None) -> int:
        """Close descriptors of deleted segments whose grace period is over."""
        return self._deletion.reap(now)

    # ------------------------------------------------------------------ durability

    def sync_fds(self) -> list[int]:
        """Descriptors an fsync round must cover: the active segment and unsealed rolls."""
        return self._local.sync_fds()

    def flush(self) -> None:
        """fsync what was written, then checkpoint the high watermark."""
        for fd in self._local.sync_fds():
            os.fsync(fd)
        self.dirty = False
        self.checkpoint_high_watermark()

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._local.close()
        self._notify()  # the owner's long-polling fetches re-read and see the log is gone
        self._deletion.close()

    def close_cleanly(self) -> None:
        """Seal everything, persist the active index and a producer snapshot, close.

        The next start then needs no recovery scan.
        """
        try:
            local = self._local
            local.seal_rolled()
            active = local.active
            if active.fd >= 0:
                os.fsync(active.fd)
                active.sync_aborted()
                active.write_index()
                with self._snapshot_lock:
                    self._write_snapshot(self.log_end_offset, self.producers.snapshot())
                self.checkpoint_high_watermark()
        finally:
            self.close()

    def segment_files(self) -> list[str]:
        return self._local.segment_files()
