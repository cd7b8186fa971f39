"""Small helpers the transaction handlers share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation, ResourceType
from wire.errors import BrokerError, CoordinatorNotAvailable, TransactionalIdAuthorizationFailed

if TYPE_CHECKING:
    from dataplane.handlers.context import RequestContext
    from dataplane.transactions.coordinator import TransactionCoordinator


def transactions(ctx: RequestContext) -> TransactionCoordinator:
    coordinator = ctx.broker.transactions
    if not coordinator.active:
        raise CoordinatorNotAvailable()
    return coordinator


def require_transactional_id(ctx: RequestContext, operation: Operation, tid: str) -> None:
    if not ctx.allowed(operation, ResourceType.TRANSACTIONAL_ID, tid):
        raise TransactionalIdAuthorizationFailed(
            f"not authorized to {operation.name} transactional id {tid}"
        )


def old_client_code(ctx: RequestContext, exc: BrokerError, fenced_before: int) -> ErrorCode:
    """PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for versions below ``fenced_before``
    (clients that predate KIP-588 know only the latter), as Kafka answers."""
    code = exc.code
    if code == ErrorCode.producer_fenced and ctx.api_version < fenced_before:
        return ErrorCode.invalid_producer_epoch
    return code
