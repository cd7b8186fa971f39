"""Offsets committed inside a transaction (TxnOffsetCommit), pending until its marker.

TxnOffsetCommit writes the offsets to the group's ``__consumer_offsets`` partition as a
transactional batch of the producer (Kafka's format, so the topic reads as Kafka's); they
are not visible to OffsetFetch until the transaction's COMMIT marker reaches that
partition, and are dropped by its ABORT marker. The same happens on replay: a
transactional batch is held per producer and applied or dropped at its marker, so a
coordinator that loads the partition after a failover ends where the old one would have.
"""

from __future__ import annotations

from dataclasses import dataclass

from dataplane.groups.offsets import CommittedOffset, OffsetStore


@dataclass(frozen=True, slots=True)
class PendingOffset:
    group: str
    topic: str
    partition: int
    value: CommittedOffset | None
    """None: a tombstone."""


class PendingTxnOffsets:
    """Per ``__consumer_offsets`` partition and producer id, the offsets awaiting a marker."""

    def __init__(self) -> None:
        self.pending: dict[tuple[int, int], list[PendingOffset]] = {}

    def add(self, partition: int, producer_id: int, offsets: list[PendingOffset]) -> None:
        self.pending.setdefault((partition, producer_id), []).extend(offsets)

    def complete(
        self, partition: int, producer_id: int, commit: bool, store: OffsetStore
    ) -> list[PendingOffset]:
        """Apply (commit) or drop the producer's pending offsets of ``partition``."""
        done = self.pending.pop((partition, producer_id), [])
        if commit:
            for p in done:
                if p.value is None:
                    store.delete(p.group, p.topic, p.partition)
                else:
                    store.put(p.group, p.topic, p.partition, p.value)
        return done

    def drop_partition(self, partition: int) -> None:
        for key in [k for k in self.pending if k[0] == partition]:
            del self.pending[key]
