"""ListTransactions (66): the transactional ids this broker coordinates, filtered by state
(Kafka's names: Ongoing, PrepareCommit, ...; unknown names are echoed back in
``unknown_state_filters``), producer id, v1+ minimum open duration, v2+ a regular
expression over the id. Only ids the caller may DESCRIBE are listed."""

from __future__ import annotations

import re
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v2 import request as req
from kio.schema.list_transactions.v2 import response as resp

from dataplane import clock
from dataplane.authorizer import Operation, ResourceType
from dataplane.handlers._groups import ZERO
from dataplane.handlers.context import RequestContext
from dataplane.transactions.state import TxnState

API_KEY = 66


def handle(ctx: RequestContext, request: req.ListTransactionsRequest) -> Any:
    coordinator = ctx.broker.transactions
    if not coordinator.active:
        return _answer(ctx, ErrorCode.coordinator_not_available, (), ())
    known = {s.label: s for s in TxnState}
    states = {known[f] for f in request.state_filters if f in known}
    unknown = tuple(f for f in request.state_filters if f not in known)
    pids = {int(p) for p in request.producer_id_filters}
    duration = int(getattr(request, "duration_filter", -1))
    pattern_text = getattr(request, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return _answer(ctx, ErrorCode.invalid_regular_expression, unknown, ())
    now = clock.now_ms()
    listed = []
    for meta in coordinator.listed():
        if (
            (states and meta.state not in states)
            or (pids and meta.producer_id not in pids)
            or (duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < duration))
            or (pattern is not None and not pattern.fullmatch(meta.transactional_id))
            or not ctx.allowed(
                Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, meta.transactional_id
            )
        ):
            continue
        listed.append(
            ctx.make(
                resp.TransactionState,
                transactional_id=meta.transactional_id,
                producer_id=meta.producer_id,
                transaction_state=meta.state.label,
            )
        )
    return _answer(ctx, ErrorCode.none, unknown, tuple(listed))


def _answer(
    ctx: RequestContext, code: ErrorCode, unknown: tuple[str, ...], states: tuple[Any, ...]
) -> Any:
    return ctx.make(
        resp.ListTransactionsResponse,
        throttle_time=ZERO,
        error_code=code,
        unknown_state_filters=unknown,
        transaction_states=states,
    )
