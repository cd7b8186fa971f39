"""Idempotent-producer state of one partition: sequence checks and deduplication.

For each producer id the partition remembers its epoch and the last few batches it
wrote (first and last sequence, first and last offset). A retried batch that matches one
of them is acknowledged with its original offsets and not written again; a gap in the
sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.
The state is derived from the log: on start-up it is loaded from the newest snapshot
(written when a segment rolls and at clean shutdown) and the batches after it are
replayed; without a snapshot every batch header is replayed.

Snapshot file ``OFFSET.snapshot`` (OFFSET: the log end offset it was taken at, 20 digits)::

    8 hex digits of the CRC-32C of the rest, newline, then JSON
    {"version": 1, "producers": [[pid, epoch, lastTimestamp, [[firstSeq, lastSeq,
                                   firstOffset, lastOffset, timestamp], ...]], ...]}
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field

import crc32c

from wire.errors import InvalidProducerEpoch, OutOfOrderSequence
from wire.record_batch import NO_SEQUENCE, BatchHeader

SEQUENCE_MODULUS = 0x80000000


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=5))
    last_timestamp_ms: int = 0
    """Broker time of the producer's last append (expiry); never a client timestamp, so
    a producer writing old CreateTime records is not expired while it is active."""

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


class ProducerStateTable:
    """Per-partition producer table. ``check`` before append, ``record`` after."""

    def __init__(self, max_entries: int = 5) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.max_entries = max_entries

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a batch; return the original metadata when it is a duplicate."""
        pid = header.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        first, last = header.base_sequence, header.last_sequence
        if entry is None:
            if first not in (0, NO_SEQUENCE):
                raise OutOfOrderSequence(
                    f"producer {pid} is unknown to this partition and starts at sequence "
                    f"{first}, expected 0"
                )
            return None
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {pid} epoch {header.producer_epoch} is older than {entry.epoch}"
            )
        if header.producer_epoch > entry.epoch:
            if first not in (0, NO_SEQUENCE):
                raise OutOfOrderSequence(
                    f"producer {pid} new epoch {header.producer_epoch} must start at sequence 0"
                )
            return None
        for meta in entry.batches:
            if meta.first_seq == first and meta.last_seq == last:
                return meta
        expected = (entry.last_seq + 1) % SEQUENCE_MODULUS
        if entry.last_seq != NO_SEQUENCE and first != expected:
            raise OutOfOrderSequence(f"producer {pid} sent sequence {first}, expected {expected}")
        return None

    def record(self, header: BatchHeader, now_ms: int | None = None) -> None:
        """Remember an appended batch (its header carries the assigned offsets).

        ``now_ms`` is the broker's clock at append; replays at load pass the load time.
        """
        pid = header.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = ProducerEntry(header.producer_epoch, deque(maxlen=self.max_entries))
            self.producers[pid] = entry
        elif header.producer_epoch < entry.epoch:
            return
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )
        entry.last_timestamp_ms = header.max_timestamp if now_ms is None else now_ms

    def touch_all(self, now_ms: int) -> None:
        """Restart every producer's idle clock (after loading: downtime is not idleness)."""
        for entry in self.producers.values():
            entry.last_timestamp_ms = max(entry.last_timestamp_ms, now_ms)

    def expire(self, now_ms: int, max_idle_ms: int) -> None:
        stale = [p for p, e in self.producers.items() if now_ms - e.last_timestamp_ms > max_idle_ms]
        for pid in stale:
            del self.producers[pid]

    def last_batch_offsets(self) -> dict[int, int]:
        """Last offset of every producer's newest batch (the log cleaner keeps those)."""
        return {pid: e.batches[-1].last_offset for pid, e in self.producers.items() if e.batches}

    def snapshot(self) -> bytes:
        """The table as a snapshot file's content."""
        doc = {
            "version": 1,
            "producers": [
                [
                    pid,
                    e.epoch,
                    e.last_timestamp_ms,
                    [
                        [m.first_seq, m.last_seq, m.first_offset, m.last_offset, m.timestamp]
                        for m in e.batches
                    ],
                ]
                for pid, e in self.producers.items()
            ],
        }
        body = json.dumps(doc, separators=(",", ":")).encode()
        return b"%08x\n" % crc32c.crc32c(body) + body

    def load_snapshot(self, raw: bytes) -> bool:
        """Replace the table with a snapshot; False (table unchanged) if it is damaged."""
        head, _, body = raw.partition(b"\n")
        try:
            if int(head, 16) != crc32c.crc32c(body):
                return False
            doc = json.loads(body)
            if doc.get("version") != 1:
                return False
            producers: dict[int, ProducerEntry] = {}
            for pid, epoch, last_ts, batches in doc["producers"]:
                entry = ProducerEntry(int(epoch), deque(maxlen=self.max_entries), int(last_ts))
                for first_seq, last_seq, first_off, last_off, ts in batches:
                    entry.batches.append(
                        BatchMetadata(
                            int(first_seq), int(last_seq), int(first_off), int(last_off), int(ts)
                        )
                    )
                producers[int(pid)] = entry
        except (ValueError, TypeError, KeyError):
            return False
        self.producers = producers
        return True
