"""Typed broker errors.

Everything below the protocol boundary raises one of these; the mapping to a Kafka
error code happens once, in the handlers, through :func:`error_code_for`.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class BrokerError(Exception):
    """Base class: an expected failure with a Kafka error code."""

    code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.code.name)
        self.message = message or None


class CorruptRecord(BrokerError):
    code = ErrorCode.corrupt_message


class InvalidRecord(BrokerError):
    code = ErrorCode.invalid_record


class UnsupportedMessageFormat(BrokerError):
    code = ErrorCode.unsupported_for_message_format


class UnsupportedCompression(BrokerError):
    code = ErrorCode.unsupported_compression_type


class MessageTooLarge(BrokerError):
    code = ErrorCode.message_too_large


class RecordListTooLarge(BrokerError):
    code = ErrorCode.record_list_too_large


class UnknownTopicOrPartition(BrokerError):
    code = ErrorCode.unknown_topic_or_partition


class UnknownTopicId(BrokerError):
    code = ErrorCode.unknown_topic_id


class OffsetOutOfRange(BrokerError):
    code = ErrorCode.offset_out_of_range


class InvalidTopic(BrokerError):
    code = ErrorCode.invalid_topic_exception


class TopicAlreadyExists(BrokerError):
    code = ErrorCode.topic_already_exists


class InvalidPartitions(BrokerError):
    code = ErrorCode.invalid_partitions


class InvalidReplicationFactor(BrokerError):
    code = ErrorCode.invalid_replication_factor


class InvalidConfig(BrokerError):
    code = ErrorCode.invalid_config


class InvalidReplicaAssignment(BrokerError):
    code = ErrorCode.invalid_replica_assignment


class TopicDeletionDisabled(BrokerError):
    code = ErrorCode.topic_deletion_disabled


class InvalidRequest(BrokerError):
    code = ErrorCode.invalid_request


class InvalidRequiredAcks(BrokerError):
    code = ErrorCode.invalid_required_acks


class InvalidTimestamp(BrokerError):
    code = ErrorCode.invalid_timestamp


class RecordValidationError:
    """Mixin of the errors that name records (Kafka's RecordValidationException, KIP-467):
    the ProduceResponse carries ``record_errors`` and the message."""

    record_errors: tuple[tuple[int, str], ...] = ()
    """(index of the record in its batch, message) of every record that broke a rule."""
    log_start_offset = -1
    """Set by the produce handler: Kafka answers these with the partition's log start."""


class InvalidRecords(RecordValidationError, InvalidRecord):
    """Records broke a rule (a null key in a compacted topic): INVALID_RECORD."""


class InvalidTimestamps(RecordValidationError, InvalidTimestamp):
    """At least one record has a timestamp the topic refuses: INVALID_TIMESTAMP."""


class OutOfOrderSequence(BrokerError):
    code = ErrorCode.out_of_order_sequence_number


class DuplicateSequence(BrokerError):
    code = ErrorCode.duplicate_sequence_number


class InvalidProducerEpoch(BrokerError):
    code = ErrorCode.invalid_producer_epoch


class UnknownProducerId(BrokerError):
    code = ErrorCode.unknown_producer_id


class KafkaStorageError(BrokerError):
    code = ErrorCode.kafka_storage_error


class LogDirFull(KafkaStorageError):
    """A write failed for lack of space (ENOSPC, EDQUOT, EFBIG): nothing of it was kept;
    produce to this disk fails until space is freed."""


class OffsetMovedToTieredStorage(BrokerError):
    """A follower fetched below the leader's local log start: that data is only in the
    remote tier; the follower starts its log at the leader's local log start instead."""

    code = ErrorCode.offset_moved_to_tiered_storage


class RemoteStorageError(KafkaStorageError):
    """Reading the remote tier failed (store down, timeout, corrupted object): retriable,
    never wrong data."""


class PolicyViolation(BrokerError):
    code = ErrorCode.policy_violation


class RequestTimedOut(BrokerError):
    code = ErrorCode.request_timed_out


class ResourceNotFound(BrokerError):
    code = ErrorCode.resource_not_found


# --------------------------------------------------------------------------- groups


class CoordinatorNotAvailable(BrokerError):
    code = ErrorCode.coordinator_not_available


class NotCoordinator(BrokerError):
    code = ErrorCode.not_coordinator


class CoordinatorLoadInProgress(BrokerError):
    code = ErrorCode.coordinator_load_in_progress


class TransactionCoordinatorFenced(BrokerError):
    """A marker or request from a coordinator epoch older than one already seen."""

    code = ErrorCode.transaction_coordinator_fenced


class ProducerFenced(BrokerError):
    """A newer producer with the same transactional id has started (its epoch is higher)."""

    code = ErrorCode.producer_fenced


class InvalidTxnState(BrokerError):
    code = ErrorCode.invalid_txn_state


class ConcurrentTransactions(BrokerError):
    """The previous transaction of this transactional id is still completing: retry."""

    code = ErrorCode.concurrent_transactions


class InvalidTransactionTimeout(BrokerError):
    code = ErrorCode.invalid_transaction_timeout


class InvalidProducerIdMapping(BrokerError):
    code = ErrorCode.invalid_producer_id_mapping


class TransactionalIdNotFound(BrokerError):
    code = ErrorCode.transactional_id_not_found


class TopicAuthorizationFailed(BrokerError):
    code = ErrorCode.topic_authorization_failed


class GroupAuthorizationFailed(BrokerError):
    code = ErrorCode.group_authorization_failed


class ClusterAuthorizationFailed(BrokerError):
    code = ErrorCode.cluster_authorization_failed


class TransactionalIdAuthorizationFailed(BrokerError):
    code = ErrorCode.transactional_id_authorization_failed


class SecurityDisabled(BrokerError):
    code = ErrorCode.security_disabled


class GroupSubscribedToTopic(BrokerError):
    code = ErrorCode.group_subscribed_to_topic


class TransformNotFound(BrokerError):
    code = ErrorCode.resource_not_found


class InvalidTransform(BrokerError):
    """A deploy refused: the module or the definition is not acceptable (the message says
    why and what to do)."""

    code = ErrorCode.invalid_request


class InvalidGroupId(BrokerError):
    code = ErrorCode.invalid_group_id


class GroupIdNotFound(BrokerError):
    code = ErrorCode.group_id_not_found


class NonEmptyGroup(BrokerError):
    code = ErrorCode.non_empty_group


class UnknownMemberId(BrokerError):
    code = ErrorCode.unknown_member_id


class IllegalGeneration(BrokerError):
    code = ErrorCode.illegal_generation


class RebalanceInProgress(BrokerError):
    code = ErrorCode.rebalance_in_progress


class InconsistentGroupProtocol(BrokerError):
    code = ErrorCode.inconsistent_group_protocol


class InvalidSessionTimeout(BrokerError):
    code = ErrorCode.invalid_session_timeout


class MemberIdRequired(BrokerError):
    code = ErrorCode.member_id_required


class GroupMaxSizeReached(BrokerError):
    code = ErrorCode.group_max_size_reached


class FencedInstanceId(BrokerError):
    code = ErrorCode.fenced_instance_id


class OffsetMetadataTooLarge(BrokerError):
    code = ErrorCode.offset_metadata_too_large


class NotLeaderOrFollower(BrokerError):
    code = ErrorCode.not_leader_or_follower


class OffsetNotAvailable(BrokerError):
    code = ErrorCode.offset_not_available


class LeaderNotAvailable(BrokerError):
    code = ErrorCode.leader_not_available


class NotEnoughReplicas(BrokerError):
    code = ErrorCode.not_enough_replicas


class NotEnoughReplicasAfterAppend(BrokerError):
    code = ErrorCode.not_enough_replicas_after_append


class FencedLeaderEpoch(BrokerError):
    code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpoch(BrokerError):
    code = ErrorCode.unknown_leader_epoch


class NotController(BrokerError):
    code = ErrorCode.not_controller


class StaleBrokerEpoch(BrokerError):
    code = ErrorCode.stale_broker_epoch


class InvalidUpdateVersion(BrokerError):
    code = ErrorCode.invalid_update_version


class BrokerNotAvailable(BrokerError):
    code = ErrorCode.broker_not_available


class NoReassignmentInProgress(BrokerError):
    code = ErrorCode.no_reassignment_in_progress


class ElectionNotNeeded(BrokerError):
    code = ErrorCode.election_not_needed


class PreferredLeaderNotAvailable(BrokerError):
    code = ErrorCode.preferred_leader_not_available


# --------------------------------------------------------------------------- replication (log)


class OffsetMismatch(BrokerError):
    """Replicated batches do not continue the log: they start below its end or overlap
    each other (Kafka's UnexpectedAppendOffsetException / OffsetsOutOfOrderException).
    Only a follower's fetcher sees it; it reconciles with the leader again."""

    code = ErrorCode.unknown_server_error


class LogCleaningInProgress(BrokerError):
    """A truncation would cut segments the log cleaner is rewriting; retry after the pass."""

    code = ErrorCode.unknown_server_error


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code for an exception raised below the protocol boundary."""
    if isinstance(exc, BrokerError):
        return exc.code
    if isinstance(exc, OSError):
        return ErrorCode.kafka_storage_error
    return ErrorCode.unknown_server_error


def error_message_for(exc: BaseException) -> str | None:
    if isinstance(exc, BrokerError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


def exception_for(code: ErrorCode, message: str = "") -> BrokerError:
    """The typed error for a Kafka error code another broker answered with (the most general
    class with that code), so callers catch the same types wherever the error arose."""
    pending: list[type[BrokerError]] = [BrokerError]
    while pending:
        cls = pending.pop(0)
        if cls.code == code and cls is not BrokerError:
            return cls(message)
        pending.extend(cls.__subclasses__())
    error = BrokerError(message or code.name)
    error.code = code
    return error
