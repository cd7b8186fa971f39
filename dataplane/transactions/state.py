"""One transactional id's state (Kafka's ``TransactionMetadata``), no I/O.

States and the transitions the coordinator makes (Kafka's ``TransactionState`` ids)::

    EMPTY / COMPLETE_COMMIT / COMPLETE_ABORT --AddPartitions/AddOffsets--> ONGOING
    ONGOING --EndTxn(commit)--> PREPARE_COMMIT --markers written--> COMPLETE_COMMIT
    ONGOING --EndTxn(abort), timeout, InitProducerId--> PREPARE_ABORT --markers--> COMPLETE_ABORT
    EMPTY / COMPLETE_* --InitProducerId--> EMPTY (epoch + 1: the old producer is fenced)

PREPARE_EPOCH_FENCE and DEAD exist in Kafka's log format and are read; Sluice writes
neither (a timed-out or fenced transaction goes straight to PREPARE_ABORT with the bumped
epoch, which is the state Kafka reaches through PREPARE_EPOCH_FENCE).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

MAX_EPOCH = 32767 - 1
"""Kafka's Short.MAX_VALUE - 1: at this epoch the next bump takes a new producer id."""


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """Kafka's name of the state (DescribeTransactions, ListTransactions)."""
        return _LABELS[self]

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def completed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_LABELS = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_epoch: int = -1
    """The epoch before the last bump (KIP-360: a producer that lost the bump's answer may
    ask again with it)."""
    pending: bool = False
    """A write of this id's state is in flight: other requests get CONCURRENT_TRANSACTIONS."""
