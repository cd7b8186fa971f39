"""PendingTxnOffsets knows which (group, topic, partition) an open transaction holds an
offset of (OffsetFetch's ``require_stable``), over several producers, until every one of
them is completed or the ``__consumer_offsets`` partition is unloaded."""

from __future__ import annotations

from dataplane.groups.offsets import CommittedOffset, OffsetStore
from dataplane.groups.txn_offsets import PendingOffset, PendingTxnOffsets


def pending(group: str, partition: int, offset: int) -> PendingOffset:
    return PendingOffset(group, "t", partition, CommittedOffset(offset, -1, "", 0))


def test_pending_until_every_holder_completes() -> None:
    txn = PendingTxnOffsets()
    store = OffsetStore()
    txn.add(0, 100, [pending("g", 0, 5), pending("g", 1, 6)])
    txn.add(0, 101, [pending("g", 0, 8)])
    txn.add(0, 101, [pending("g", 0, 9)])  # the same producer commits offsets twice
    assert txn.has_pending("g", "t", 0)
    assert txn.has_pending("g", "t", 1)
    assert not txn.has_pending("g", "t", 2)
    assert not txn.has_pending("other", "t", 0)
    txn.complete(0, 100, True, store)
    assert txn.has_pending("g", "t", 0)  # producer 101 still holds partition 0
    assert not txn.has_pending("g", "t", 1)
    assert store.get("g", "t", 1) == CommittedOffset(6, -1, "", 0)
    txn.complete(0, 101, False, store)
    assert not txn.has_pending("g", "t", 0)
    assert store.get("g", "t", 0) == CommittedOffset(5, -1, "", 0)


def test_unloading_a_partition_forgets_its_pending_offsets() -> None:
    txn = PendingTxnOffsets()
    txn.add(0, 100, [pending("g", 0, 5)])
    txn.add(3, 100, [pending("h", 0, 5)])
    txn.drop_partition(0)
    assert not txn.has_pending("g", "t", 0)
    assert txn.has_pending("h", "t", 0)
