"""The local segments of one partition (Kafka's ``LocalLog``).

An ordered list of segments, oldest first, the last one active: writing into the active
segment, rolling and sealing, reading whole batches, truncating and restarting the list,
swapping in the cleaner's rewrite, the lookups that walk segments, and the descriptors an
fsync round must cover. It knows offsets only as the segments hold them: log start, high
watermark, producer state, epochs and deletion are :class:`PartitionLog`'s and
``deletion.py``'s. Imports only ``segment.py`` of this package.

Everything here runs on the event loop except sealing (fsync + index write of a rolled
segment; in a thread when a loop runs), which touches only a segment no longer written
to. The segment list is changed only by synchronous code on the loop, so a reader sees
the old list or the new one.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import errno
import logging
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dataplane.durable import fsync_dir
from dataplane.log.region import FileRegion
from dataplane.log.segment import MAX_RELATIVE_OFFSET, Segment, background_executor, segment_name
from wire.errors import LogDirFull
from wire.record_batch import BatchHeader, decode_records

log = logging.getLogger(__name__)

_BATCH_LENGTH = struct.Struct(">i")
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
SEAL_WORKERS = 2


_FULL_UNTIL: dict[Path, float] = {}
"""Data directory -> until when (``time.monotonic``) every write to it is refused, after a
write failed on its full disk (``log.dir.full.backoff.ms``)."""
_FULL_LOGGED: dict[Path, float] = {}
"""Data directory -> when its full disk was last logged as an error."""
FULL_LOG_INTERVAL_S = 10.0
"""A full disk is logged as an error at most once per this many seconds per data directory
(every refused write of every partition, replicas' fetches included, would be hundreds of
lines a second); the others at debug level."""


class LocalLog:
    full_backoff_s = 1.0
    """``log.dir.full.backoff.ms``, in seconds (the broker's: set by its LogManager)."""

    def __init__(self, directory: Path, name: str, segments: list[Segment]) -> None:
        self.directory = directory
        self.name = name
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        self.closed = False
        self._closing: list[Segment] = []
        """Rolled segments whose seal (fsync + index) has not finished."""
        self._seals: set[asyncio.Future[None]] = set()

    # ------------------------------------------------------------------ offsets

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def _rebase(self) -> None:
        self._bases = [s.base_offset for s in self.segments]

    # ------------------------------------------------------------------ write and roll

    def write(
        self,
        pieces: list[bytes | bytearray | memoryview],
        size: int,
        headers: list[BatchHeader],
    ) -> None:
        """Append batches (already patched and checked) to the active segment.

        LogDirFull when the disk is full: nothing of the write is kept.
        """
        with self.refusing_when_full():
            self.segments[-1].append_pieces(pieces, size, headers)

    @contextlib.contextmanager
    def refusing_when_full(self) -> Iterator[None]:
        """Around any write of an append (the segment, a roll's new files, the leader-epoch
        checkpoint): a failure for lack of space becomes LogDirFull, and the data directory
        then refuses every write for ``log.dir.full.backoff.ms`` (``full_error``), so that
        the requests in flight behind the failed one fail alike instead of arriving out of
        sequence. Other errors pass as they are."""
        try:
            yield
        except OSError as exc:
            if exc.errno not in _DISK_FULL:
                raise
            now = time.monotonic()
            parent = self.directory.parent
            _FULL_UNTIL[parent] = now + self.full_backoff_s
            quiet = now - _FULL_LOGGED.get(parent, -FULL_LOG_INTERVAL_S) < FULL_LOG_INTERVAL_S
            if not quiet:
                _FULL_LOGGED[parent] = now
            log.log(
                logging.DEBUG if quiet else logging.ERROR,
                "%s: the disk of %s is full (%s): writes to it fail until space is freed "
                "(logged at most every %.0f s)",
                self.name,
                parent,
                exc.strerror,
                FULL_LOG_INTERVAL_S,
            )
            raise LogDirFull(
                f"{self.name}: no space left in {parent} ({exc.strerror}); "
                "nothing of this write was kept; free disk space and retry"
            ) from exc

    def full_error(self) -> LogDirFull | None:
        """While the data directory is refusing writes after one failed on its full disk:
        the error every write gets (as Kafka takes a failed log directory offline, so that
        the requests in flight behind a refused one fail alike instead of arriving out of
        sequence); None otherwise."""
        until = _FULL_UNTIL.get(self.directory.parent)
        if until is None or time.monotonic() >= until:
            return None
        return LogDirFull(
            f"{self.name}: the disk of {self.directory.parent} was full "
            f"{(time.monotonic() - until + self.full_backoff_s) * 1000:.0f} ms ago; writes "
            "are refused for log.dir.full.backoff.ms after that; free disk space and retry"
        )

    def roll_due(
        self,
        incoming: int,
        count: int,
        newest_ts: int,
        now_ms: int,
        *,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Whether ``incoming`` bytes holding ``count`` offsets must go to a new segment:
        segment.bytes, the relative-offset range of the index, or segment.ms (as Kafka)."""
        active = self.segments[-1]
        if active.size == 0:
            return False
        return (
            active.size + incoming > segment_bytes
            or active.next_offset + count - 1 - active.base_offset > MAX_RELATIVE_OFFSET
            or active.time_to_roll(newest_ts, now_ms, segment_ms)
        )

    def roll(self, index_interval: int, after_seal: Callable[[], None]) -> Segment:
        """Close the active segment and start a new one at the log end offset.

        The closed segment is sealed (fsynced, index written) in a thread when an event
        loop runs, inline otherwise; ``after_seal`` runs right after the seal, in the same
        thread (the owner writes its producer snapshot there). Until sealed the segment is
        in :meth:`sync_fds`, so an fsync round still covers writes made to it.
        """
        old = self.segments[-1]
        if old.size == 0:
            return old
        old.closed = True
        segment = Segment(self.directory, old.next_offset, index_interval)
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        self._closing.append(old)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.seal(old, after_seal)
            return segment
        future = loop.run_in_executor(
            background_executor("seal", SEAL_WORKERS), self.seal, old, after_seal
        )
        self._seals.add(future)
        future.add_done_callback(self._seals.discard)
        return segment

    def seal(self, segment: Segment, after_seal: Callable[[], None]) -> None:
        """Seal a rolled segment, then run ``after_seal`` (safe off the loop)."""
        if self.closed:
            return  # closed for deletion or shutdown; close_cleanly seals what it needs
        try:
            segment.seal()
            after_seal()
        except OSError as exc:
            if not self.closed:
                log.error("%s: sealing segment %d failed: %s", self.name, segment.base_offset, exc)

    async def settle(self) -> None:
        """Wait until every rolled segment is sealed (tests, shutdown)."""
        while self._seals:
            await asyncio.gather(*list(self._seals))

    # ------------------------------------------------------------------ read

    def read(
        self, offset: int, max_bytes: int, limit: int, region_min: int = 0
    ) -> bytes | memoryview | FileRegion:
        """Whole batches from the one holding ``offset`` (the caller checked it is in the
        log), up to ``max_bytes`` but at least one, none holding an offset >= ``limit``;
        within one segment. With ``region_min`` > 0, batches adding up to at least that
        many bytes come as a ``FileRegion`` of the segment file, not read."""
        segments = self.segments
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        while index < len(segments):
            segment = segments[index]
            found = segment.position_for(offset)
            if found is not None:
                return _read_from(segment, found[0], found[1], max_bytes, limit, region_min)
            index += 1
        return b""

    # ------------------------------------------------------------------ lookups

    def offset_for_timestamp(
        self, timestamp: int, start: int, upper: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``start`` and below
        ``upper`` with timestamp >= ``timestamp``."""
        for segment in list(self.segments):
            if segment.max_timestamp < timestamp or segment.next_offset <= start:
                continue
            position = segment.position_for_timestamp(timestamp)
            for pos, header in segment.iter_batches(position, chunk=1 << 16):
                if header.base_offset >= upper:
                    return None
                if header.max_timestamp < timestamp or header.last_offset < start:
                    continue
                for record in decode_records(segment.read_at(pos, header.size)):
                    if record.offset >= upper:
                        return None
                    if record.timestamp >= timestamp and record.offset >= start:
                        return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp."""
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

    # ------------------------------------------------------------------ changes to the list

    def truncate_to(self, offset: int) -> list[Segment]:
        """Cut the segments at ``offset`` (in the log; the caller checked): later segments
        unlinked newest first, the containing one truncated and fsynced, the directory
        fsynced. Returns the removed segments (their descriptors are still open)."""
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        keep, doomed = self.segments[index], self.segments[index + 1 :]
        for segment in reversed(doomed):
            segment.unlink_files()
        keep.reopen_truncated(offset)
        fsync_dir(self.directory)
        self.segments = self.segments[: index + 1]
        self._rebase()
        self._closing = [s for s in self._closing if s is not keep and not s.deleted]
        return doomed

    def segments_from(self, offset: int) -> list[Segment]:
        """The segment holding ``offset`` and every later one."""
        return self.segments[max(bisect.bisect_right(self._bases, offset) - 1, 0) :]

    def restart_at(self, offset: int, index_interval: int) -> list[Segment]:
        """Unlink every segment (newest first) and start an empty one at ``offset``;
        returns the removed segments (descriptors still open)."""
        doomed = list(self.segments)
        for segment in reversed(doomed):
            segment.unlink_files()
        self.segments = [Segment(self.directory, offset, index_interval)]
        fsync_dir(self.directory)
        self._rebase()
        self._closing = []
        return doomed

    def detach_prefix(self, count: int) -> list[Segment]:
        """Take the ``count`` oldest segments out of the list (files untouched)."""
        doomed = self.segments[:count]
        del self.segments[:count]
        self._rebase()
        return doomed

    def replace_segments(self, old: list[Segment], new: Segment) -> bool:
        """Swap consecutive closed segments for their rewrite (the log cleaner); the old
        ones are marked deleted. False (nothing changed) when ``old`` is no longer in
        the list."""
        try:
            first = next(i for i, s in enumerate(self.segments) if s is old[0])
        except StopIteration:
            return False
        current = self.segments[first : first + len(old)]
        if len(current) != len(old) or any(a is not b for a, b in zip(current, old, strict=True)):
            return False
        self.segments[first : first + len(old)] = [new]
        self._rebase()
        for segment in old:
            segment.cleaning = False
            segment.deleted = True
        return True

    # ------------------------------------------------------------------ durability

    def sync_fds(self) -> list[int]:
        """Descriptors an fsync round must cover: the active segment and unsealed rolls."""
        fds = [self.segments[-1].fd]
        if self._closing:
            self._closing = [s for s in self._closing if not (s.sealed or s.deleted)]
            fds.extend(s.fd for s in self._closing)
        return [fd for fd in fds if fd >= 0]

    def seal_rolled(self) -> None:
        """Seal every rolled segment now, on this thread (clean shutdown)."""
        for segment in self._closing:
            segment.seal()

    def close(self) -> None:
        self.closed = True
        for segment in self.segments:
            segment.close()

    def segment_files(self) -> list[str]:
        return [segment_name(s.base_offset, ".log") for s in self.segments]


def _read_from(  # noqa: PLR0917 - a read's coordinates
    segment: Segment,
    position: int,
    first: BatchHeader,
    max_bytes: int,
    limit: int,
    region_min: int = 0,
) -> bytes | memoryview | FileRegion:
    """Whole batches from ``position``: below ``limit``, about ``max_bytes``, at least one
    (a region of the file when they are ``region_min`` bytes or more)."""
    if first.last_offset >= limit:
        return b""
    end_cap = segment.size
    if limit < segment.next_offset:
        cut = segment.position_for(limit)
        if cut is not None:
            end_cap = cut[0]
    want_end = max(min(end_cap, position + max_bytes), position + first.size)
    if region_min > 0 and want_end - position >= region_min:
        end, next_offset = segment.whole_batches_end(position, want_end)
        if end < position + first.size:
            end, next_offset = position + first.size, first.last_offset + 1
        if end - position >= region_min:
            return segment.region(position, end - position, next_offset)
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
