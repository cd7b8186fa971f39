"""Keys and values of ``__transaction_state``, in Apache Kafka's own formats.

Key (TransactionLogKey v0)::

    version int16 (0) | transactionalId string

Value (TransactionLogValue; v0 classic, v1 flexible with tagged fields)::

    version int16 | producerId int64 | producerEpoch int16 | transactionTimeoutMs int32 |
    transactionStatus int8 | transactionPartitions nullable array of
        [topic string | partitionIds array of int32] |
    transactionLastUpdateTimestampMs int64 | transactionStartTimestampMs int64
    v1 tagged fields: 0 previousProducerId int64, 1 nextProducerId int64,
                      2 clientTransactionVersion int16 (read and ignored here)

transactionStatus is the state's id (``TxnState``). A null value (tombstone) removes an
expired transactional id. Sluice writes key v0 with value v0, as Kafka 4 does for
clients on transaction protocol version 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from dataplane.groups.records import RecordReader, RecordWriter
from dataplane.transactions.state import TxnState
from wire.errors import CorruptRecord

WHAT = "__transaction_state"


@dataclass(frozen=True, slots=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int


def encode_key(transactional_id: str) -> bytes:
    w = RecordWriter(0)
    w.string(transactional_id)
    return bytes(w.out)


def decode_key(data: bytes) -> str:
    r = RecordReader(data, what=WHAT)
    version = r.i16()
    if version != 0:
        raise CorruptRecord(f"{WHAT} key of unknown version {version}")
    return r.string()


def encode_value(value: TxnValue) -> bytes:
    w = RecordWriter(0)
    w.i64(value.producer_id)
    w.i16(value.producer_epoch)
    w.i32(value.timeout_ms)
    w.i8(int(value.state))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(partition)
    w.i32(len(by_topic))
    for topic, partitions in by_topic.items():
        w.string(topic)
        w.i32(len(partitions))
        for partition in partitions:
            w.i32(partition)
    w.i64(value.last_update_ms)
    w.i64(value.start_ms)
    return bytes(w.out)


def decode_value(data: bytes) -> TxnValue:
    version = RecordReader(data, what=WHAT).i16()
    if version not in (0, 1):
        raise CorruptRecord(f"{WHAT} value of unknown version {version}")
    r = RecordReader(data, flexible=version >= 1, what=WHAT)
    r.i16()
    producer_id = r.i64()
    epoch = r.i16()
    timeout = r.i32()
    status = r.i8()
    try:
        state = TxnState(status)
    except ValueError as exc:
        raise CorruptRecord(f"{WHAT} value with unknown status {status}") from exc
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(r.array_length(), 0)):
        topic = r.string()
        for _ in range(max(r.array_length(), 0)):
            partitions.add((topic, r.i32()))
        r.skip_tagged_fields()
    last_update = r.i64()
    start = r.i64()
    return TxnValue(producer_id, epoch, timeout, state, frozenset(partitions), last_update, start)
