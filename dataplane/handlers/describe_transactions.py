"""DescribeTransactions (65): the state of transactional ids this broker coordinates.

Each id is answered on its own: NOT_COORDINATOR for one coordinated elsewhere,
TRANSACTIONAL_ID_NOT_FOUND for one never seen, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
without DESCRIBE on it. The partitions listed are those whose topic the caller may
DESCRIBE, as Kafka lists them.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.describe_transactions.v0 import request as req
from kio.schema.describe_transactions.v0 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO
from dataplane.handlers._txn import require_transactional_id, transactions
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

API_KEY = 65
EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


def handle(ctx: RequestContext, request: req.DescribeTransactionsRequest) -> Any:
    return ctx.make(
        resp.DescribeTransactionsResponse,
        throttle_time=ZERO,
        transaction_states=tuple(_one(ctx, str(tid)) for tid in request.transactional_ids),
    )


def _one(ctx: RequestContext, tid: str) -> Any:
    try:
        require_transactional_id(ctx, Operation.DESCRIBE, tid)
        meta = transactions(ctx).describe(tid)
    except BrokerError as exc:
        return ctx.make(
            resp.TransactionState,
            error_code=error_code_for(exc),
            transactional_id=tid,
            transaction_state="",
            transaction_timeout=ZERO,
            transaction_start_time=EPOCH,  # Kafka's: the fields' defaults, 0
            producer_id=0,
            producer_epoch=0,
            topics=(),
        )
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        if ctx.on_topic(Operation.DESCRIBE, topic):
            by_topic.setdefault(topic, []).append(partition)
    return ctx.make(
        resp.TransactionState,
        error_code=ErrorCode.none,
        transactional_id=tid,
        transaction_state=meta.state.label,
        transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms),
        transaction_start_time=EPOCH + datetime.timedelta(milliseconds=meta.start_ms),
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=tuple(
            ctx.make(resp.TopicData, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )
