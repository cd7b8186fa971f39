"""A partition's history of transactions for the read_committed tests of the remote tier and
the Spark source: plain records, committed and aborted transactions written side by side
(their batches interleave, and transactions span segment rolls, so an aborted
transaction's records and its ABORT marker land in different segments), then a transaction
left open and plain records after it. With tests/support/tiering.py's topic settings most
of the history leaves the broker's disk, and the open transaction keeps the rest local.

Records are tagged by the start of their value (``plain-``, ``commit-``, ``abort-``,
``open-``): what a read_committed reader must see follows from the tags and the offsets a
read_uncommitted reader sees.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

FILLER = b"x" * 200
PLAIN, COMMIT, ABORT, OPEN = b"plain-", b"commit-", b"abort-", b"open-"


@dataclass(frozen=True)
class History:
    """What was written, by tag."""

    plain: tuple[bytes, ...]
    """Plain records before the open transaction."""
    committed: tuple[bytes, ...]
    aborted: tuple[bytes, ...]
    open: tuple[bytes, ...]
    tail: tuple[bytes, ...]
    """Plain records after the open transaction began (above the last stable offset)."""

    def all(self) -> set[bytes]:
        return {*self.plain, *self.committed, *self.aborted, *self.open, *self.tail}


def value(tag: bytes, n: int) -> bytes:
    return tag + b"%d|" % n + FILLER


def _producer(bootstrap: str, **extra: object) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 4000,
            "log_level": 0,  # a producer left open outlives the broker of its test
            **extra,
        }
    )


def write_history(
    bootstrap: str, topic: str, *, rounds: int = 8, per_round: int = 100, tail: int = 600
) -> tuple[History, Producer]:
    """Write the history to partition 0; returns it and the producer whose transaction is
    still open (close it with ``abort_transaction`` when done; its timeout is 10 minutes)."""
    plain = _producer(bootstrap)
    committer = _producer(bootstrap, **{"transactional.id": f"commit-{uuid.uuid4().hex}"})
    aborter = _producer(bootstrap, **{"transactional.id": f"abort-{uuid.uuid4().hex}"})
    opener = _producer(
        bootstrap,
        **{"transactional.id": f"open-{uuid.uuid4().hex}", "transaction.timeout.ms": 600_000},
    )
    for p in (committer, aborter, opener):
        p.init_transactions(30)
    written: dict[bytes, list[bytes]] = {PLAIN: [], COMMIT: [], ABORT: [], OPEN: []}
    n = 0
    for _ in range(rounds):
        committer.begin_transaction()
        aborter.begin_transaction()
        for i in range(per_round):
            for producer, tag in ((committer, COMMIT), (aborter, ABORT), (plain, PLAIN)):
                v = value(tag, n)
                n += 1
                producer.produce(topic, value=v, partition=0)
                written[tag].append(v)
            if i % 20 == 19:  # batches of the three interleave in the log
                for producer in (committer, aborter, plain):
                    producer.flush(30)
        plain.flush(30)
        committer.commit_transaction(30)
        aborter.abort_transaction(30)
    opener.begin_transaction()
    for _ in range(50):
        v = value(OPEN, n)
        n += 1
        opener.produce(topic, value=v, partition=0)
        written[OPEN].append(v)
    assert opener.flush(30) == 0
    after = []
    for _ in range(tail):
        v = value(PLAIN, n)
        n += 1
        plain.produce(topic, value=v, partition=0)
        after.append(v)
    assert plain.flush(30) == 0
    history = History(
        tuple(written[PLAIN]),
        tuple(written[COMMIT]),
        tuple(written[ABORT]),
        tuple(written[OPEN]),
        tuple(after),
    )
    return history, opener


def read_partition(
    bootstrap: str, topic: str, isolation: str, timeout: float = 90
) -> tuple[list[tuple[int, bytes]], int]:
    """Partition 0 from offset 0 until end-of-partition (the high watermark, or with
    read_committed the last stable offset): (offset, value) of every record and the offset
    end-of-partition was reported at. Retriable errors (the object store was slow) are
    retried."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-read-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "fetch.max.bytes": 100_000,
            "message.max.bytes": 100_000,
            "max.partition.fetch.bytes": 50_000,
            "log_level": 0,
        }
    )
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return got, int(msg.offset() or 0)
                    continue
                got.append((int(msg.offset() or 0), bytes(msg.value() or b"")))
    finally:
        consumer.close()
    raise TimeoutError(f"{topic}: no end of partition within {timeout} s ({len(got)} records)")


def expected_committed(
    uncommitted: Sequence[tuple[int, bytes]], history: History
) -> list[tuple[int, bytes]]:
    """What read_committed must return, given every record at its offset: the plain and
    committed records below the first record of the open transaction (the LSO)."""
    lso = last_stable_offset(uncommitted, history)
    return [(o, v) for o, v in uncommitted if o < lso and v.startswith((PLAIN, COMMIT))]


def last_stable_offset(uncommitted: Sequence[tuple[int, bytes]], history: History) -> int:
    """The offset of the open transaction's first record."""
    open_values = set(history.open)
    return min(o for o, v in uncommitted if v in open_values)
