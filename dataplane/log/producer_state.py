"""Idempotent-producer state of one partition: sequence checks and deduplication.

For each producer id the partition remembers its epoch and the last few batches it
wrote (first and last sequence, first and last offset). A retried batch that matches one
of them is acknowledged with its original offsets and not written again; a gap in the
sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.
The state is derived from the log: on start-up it is loaded from the newest snapshot
(written when a segment rolls and at clean shutdown) and the batches after it are
replayed; without a snapshot every batch header is replayed.

Transactions (Kafka's ``ProducerStateManager``, transactional part): a transactional data
batch opens its producer's transaction at its base offset if none is open (``ongoing``,
kept in first-offset order); a control batch (COMMIT / ABORT marker) closes it and returns
a :class:`CompletedTxn`. A marker from an older producer epoch is INVALID_PRODUCER_EPOCH, one
from an older coordinator epoch TRANSACTION_COORDINATOR_FENCED; a non-transactional batch
from a producer with an open transaction is INVALID_TXN_STATE. Completed transactions whose
marker is not yet below the high watermark stay in ``unreplicated``: with ``ongoing`` they
hold the last stable offset down (:meth:`ProducerStateTable.first_unstable_offset`).

Snapshot file ``OFFSET.snapshot`` (OFFSET: the log end offset it was taken at, 20 digits)::

    8 hex digits of the CRC-32C of the rest, newline, then JSON
    {"version": 2, "producers": [[pid, epoch, lastTimestamp, [[firstSeq, lastSeq,
                                   firstOffset, lastOffset, timestamp], ...],
                                  txnFirstOffset, coordinatorEpoch], ...]}

``txnFirstOffset`` is the first offset of the producer's open transaction (-1: none) and
``coordinatorEpoch`` the coordinator epoch of its last marker (-1: none). Version 1 (the
same without the last two fields) still loads. ``unreplicated`` is not in the snapshot,
as in Kafka.

Batches behind a refused one: when a batch that was next in its producer's sequence is
refused unwritten with a retriable error — a write that failed for lack of space
(``LogDirFull``, ``noting_refusals``), or a produce this replica answered
NOT_LEADER_OR_FOLLOWER just before it became the leader (``note_refused``: KIP-951's leader
hints send clients to the new leader before it has applied its leadership), or one it
answered NOT_ENOUGH_REPLICAS (acks=all with the ISR below min.insync.replicas) — it is noted,
and until that batch comes again every later one of the same producer and epoch is refused
alike, not answered OUT_OF_ORDER_SEQUENCE. librdkafka answers that error (for any batch but
the first in flight) by bumping its epoch and re-sending everything it has in flight on
every partition under new sequence numbers, which duplicates what was written but not yet
acknowledged (a rolling restart's test and the soak found both). The data directory's
refusal window (``log.dir.full.backoff.ms``) covers the requests right behind a full disk;
this covers one that arrives after it. At most ``MAX_REFUSED`` producers are noted per
partition.
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import crc32c

from wire.errors import (
    BrokerError,
    InvalidProducerEpoch,
    InvalidTxnState,
    LogDirFull,
    NotEnoughReplicas,
    NotLeaderOrFollower,
    OutOfOrderSequence,
    TransactionCoordinatorFenced,
)
from wire.record_batch import NO_SEQUENCE, TRANSACTIONAL_BIT, BatchHeader

SEQUENCE_MODULUS = 0x80000000
MAX_REFUSED = 10_000
"""Producers whose refused batch a partition remembers (the oldest noted is forgotten)."""
SNAPSHOT_VERSION = 2
REFUSALS: dict[type[BrokerError], str] = {
    LogDirFull: "by a full disk",
    NotLeaderOrFollower: "while this replica was not the leader",
    NotEnoughReplicas: "while the ISR was below min.insync.replicas",
}
"""The retriable refusals a later batch is refused alike behind, and how they are named."""


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
    txn_first_offset: int = -1
    """First offset of the producer's open transaction on this partition, -1 when none."""
    coordinator_epoch: int = -1
    """Coordinator epoch of the last transaction marker written for the producer."""

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def written(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with these sequences (a retry of it is a duplicate)."""
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended on this partition."""

    producer_id: int
    first_offset: int
    last_offset: int
    """Offset of the marker."""
    aborted: bool


class ProducerStateTable:
    """Per-partition producer table. ``check`` before append, ``record`` after (data
    batches); ``check_marker`` / ``record_marker`` for control batches."""

    def __init__(self, max_entries: int = 5) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.max_entries = max_entries
        self.ongoing: dict[int, int] = {}
        """Producer id -> first offset of its open transaction, in first-offset order."""
        self.unreplicated: list[CompletedTxn] = []
        """Completed transactions whose marker is at or above the high watermark."""
        self.refused: dict[int, tuple[int, int, type[BrokerError]]] = {}
        """Producer id -> (epoch, sequence) of its next batch, refused unwritten, and the
        refusal (a key of ``REFUSALS``)."""

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a batch; return the original metadata when it is a duplicate."""
        pid = header.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        if pid in self.refused:
            self._hold_back(header, entry)
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
        elif first != NO_SEQUENCE:  # batches without a sequence (coordinator writes) never dedupe
            if (meta := entry.written(first, last)) is not None:
                return meta
            expected = (entry.last_seq + 1) % SEQUENCE_MODULUS
            if entry.last_seq != NO_SEQUENCE and first != expected:
                raise OutOfOrderSequence(
                    f"producer {pid} sent sequence {first}, expected {expected}"
                )
        if entry.txn_first_offset >= 0 and not header.attributes & TRANSACTIONAL_BIT:
            raise InvalidTxnState(
                f"producer {pid} has a transaction open since offset {entry.txn_first_offset} "
                "and sent a non-transactional batch: end the transaction first"
            )
        return None

    def record(self, header: BatchHeader, now_ms: int | None = None) -> None:
        """Remember an appended batch (its header carries the assigned offsets).

        ``now_ms`` is the broker's clock at append; replays at load pass the load time.
        """
        pid = header.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = ProducerEntry(header.producer_epoch, deque(maxlen=self.max_entries))
            self.producers[pid] = entry
        elif header.producer_epoch != entry.epoch:
            if header.producer_epoch < entry.epoch:
                return
            entry.epoch = header.producer_epoch  # a transaction stays open across the bump
            entry.batches.clear()
        if header.attributes & TRANSACTIONAL_BIT and entry.txn_first_offset < 0:
            entry.txn_first_offset = header.base_offset
            self.ongoing[pid] = header.base_offset
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

    def _expected(self, header: BatchHeader, entry: ProducerEntry | None) -> int:
        """The sequence this producer's next batch must start at (header's epoch)."""
        if entry is None or header.producer_epoch != entry.epoch or entry.last_seq == NO_SEQUENCE:
            return 0
        return (entry.last_seq + 1) % SEQUENCE_MODULUS

    def _hold_back(self, header: BatchHeader, entry: ProducerEntry | None) -> None:
        """LogDirFull for a batch behind its producer's refused one (see the module)."""
        pid = header.producer_id
        epoch, sequence, refusal = self.refused[pid]
        if header.producer_epoch != epoch or self._expected(header, entry) != sequence:
            del self.refused[pid]  # a new epoch, or the refused batch is written
            return
        first = header.base_sequence
        if first in (sequence, NO_SEQUENCE):
            return
        if entry is not None and entry.written(first, header.last_sequence) is not None:
            return  # a retry of a batch written before: answered as the duplicate it is
        raise refusal(
            f"producer {pid}: its batch at sequence {sequence} was refused {REFUSALS[refusal]}; "
            f"this one (sequence {first}) is refused until that one is written: retry"
        )

    @contextlib.contextmanager
    def noting_refusals(self, headers: list[BatchHeader]) -> Iterator[None]:
        """Around an append of ``headers``: when it fails with LogDirFull, note the first
        batch that was next in its producer's sequence."""
        try:
            yield
        except LogDirFull:
            self.note_refused(headers, LogDirFull)
            raise

    def note_refused(self, headers: list[BatchHeader], refusal: type[BrokerError]) -> None:
        """``headers`` (one produce's batches for this partition) were refused unwritten
        with ``refusal``: note the first when it was next in its producer's sequence."""
        header = headers[0]
        pid = header.producer_id
        if pid < 0 or header.base_sequence == NO_SEQUENCE:
            return
        if header.base_sequence == self._expected(header, self.producers.get(pid)):
            self.refused.pop(pid, None)  # the newest note last, the oldest forgotten first
            self.refused[pid] = (header.producer_epoch, header.base_sequence, refusal)
            if len(self.refused) > MAX_REFUSED:
                del self.refused[next(iter(self.refused))]

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a marker before it is written (leader side)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"transaction marker for producer {producer_id} has epoch {producer_epoch}, "
                f"older than its current epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFenced(
                f"transaction marker for producer {producer_id} comes from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}: a newer "
                "transaction coordinator took over; the old one must stop"
            )

    def record_marker(
        self, header: BatchHeader, coordinator_epoch: int, aborted: bool, now_ms: int
    ) -> CompletedTxn | None:
        """Remember a written control batch (its header carries the assigned offset): the
        producer's open transaction, if any, is complete. A newer epoch becomes the
        producer's; an older one (replication, replay) does not lower it."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = ProducerEntry(header.producer_epoch, deque(maxlen=self.max_entries))
            self.producers[pid] = entry
        elif header.producer_epoch > entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp_ms = now_ms
        first = entry.txn_first_offset
        if first < 0:
            return None  # a marker without data here: Kafka writes it, nothing ends
        entry.txn_first_offset = -1
        self.ongoing.pop(pid, None)
        return CompletedTxn(pid, first, header.base_offset, aborted)

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """The last stable offset once ``completed`` ended, ignoring the high watermark:
        the first offset of the oldest transaction still open, else one past the marker
        (the ``lastStableOffset`` of a transaction index entry, as Kafka)."""
        return next(iter(self.ongoing.values()), completed.last_offset + 1)

    def add_unreplicated(self, completed: CompletedTxn, high_watermark: int) -> None:
        if completed.last_offset >= high_watermark:
            self.unreplicated.append(completed)

    def prune_unreplicated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is now below the high watermark."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]

    def first_unstable_offset(self, high_watermark: int) -> int:
        """First offset of the oldest transaction open, or completed with its marker at or
        above ``high_watermark``; -1 when there is none."""
        first = next(iter(self.ongoing.values()), -1)
        if self.unreplicated:
            self.prune_unreplicated(high_watermark)
            for txn in self.unreplicated:
                if first < 0 or txn.first_offset < first:
                    first = txn.first_offset
        return first

    def touch_all(self, now_ms: int) -> None:
        """Restart every producer's idle clock (after loading: downtime is not idleness)."""
        for entry in self.producers.values():
            entry.last_timestamp_ms = max(entry.last_timestamp_ms, now_ms)

    def expire(self, now_ms: int, max_idle_ms: int) -> None:
        stale = [
            p
            for p, e in self.producers.items()
            if now_ms - e.last_timestamp_ms > max_idle_ms and e.txn_first_offset < 0
        ]
        for pid in stale:
            del self.producers[pid]

    def last_batch_offsets(self) -> dict[int, int]:
        """Last offset of every producer's newest batch (the log cleaner keeps those)."""
        return {pid: e.batches[-1].last_offset for pid, e in self.producers.items() if e.batches}

    def snapshot(self) -> bytes:
        """The table as a snapshot file's content."""
        doc = {
            "version": SNAPSHOT_VERSION,
            "producers": [
                [
                    pid,
                    e.epoch,
                    e.last_timestamp_ms,
                    [
                        [m.first_seq, m.last_seq, m.first_offset, m.last_offset, m.timestamp]
                        for m in e.batches
                    ],
                    e.txn_first_offset,
                    e.coordinator_epoch,
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
            version = doc.get("version")
            if version not in (1, SNAPSHOT_VERSION):
                return False
            producers: dict[int, ProducerEntry] = {}
            for row in doc["producers"]:
                pid, epoch, last_ts, batches = row[:4]
                txn_first, coordinator_epoch = row[4:6] if version >= 2 else (-1, -1)
                entry = ProducerEntry(
                    int(epoch),
                    deque(maxlen=self.max_entries),
                    int(last_ts),
                    int(txn_first),
                    int(coordinator_epoch),
                )
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
        open_txns = sorted(
            (e.txn_first_offset, p) for p, e in producers.items() if e.txn_first_offset >= 0
        )
        self.ongoing = {pid: first for first, pid in open_txns}
        self.unreplicated = []
        return True
