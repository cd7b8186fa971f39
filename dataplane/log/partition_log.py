"""The log of one partition: an ordered list of segments, the last one active.

Offsets: ``log_start_offset`` <= every readable offset < ``log_end_offset``. The high
watermark is the end of what consumers may read; on a single broker it equals the log
end offset (replication moves it separately).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataplane.errors import (
    CorruptRecord,
    MessageTooLarge,
    OffsetOutOfRange,
)
from dataplane.log.producer_state import ProducerStateTable
from dataplane.log.segment import Segment, segment_name
from dataplane.protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    decode_records,
    parse_header,
    patch_offsets,
    set_log_append_time,
)

log = logging.getLogger(__name__)

LOG_START_FILE = "log-start-offset"


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    """-1 unless the topic uses LogAppendTime."""
    log_start_offset: int
    duplicate: bool = False


ConfigView = Callable[[str], Any]


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: ConfigView,
        *,
        max_producer_entries: int = 5,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[Segment] = []
        self.log_start_offset = 0
        self.leader_epoch = 0
        self.producers = ProducerStateTable(max_producer_entries)
        self._waiters: list[asyncio.Future[None]] = []
        self.dirty = False
        """True when bytes were written since the last fsync."""
        self._last_roll_check = time.time()
        directory.mkdir(parents=True, exist_ok=True)
        self._load()

    # ------------------------------------------------------------------ load

    def _load(self) -> None:
        bases = sorted(
            int(p.name[:-4]) for p in self.directory.glob("*.log") if p.name[:-4].isdigit()
        )
        interval = int(self.config("index.interval.bytes"))
        for i, base in enumerate(bases):
            segment = Segment(self.directory, base, interval)
            is_last = i == len(bases) - 1
            if is_last or not segment.load_indexes():
                segment.recover()
                if not is_last:
                    segment.write_indexes()
            self.segments.append(segment)
        # A segment emptied by recovery is kept only when it is the last one.
        while len(self.segments) > 1 and self.segments[-1].size == 0:
            last = self.segments[-1]
            if last.base_offset >= self.segments[-2].next_offset:
                break
            self.segments.pop().delete()
        if not self.segments:
            self.segments.append(Segment(self.directory, 0, interval))
        try:
            stored = int((self.directory / LOG_START_FILE).read_text().strip())
        except (OSError, ValueError):
            stored = 0
        self.log_start_offset = max(self.segments[0].base_offset, stored)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        for segment in self.segments:
            for _, header in segment.iter_batches():
                self.producers.record(header)

    # ------------------------------------------------------------------ offsets

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ------------------------------------------------------------------ append

    def append(self, data: bytearray, headers: list[BatchHeader]) -> AppendResult:
        """Append validated batches from a produce request (``data`` is patched in place).

        Raises MessageTooLarge, InvalidTimestamp, OutOfOrderSequence, InvalidProducerEpoch.
        A batch that repeats an already-written idempotent batch is not written again; its
        original offsets are returned.
        """
        max_message = int(self.config("max.message.bytes"))
        for header in headers:
            if header.size > max_message:
                raise MessageTooLarge(
                    f"record batch of {header.size} bytes exceeds max.message.bytes={max_message}"
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
        log_append_time = -1
        if self.config("message.timestamp.type") == "LogAppendTime":
            log_append_time = int(time.time() * 1000)
        self._maybe_roll(len(data))
        offset = self.log_end_offset
        patched: list[BatchHeader] = []
        for header in headers:
            patch_offsets(data, header, offset, self.leader_epoch)
            if log_append_time >= 0:
                set_log_append_time(data, header, log_append_time)
            fixed = parse_header(data, header.position)
            patched.append(fixed)
            offset = fixed.next_offset
        self.active.append(data, patched)
        for header in patched:
            self.producers.record(header)
        self.dirty = True
        self._wake()
        return AppendResult(
            patched[0].base_offset,
            patched[-1].last_offset,
            log_append_time,
            self.log_start_offset,
        )

    def append_internal(self, batch: bytes) -> AppendResult:
        """Append one broker-built batch (internal topics, compaction output in tests)."""
        data = bytearray(batch)
        return self.append(data, [parse_header(data, 0)])

    def _maybe_roll(self, incoming: int) -> None:
        active = self.active
        if active.size == 0:
            return
        too_big = active.size + incoming > int(self.config("segment.bytes"))
        age_ms = (time.time() - active.created) * 1000
        too_old = age_ms > int(self.config("segment.ms"))
        if too_big or too_old:
            self.roll()

    def roll(self) -> Segment:
        """Close the active segment (fsync it, persist its indexes) and start a new one."""
        old = self.active
        if old.size == 0:
            return old
        os.fsync(old.fd)
        old.write_indexes()
        old.closed_for_writes = True
        segment = Segment(self.directory, old.next_offset, int(self.config("index.interval.bytes")))
        self.segments.append(segment)
        return segment

    def maybe_roll_by_time(self) -> None:
        active = self.active
        if active.size and (time.time() - active.created) * 1000 > int(self.config("segment.ms")):
            self.roll()

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, *, upper: int | None = None) -> bytes:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``.

        At least one batch is returned when any is available, even if larger than
        ``max_bytes`` (as Kafka does, so consumers always make progress). Batches at or
        after ``upper`` (default: the high watermark) are not returned.
        """
        limit = self.high_watermark if upper is None else upper
        if offset == limit:
            return b""
        if offset < self.log_start_offset or offset > limit:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.log_start_offset}, {limit}] of "
                f"{self.topic}-{self.partition}"
            )
        index = bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1
        while index < len(self.segments):
            segment = self.segments[index]
            found = segment.position_for(offset)
            if found is not None:
                return self._read_from(segment, found[0], found[1], max_bytes, limit)
            index += 1
        return b""

    def _read_from(
        self, segment: Segment, position: int, first: BatchHeader, max_bytes: int, limit: int
    ) -> bytes:
        if first.base_offset >= limit:
            return b""
        want = max(min(max_bytes, segment.size - position), first.size)
        data = segment.read_at(position, want)
        # Cut to whole batches below the limit.
        end = 0
        while end + HEADER_SIZE <= len(data):
            header = parse_header(data, end)
            if header.base_offset >= limit or end + header.size > len(data):
                break
            end += header.size
        return data[:end] if end != len(data) else data

    async def wait_for_data(self, timeout: float) -> None:
        """Wait until an append happens or ``timeout`` seconds pass."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(future, timeout)

    def new_data_future(self) -> asyncio.Future[None]:
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
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            start = segment.position_for_timestamp(timestamp)
            for position, header in segment.iter_batches(start):
                if header.max_timestamp < timestamp or header.last_offset < self.log_start_offset:
                    continue
                if header.base_offset >= self.high_watermark:
                    return None
                raw = segment.read_at(position, header.size)
                for record in decode_records(raw):
                    if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                        return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        best: tuple[int, int] | None = None
        for segment in self.segments:
            for position, header in segment.iter_batches():
                if best is None or header.max_timestamp > best[1]:
                    raw = segment.read_at(position, header.size)
                    for record in decode_records(raw):
                        if best is None or record.timestamp > best[1]:
                            best = (record.offset, record.timestamp)
        return best

    # ------------------------------------------------------------------ deletion

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset (DeleteRecords); returns the new low watermark."""
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"cannot delete before {offset}: high watermark is {self.high_watermark}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._persist_log_start()
            self.delete_segments_below_start()
        return self.log_start_offset

    def _persist_log_start(self) -> None:
        tmp = self.directory / (LOG_START_FILE + ".tmp")
        tmp.write_text(f"{self.log_start_offset}\n")
        os.replace(tmp, self.directory / LOG_START_FILE)

    def delete_segments_below_start(self) -> int:
        deleted = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= self.log_start_offset:
            self.segments.pop(0).delete()
            deleted += 1
        return deleted

    def delete_oldest_segment(self) -> None:
        """Drop the oldest closed segment (retention) and move the log start past it."""
        if len(self.segments) < 2:
            return
        segment = self.segments.pop(0)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self._persist_log_start()
        segment.delete()

    def replace_segments(self, old: list[Segment], new: list[Segment]) -> None:
        """Swap closed segments for rewritten ones (the log cleaner)."""
        first = self.segments.index(old[0])
        self.segments[first : first + len(old)] = new

    # ------------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        os.fsync(self.active.fd)
        self.dirty = False

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def close_cleanly(self) -> None:
        """Flush and persist the active segment's indexes (recovery scan is then skipped)."""
        active = self.active
        if active.fd >= 0:
            os.fsync(active.fd)
        self.close()

    def segment_files(self) -> list[str]:
        return [segment_name(s.base_offset, ".log") for s in self.segments]
