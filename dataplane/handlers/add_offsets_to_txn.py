"""AddOffsetsToTxn (25): the group's ``__consumer_offsets`` partition joins the producer's
open transaction, so that its TxnOffsetCommit is committed or aborted with the records.
WRITE on the transactional id and READ on the group are needed."""

from __future__ import annotations

from typing import Any

from kio.schema.add_offsets_to_txn.v4 import request as req
from kio.schema.add_offsets_to_txn.v4 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO
from dataplane.handlers._txn import old_client_code, require_transactional_id, transactions
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError

API_KEY = 25
FENCED_CODE_VERSION = 2


def handle(ctx: RequestContext, request: req.AddOffsetsToTxnRequest) -> Any:
    return _handle(ctx, request)


async def _handle(ctx: RequestContext, request: req.AddOffsetsToTxnRequest) -> Any:
    code = ErrorCode.none
    try:
        require_transactional_id(ctx, Operation.WRITE, str(request.transactional_id))
        ctx.require_group(Operation.READ, str(request.group_id))
        await transactions(ctx).add_offsets(
            str(request.transactional_id),
            int(request.producer_id),
            int(request.producer_epoch),
            str(request.group_id),
        )
    except BrokerError as exc:
        code = old_client_code(ctx, exc, FENCED_CODE_VERSION)
    return ctx.make(resp.AddOffsetsToTxnResponse, throttle_time=ZERO, error_code=code)
