"""What a client is told when a coordinator's state write fails (found by the soak).

A full disk under ``__transaction_state`` failed a PREPARE_COMMIT write with
KAFKA_STORAGE_ERROR; librdkafka takes that answer to EndTxn as abortable, aborts, and the
abort then meets the PREPARE_COMMIT a new coordinator replayed: INVALID_TXN_STATE, fatal.
Kafka answers such failures with COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, which every
client retries with the same request (TransactionStateManager.appendTransactionToLog,
GroupMetadataManager.storeOffsets); so does Sluice now."""

from __future__ import annotations

import errno

import pytest
from kio.schema.errors import ErrorCode

from dataplane.coordinator_log import write_error
from wire.errors import (
    CoordinatorLoadInProgress,
    KafkaStorageError,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    NotLeaderOrFollower,
    RequestTimedOut,
    UnknownTopicOrPartition,
    error_code_for,
)

CASES = [
    # failure, answer for the transaction log, answer for the offsets log
    (NotEnoughReplicas("isr"), "coordinator_not_available", "coordinator_not_available"),
    (NotEnoughReplicasAfterAppend("isr"), "coordinator_not_available", "coordinator_not_available"),
    (UnknownTopicOrPartition("gone"), "coordinator_not_available", "coordinator_not_available"),
    (RequestTimedOut("slow isr"), "coordinator_not_available", "request_timed_out"),
    (NotLeaderOrFollower("moved"), "not_coordinator", "not_coordinator"),
    (KafkaStorageError("full"), "not_coordinator", "not_coordinator"),
    (OSError(errno.ENOSPC, "No space left on device"), "not_coordinator", "not_coordinator"),
    (CoordinatorLoadInProgress("loading"), "coordinator_load_in_progress",
     "coordinator_load_in_progress"),
]  # fmt: skip


@pytest.mark.parametrize(("failure", "for_transactions", "for_offsets"), CASES)
def test_a_failed_state_write_is_answered_with_a_retriable_coordinator_error(
    failure: BaseException, for_transactions: str, for_offsets: str
) -> None:
    txn = write_error(failure, timeout_means_unavailable=True)
    offsets = write_error(failure, timeout_means_unavailable=False)
    assert error_code_for(txn) == ErrorCode[for_transactions]
    assert error_code_for(offsets) == ErrorCode[for_offsets]
