"""Offsets committed inside a transaction (TxnOffsetCommit), pending until its marker.

TxnOffsetCommit writes the offsets to the group's ``__consumer_offsets`` partition as a
transactional batch of the producer (Kafka's format, so the topic reads as Kafka's); they
are not visible to OffsetFetch until the transaction's COMMIT marker reaches that
partition, and are dropped by its ABORT marker. The same happens on replay: a
transactional batch is held per producer and applied or dropped at its marker, so a
coordinator that loads the partition after a failover ends where the old one would have.

While a group's partition has an offset pending, OffsetFetch with ``require_stable``
answers UNSTABLE_OFFSET_COMMIT for it (KIP-447), as Kafka does: a consumer taking over the
partition must not start from the offset before a transaction that may yet commit.
"""

from __future__ import annotations

from collections import Counter
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
        self._by_key: Counter[tuple[str, str, int]] = Counter()
        """How many pending offsets each (group, topic, partition) has, over all producers."""

    def add(self, partition: int, producer_id: int, offsets: list[PendingOffset]) -> None:
        self.pending.setdefault((partition, producer_id), []).extend(offsets)
        self._by_key.update((p.group, p.topic, p.partition) for p in offsets)

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of the group for ``topic-partition``."""
        return self._by_key[(group, topic, partition)] > 0

    def _forget(self, done: list[PendingOffset]) -> None:
        for p in done:
            key = (p.group, p.topic, p.partition)
            left = self._by_key[key] - 1
            if left > 0:
                self._by_key[key] = left
            else:
                del self._by_key[key]

    def complete(
        self, partition: int, producer_id: int, commit: bool, store: OffsetStore
    ) -> list[PendingOffset]:
        """Apply (commit) or drop the producer's pending offsets of ``partition``."""
        done = self.pending.pop((partition, producer_id), [])
        self._forget(done)
        if commit:
            for p in done:
                if p.value is None:
                    store.delete(p.group, p.topic, p.partition)
                else:
                    store.put(p.group, p.topic, p.partition, p.value)
        return done

    def drop_partition(self, partition: int) -> None:
        for key in [k for k in self.pending if k[0] == partition]:
            self._forget(self.pending.pop(key))
