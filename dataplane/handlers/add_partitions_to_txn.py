"""AddPartitionsToTxn (24): partitions join the producer's open transaction.

v0-v3 (clients): one transaction, answered per partition. v4+ (Kafka's broker-to-broker
verification, KIP-890) carry a batch of transactions, each answered on its own;
``verify_only`` asks whether the partitions are already in the transaction without adding
them. WRITE on the transactional id and on each topic is needed; a topic that does not
exist is UNKNOWN_TOPIC_OR_PARTITION and the other partitions then get
OPERATION_NOT_ATTEMPTED, as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from kio.schema.add_partitions_to_txn.v5 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.handlers._groups import ZERO
from dataplane.handlers._txn import old_client_code, require_transactional_id, transactions
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError

API_KEY = 24
BATCHED_VERSION = 4
FENCED_CODE_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    return _handle(ctx, request)


async def _handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version < BATCHED_VERSION:
        results = await _one(
            ctx,
            str(request.v3_and_below_transactional_id),
            int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            request.v3_and_below_topics,
            verify_only=False,
        )
        return ctx.make(
            resp.AddPartitionsToTxnResponse,
            throttle_time=ZERO,
            error_code=ErrorCode.none,
            results_by_transaction=(),
            results_by_topic_v3_and_below=results,
        )
    answers = []
    for txn in request.transactions:
        results = await _one(
            ctx,
            str(txn.transactional_id),
            int(txn.producer_id),
            int(txn.producer_epoch),
            txn.topics,
            verify_only=bool(txn.verify_only),
        )
        answers.append(
            ctx.make(
                resp.AddPartitionsToTxnResult,
                transactional_id=txn.transactional_id,
                topic_results=results,
            )
        )
    return ctx.make(
        resp.AddPartitionsToTxnResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(answers),
    )


async def _one(
    ctx: RequestContext,
    tid: str,
    producer_id: int,
    epoch: int,
    topics: Any,
    *,
    verify_only: bool,
) -> tuple[Any, ...]:
    wanted = [(str(t.name), int(p)) for t in topics for p in t.partitions]
    codes: dict[tuple[str, int], ErrorCode] = {}
    for topic, partition in wanted:
        info = ctx.broker.metadata.topics.get(topic)
        if not ctx.on_topic(Operation.WRITE, topic):
            codes[(topic, partition)] = ErrorCode.topic_authorization_failed
        elif info is None or not 0 <= partition < info.partitions:
            codes[(topic, partition)] = ErrorCode.unknown_topic_or_partition
    if codes:
        for tp in wanted:
            codes.setdefault(tp, ErrorCode.operation_not_attempted)
    else:
        try:
            require_transactional_id(ctx, Operation.WRITE, tid)
            coordinator = transactions(ctx)
            if verify_only:
                missing = coordinator.missing_partitions(tid, producer_id, epoch, wanted)
                codes = {
                    tp: ErrorCode.invalid_txn_state if tp in missing else ErrorCode.none
                    for tp in wanted
                }
            else:
                await coordinator.add_partitions(tid, producer_id, epoch, wanted)
                codes = dict.fromkeys(wanted, ErrorCode.none)
        except BrokerError as exc:
            codes = dict.fromkeys(wanted, old_client_code(ctx, exc, FENCED_CODE_VERSION))
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append((partition, code))
    return tuple(
        ctx.make(
            resp.AddPartitionsToTxnTopicResult,
            name=topic,
            results_by_partition=tuple(
                ctx.make(
                    resp.AddPartitionsToTxnPartitionResult,
                    partition_index=p,
                    partition_error_code=code,
                )
                for p, code in parts
            ),
        )
        for topic, parts in by_topic.items()
    )
