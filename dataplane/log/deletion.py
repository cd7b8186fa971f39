"""Retention and deletion of a partition's segments.

Kafka splits this between ``UnifiedLog`` (``deleteOldSegments`` by retention.ms /
retention.bytes / log start offset, ``maybeIncrementLogStartOffset`` for DeleteRecords)
and ``LocalLog`` (segment files deleted after ``file.delete.delay.ms``); here it is one
piece, :class:`LogDeletion`, owned by a :class:`PartitionLog`:

- retention (``retention.py`` decides which prefix of the segment list may go; with a
  remote tier the local limits and "only what is uploaded" apply);
- DeleteRecords: the log start offset moves up (checkpointed in ``log-start-offset``
  when it lands inside a segment), the epoch cache's first entry follows it, segments
  wholly below it go;
- delayed deletion: a removed segment's files are unlinked at once, its descriptor stays
  open for ``file.delete.delay.ms`` (the graveyard) so a read in flight finishes on the
  old file; :meth:`LogDeletion.reap` closes the expired ones.

Only synchronous code on the event loop changes the segment list. Imports ``local_log``,
``retention``, ``loader`` (file names), ``leader_epochs`` and ``segment`` of this package,
never ``partition_log``: what it needs of its owner is :class:`RetainedLog`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from dataplane import clock
from dataplane.config import Settings
from dataplane.durable import write_atomically
from dataplane.log import retention
from dataplane.log.leader_epochs import LeaderEpochCache
from dataplane.log.loader import LOG_START_FILE
from dataplane.log.local_log import LocalLog
from dataplane.log.segment import Segment
from wire.errors import OffsetOutOfRange

log = logging.getLogger(__name__)

ConfigView = Callable[[str], Any]


class RemoteTier(Protocol):
    """What the log needs to know of its remote tier (from the metadata image)."""

    def end_offset(self) -> int:
        """One past the last offset uploaded (0 when nothing is)."""

    def start_offset(self) -> int:
        """The first offset readable from the remote tier, -1 when it holds nothing."""


class RetainedLog(Protocol):
    """What deletion reads and moves on the log it serves (a ``PartitionLog``)."""

    config: Settings
    log_start_offset: int
    epochs: LeaderEpochCache
    remote_tier: RemoteTier | None

    @property
    def name(self) -> str: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def tiered(self) -> bool: ...

    def roll(self) -> Segment: ...


class LogDeletion:
    def __init__(self, owner: RetainedLog, local: LocalLog) -> None:
        self._log = owner
        self._local = local
        self._graveyard: list[tuple[float, Segment]] = []

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete segments by retention.ms / retention.bytes (``delete`` policy) and those
        wholly below the log start offset; returns how many went.

        With a remote tier the local limits are local.retention.ms / .bytes (-2: the same
        as retention.*), and only segments wholly uploaded may go: while the object store
        is down, local data stays (the remote manager expires remote data by retention.*).
        """
        if self._local.closed:
            return 0
        owner = self._log
        config = owner.config
        now = clock.now_ms() if now_ms is None else now_ms
        deleted = 0
        if "delete" in config.get_list("cleanup.policy"):
            retention_ms = config.get_int("retention.ms")
            retention_bytes = config.get_int("retention.bytes")
            uploaded: Callable[[Segment], bool] = _always
            if owner.tiered:
                assert owner.remote_tier is not None
                local_ms = config.get_int("local.retention.ms")
                local_bytes = config.get_int("local.retention.bytes")
                retention_ms = retention_ms if local_ms == -2 else local_ms
                retention_bytes = retention_bytes if local_bytes == -2 else local_bytes
                remote_end = owner.remote_tier.end_offset()
                active = self._local.active

                def uploaded(segment: Segment) -> bool:
                    return segment is not active and segment.next_offset <= remote_end

            if retention_ms >= 0:
                expired = retention.by_time(now, retention_ms)
                deleted += self._delete_prefix(lambda s: uploaded(s) and expired(s))
            if retention_bytes >= 0:
                over = retention.by_size(self._local.size_bytes, retention_bytes)
                deleted += self._delete_prefix(lambda s: uploaded(s) and over(s))
        return deleted + self.delete_segments_below_start()

    def _delete_prefix(self, predicate: Callable[[Segment], bool]) -> int:
        local = self._local
        count = retention.deletable_prefix(
            local.segments, local.log_end_offset, self._log.high_watermark, predicate
        )
        if count == 0:
            return 0
        if count == len(local.segments):
            self._log.roll()
        self._remove_prefix(count, "retention")
        return count

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset (DeleteRecords; -1 means the high watermark).

        Returns the new low watermark. Segments wholly below it are deleted.
        """
        owner = self._log
        if offset == -1:
            offset = owner.high_watermark
        if offset < 0 or offset > owner.high_watermark:
            raise OffsetOutOfRange(
                f"cannot delete before {offset}: high watermark is {owner.high_watermark}"
            )
        if offset > owner.log_start_offset:
            owner.log_start_offset = offset
            self.persist_log_start()
            owner.epochs.truncate_from_start(offset)
            self.delete_segments_below_start()
        return owner.log_start_offset

    def persist_log_start(self) -> None:
        """Write the owner's log start offset to ``log-start-offset`` (atomically)."""
        content = f"{self._log.log_start_offset}\n".encode()
        write_atomically(self._local.directory / LOG_START_FILE, content)

    def delete_segments_below_start(self) -> int:
        """Delete segments whose every offset is below the log start offset."""
        segments = self._local.segments
        start = self._log.log_start_offset
        count = 0
        while (
            count + 1 < len(segments)
            and segments[count + 1].base_offset <= start
            and not segments[count].cleaning
        ):
            count += 1
        if count:
            self._remove_prefix(count, "log start offset")
        return count

    def delete_oldest_segment(self) -> None:
        """Drop the oldest closed segment and move the log start past it."""
        segments = self._local.segments
        if len(segments) > 1 and not segments[0].cleaning:
            self._remove_prefix(1, "request")

    def _remove_prefix(self, count: int, reason: str) -> None:
        owner = self._log
        local = self._local
        doomed = local.detach_prefix(count)
        # Moving to a segment boundary needs no checkpoint: on load the log start is at
        # least the first segment's base offset.
        owner.log_start_offset = max(owner.log_start_offset, local.segments[0].base_offset)
        owner.epochs.truncate_from_start(owner.log_start_offset)
        deadline = time.monotonic() + self._delete_delay()
        for segment in doomed:
            segment.unlink_files()
            self._graveyard.append((deadline, segment))
        log.info(
            "%s: deleted %d segment(s) by %s; log start offset %d",
            owner.name,
            count,
            reason,
            owner.log_start_offset,
        )

    # ------------------------------------------------------------------ delayed deletion

    def bury(self, doomed: list[Segment]) -> None:
        """Close the descriptors of removed segments (files already unlinked or replaced)
        after ``file.delete.delay.ms``."""
        deadline = time.monotonic() + self._delete_delay()
        for segment in doomed:
            self._graveyard.append((deadline, segment))

    def _delete_delay(self) -> float:
        try:
            return self._log.config.get_seconds("file.delete.delay.ms")
        except KeyError:
            return 60.0

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

    def close(self) -> None:
        """Close every buried descriptor now (the log is closing)."""
        for _, segment in self._graveyard:
            segment.close()
        self._graveyard.clear()


def _always(_segment: Segment) -> bool:
    return True
