"""Transactions in a partition log: markers, the aborted-transaction index, the LSO.

Kafka splits this between ``ProducerStateManager`` (open transactions, the first unstable
offset), ``TransactionIndex`` (one ``.txnindex`` per segment) and the log cleaner's
``CleanedTransactionMetadata``; here the per-producer state is in ``producer_state.py``
(kept in its snapshot), the entries of a segment's ``.txnindex`` hang on the
:class:`~dataplane.log.segment.Segment` (``aborted``), and this module holds what
connects them:

- :func:`apply_marker`: a written control batch ends its producer's open transaction; an
  ABORT yields the :class:`~wire.transactions.AbortedTxn` for the segment the marker is in,
  ``lastStableOffset`` being the first offset of the oldest transaction still open, else
  one past the marker (Kafka's). Used by the leader (``PartitionLog.append_marker``), the
  follower (``append_replica``, via :func:`record_batches`) and the loader's replay.
- :func:`collect_aborted`: the aborted transactions overlapping ``[fetch_offset, upper)``
  from the in-memory entries of the local segments, stopping as Kafka does at the first
  entry whose ``lastStableOffset`` >= ``upper`` (every transaction that began below
  ``upper`` had ended by then).
- :func:`load_txn_indexes` / :func:`rebuild_txn_indexes`: on load every ``.txnindex`` is
  read (a torn trailing entry dropped, entries outside the segment's offsets dropped);
  entries of markers at or after the producer-state replay's start are taken from the
  replay instead, so a missing or torn file of a segment the replay covers comes back
  exactly; a torn file below it makes the replay start earlier (see ``loader.py``).
  Files that differ from the result are rewritten atomically.
- :func:`cut_txn_index`: truncation drops entries with ``lastOffset`` >= the cut.
- :class:`AbortedBatches`: the cleaner's walk, telling which transactional data batches
  belong to aborted transactions.
- :func:`read_txn_index`: a segment's entries from its file (tests and tools; the remote
  tier uploads its own index per segment, built with :func:`collect_aborted`).

Durability: a ``.txnindex`` append is not fsynced by itself; a segment's seal fsyncs it
before writing the segment's ``.index`` and the roll's producer snapshot comes after that,
so every segment wholly below the newest snapshot has a durable ``.txnindex``, and the
replay from that snapshot rebuilds the entries after it.

Imports only ``segment`` and ``producer_state`` of this package.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from dataplane.log.producer_state import ProducerStateTable
from dataplane.log.segment import Segment
from wire.errors import CorruptRecord, UnsupportedCompression
from wire.record_batch import CONTROL_BIT, BatchHeader
from wire.transactions import (
    TXN_INDEX_ENTRY_SIZE,
    AbortedRanges,
    AbortedTxn,
    ControlType,
    Marker,
    decode_marker,
    parse_txn_index,
)

log = logging.getLogger(__name__)

__all__ = [
    "AbortedBatches",
    "apply_marker",
    "collect_aborted",
    "cut_txn_index",
    "load_txn_indexes",
    "read_marker",
    "read_txn_index",
    "rebuild_txn_indexes",
    "record_batches",
]


def apply_marker(
    producers: ProducerStateTable,
    header: BatchHeader,
    marker: Marker,
    now_ms: int,
    high_watermark: int,
) -> AbortedTxn | None:
    """Update producer state for a written control batch; the index entry of an ABORT
    that ended an open transaction, else None (a marker with no data here ends nothing,
    as in Kafka, and needs no entry)."""
    completed = producers.record_marker(
        header, marker.coordinator_epoch, marker.type is ControlType.ABORT, now_ms
    )
    if completed is None:
        return None
    producers.add_unreplicated(completed, high_watermark)
    if not completed.aborted:
        return None
    return AbortedTxn(
        completed.producer_id,
        completed.first_offset,
        completed.last_offset,
        producers.stable_offset_after(completed),
    )


def read_marker(
    batch: bytes | bytearray | memoryview, header: BatchHeader, where: str
) -> Marker | None:
    """The marker of a stored control batch (``header.position`` is its place in
    ``batch``); None, logged, when it does not decode (its CRC was valid: a broker bug)."""
    try:
        return decode_marker(batch, header)
    except (CorruptRecord, UnsupportedCompression) as exc:
        log.error("%s: control batch at offset %d ignored: %s", where, header.base_offset, exc)
        return None


def record_batches(
    producers: ProducerStateTable,
    headers: list[BatchHeader],
    view: memoryview,
    *,
    segment_for: Callable[[int], Segment],
    now_ms: int,
    high_watermark: int,
) -> None:
    """Producer state for batches a follower copied (``headers`` positioned in ``view``):
    data batches as usual, control batches decoded; ABORT entries go to the segment each
    marker landed in (``segment_for(offset)``)."""
    for header in headers:
        if not header.attributes & CONTROL_BIT:
            producers.record(header, now_ms)
            continue
        marker = read_marker(view, header, "replicated batch")
        if marker is None:
            continue
        entry = apply_marker(producers, header, marker, now_ms, high_watermark)
        if entry is not None:
            segment_for(header.base_offset).append_aborted(entry)


def collect_aborted(segments: Sequence[Segment], fetch_offset: int, upper: int) -> list[AbortedTxn]:
    """Entries overlapping ``[fetch_offset, upper)`` (``lastOffset`` >= ``fetch_offset``,
    ``firstOffset`` < ``upper``) from ``segments``, which start with the one holding
    ``fetch_offset``. Stops at the first entry whose ``lastStableOffset`` >= ``upper``."""
    found: list[AbortedTxn] = []
    for segment in segments:
        for entry in segment.aborted:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper:
                found.append(entry)
            if entry.last_stable_offset >= upper:
                return found
    return found


def cut_txn_index(segment: Segment, offset: int) -> None:
    """Truncation at ``offset``: drop the entries of markers at or after it (the file is
    rewritten atomically, before the data is cut)."""
    kept = [e for e in segment.aborted if e.last_offset < offset]
    if len(kept) != len(segment.aborted):
        segment.write_aborted(kept)


def read_txn_index(path: Path) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file ([] when there is none); a torn trailing entry is
    dropped. CorruptRecord for an entry of an unknown version."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    return parse_txn_index(raw)


def load_txn_indexes(segments: list[Segment]) -> tuple[set[int], int | None]:
    """Read every segment's ``.txnindex`` into ``segment.aborted``.

    Returns the ids of the segments whose file must be rewritten (torn, unreadable, or
    with entries outside the segment) and the base offset of the first segment whose file
    was torn or unreadable (its entries must come from a replay), None if none was.
    """
    stale: set[int] = set()
    damaged: int | None = None
    for segment in segments:
        path = segment.txn_index_path
        torn = False
        try:
            raw = path.read_bytes()
            entries = parse_txn_index(raw)
            torn = len(raw) % TXN_INDEX_ENTRY_SIZE != 0
        except FileNotFoundError:
            continue
        except (OSError, CorruptRecord) as exc:
            log.warning("%s: %s", path, exc)
            raw, entries, torn = b"", [], True
        if torn:
            log.warning("%s: torn or unreadable; rebuilding it from the log", path)
            if damaged is None:
                damaged = segment.base_offset
        inside = [e for e in entries if segment.base_offset <= e.last_offset < segment.next_offset]
        if torn or not raw or len(inside) != len(entries):
            stale.add(id(segment))
        segment.aborted = inside
    return stale, damaged


def rebuild_txn_indexes(
    segments: list[Segment],
    start: int,
    replayed: list[tuple[Segment, AbortedTxn]],
    stale: set[int],
) -> None:
    """After the loader's replay from ``start``: entries of markers at or after ``start``
    are the replay's (``replayed``), earlier ones the files'. A file's entry for a
    transaction that began before ``start`` and that the replay did not produce is kept
    (a replay from the log start without a snapshot cannot know what was open before it).
    Files that differ, and the ``stale`` ones, are rewritten."""
    by_segment: dict[int, list[AbortedTxn]] = {}
    for segment, entry in replayed:
        by_segment.setdefault(id(segment), []).append(entry)
    markers = {entry.last_offset for _, entry in replayed}
    for segment in segments:
        if segment.next_offset <= start and id(segment) not in stale:
            continue
        kept = [
            e
            for e in segment.aborted
            if e.last_offset < start or (e.first_offset < start and e.last_offset not in markers)
        ]
        entries = sorted(kept + by_segment.get(id(segment), []), key=lambda e: e.last_offset)
        if entries != segment.aborted or id(segment) in stale:
            log.info(
                "%s: transaction index rebuilt (%d entries)", segment.txn_index_path, len(entries)
            )
            segment.write_aborted(entries)


class AbortedBatches:
    """The log cleaner's view of aborted transactions: which transactional data batches
    belong to one (Kafka's ``CleanedTransactionMetadata``, without marker removal: markers
    stay). The lookup is ``wire.transactions.AbortedRanges``, the one the Spark source uses."""

    def __init__(self, entries: Sequence[AbortedTxn]) -> None:
        self._ranges = AbortedRanges(entries)

    def is_aborted(self, header: BatchHeader) -> bool:
        """True for a transactional data batch of an aborted transaction."""
        return (
            header.is_transactional
            and not header.is_control
            and self._ranges.covers(header.producer_id, header.base_offset)
        )
