"""EndTxn (26): commit or abort the producer's open transaction.

Answered once the coordinator has PREPARE_COMMIT / PREPARE_ABORT in
``__transaction_state`` (acknowledged by its ISR): from then on the outcome is decided, and
the markers reach every partition of the transaction in the background (a read_committed
consumer sees the records once its partition has the COMMIT marker). A retry of an
answered EndTxn succeeds; the opposite outcome is INVALID_TXN_STATE. WRITE on the
transactional id is needed. v5 (transaction protocol version 2) is not served.
"""

from __future__ import annotations

from typing import Any

from kio.schema.end_txn.v4 import request as req
from kio.schema.end_txn.v4 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO
from dataplane.handlers._txn import old_client_code, require_transactional_id, transactions
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError

API_KEY = 26
FENCED_CODE_VERSION = 2


def handle(ctx: RequestContext, request: req.EndTxnRequest) -> Any:
    return _handle(ctx, request)


async def _handle(ctx: RequestContext, request: req.EndTxnRequest) -> Any:
    code = ErrorCode.none
    try:
        require_transactional_id(ctx, Operation.WRITE, str(request.transactional_id))
        await transactions(ctx).end_txn(
            str(request.transactional_id),
            int(request.producer_id),
            int(request.producer_epoch),
            bool(request.committed),
        )
    except BrokerError as exc:
        code = old_client_code(ctx, exc, FENCED_CODE_VERSION)
    return ctx.make(resp.EndTxnResponse, throttle_time=ZERO, error_code=code)
