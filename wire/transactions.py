"""Transactions on the wire and on disk: control batches (commit / abort markers) and the
aborted-transaction index of a segment, in Apache Kafka's formats. No I/O.

A control batch is a record batch with attributes CONTROL_BIT | TRANSACTIONAL_BIT, the
transaction's producer id and epoch, baseSequence -1 and exactly one record::

    key    int16 version (0) | int16 type        0 = ABORT, 1 = COMMIT
    value  int16 version (0) | int32 coordinatorEpoch

Consumers skip control batches; they end the producer's open transaction on the partition.

Aborted-transaction index (``B.txnindex`` beside ``B.log``, Kafka's ``TransactionIndex``;
also the ``.txnindex`` object uploaded with a segment): one 34-byte entry per transaction
that ended in ABORT with its marker in segment B, in marker order, big-endian::

    0   2   version (0)
    2   8   producerId
    10  8   firstOffset          offset of the transaction's first batch on the partition
    18  8   lastOffset           offset of the ABORT marker
    26  8   lastStableOffset     the partition's LSO once the marker was written

A read_committed fetch returns, for the range it serves, every (producerId, firstOffset)
whose entry has lastOffset >= the fetch offset and firstOffset < the end of the range; the
consumer drops that producer's batches from firstOffset up to its ABORT marker.
"""

from __future__ import annotations

import bisect
import enum
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from wire.errors import CorruptRecord
from wire.record_batch import (
    CONTROL_BIT,
    NO_SEQUENCE,
    TRANSACTIONAL_BIT,
    BatchHeader,
    decode_records,
    encode_batch,
)

CONTROL_KEY = struct.Struct(">hh")
MARKER_VALUE = struct.Struct(">hi")
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
TXN_INDEX_ENTRY_SIZE = TXN_INDEX_ENTRY.size  # 34


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Marker:
    """The one record of a control batch."""

    type: ControlType
    coordinator_epoch: int


def encode_marker(
    producer_id: int,
    producer_epoch: int,
    control: ControlType,
    coordinator_epoch: int,
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    leader_epoch: int = -1,
) -> bytes:
    """A control batch that ends ``producer_id``'s transaction with ``control``."""
    key = CONTROL_KEY.pack(0, int(control))
    value = MARKER_VALUE.pack(0, coordinator_epoch)
    return encode_batch(
        [(key, value)],
        base_offset=base_offset,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        attributes=CONTROL_BIT | TRANSACTIONAL_BIT,
        leader_epoch=leader_epoch,
    )


def decode_marker(batch: bytes | bytearray | memoryview, header: BatchHeader) -> Marker:
    """The marker of the control batch at ``header`` in ``batch``; CorruptRecord if it is
    not a well-formed control batch."""
    if not header.is_control:
        raise CorruptRecord(f"batch at offset {header.base_offset} is not a control batch")
    start = header.position
    records = decode_records(bytes(batch[start : start + header.size]))
    if not records or records[0].key is None or len(records[0].key) < CONTROL_KEY.size:
        raise CorruptRecord(f"control batch at offset {header.base_offset} has no control key")
    return marker_of(records[0].key, records[0].value)


def marker_of(key: bytes, value: bytes | None) -> Marker:
    """The marker of a control record already decoded to its key and value."""
    if len(key) < CONTROL_KEY.size:
        raise CorruptRecord("a control record without a control key")
    version, kind = CONTROL_KEY.unpack_from(key, 0)
    if version < 0 or kind not in (0, 1):
        raise CorruptRecord(f"a control record of unknown type {kind}")
    epoch = -1
    if value is not None and len(value) >= MARKER_VALUE.size:
        _, epoch = MARKER_VALUE.unpack_from(value, 0)
    return Marker(ControlType(kind), epoch)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return TXN_INDEX_ENTRY.pack(
            0, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def encode_txn_index(entries: list[AbortedTxn]) -> bytes:
    return b"".join(e.encode() for e in entries)


def parse_txn_index(raw: bytes | bytearray | memoryview) -> list[AbortedTxn]:
    """Entries of an index file; a torn trailing entry (a crash mid-append) is dropped,
    an entry of an unknown version is CorruptRecord."""
    whole = len(raw) - len(raw) % TXN_INDEX_ENTRY_SIZE
    out: list[AbortedTxn] = []
    for version, pid, first, last, lso in TXN_INDEX_ENTRY.iter_unpack(bytes(raw[:whole])):
        if version != 0:
            raise CorruptRecord(f"transaction index entry of unknown version {version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class AbortedRanges:
    """The records of aborted transactions, from the aborted-transaction entries overlapping
    a segment: a transactional data batch of producer P at offset o is aborted when an entry
    of P has ``firstOffset <= o < lastOffset`` (``lastOffset`` is its ABORT marker's). A
    producer has one transaction open at a time, so P's entries never overlap, and the
    answer does not depend on where a read starts (Kafka's consumer walks the entries in
    order from its fetch offset; the outcome is the same)."""

    def __init__(self, entries: Iterable[AbortedTxn]) -> None:
        spans: dict[int, list[tuple[int, int]]] = {}
        for entry in entries:
            spans.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
        self._firsts: dict[int, list[int]] = {}
        self._lasts: dict[int, list[int]] = {}
        for pid, pairs in spans.items():
            pairs.sort()
            self._firsts[pid] = [first for first, _ in pairs]
            self._lasts[pid] = [last for _, last in pairs]

    def __len__(self) -> int:
        return sum(len(firsts) for firsts in self._firsts.values())

    def covers(self, producer_id: int, offset: int) -> bool:
        """True when ``offset`` of ``producer_id`` is inside one of its aborted
        transactions."""
        firsts = self._firsts.get(producer_id)
        if not firsts:
            return False
        i = bisect.bisect_right(firsts, offset) - 1
        return i >= 0 and offset < self._lasts[producer_id][i]
