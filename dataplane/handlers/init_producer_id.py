"""InitProducerId (22): a producer id and epoch for idempotent and transactional producers.

As Kafka: a request without a transactional id always gets a new producer id at epoch 0
(an idempotent producer that resets its sequences asks for a new id). Ids come from this
broker's block of producer ids (``cluster.producer_ids``), which the controller committed
to the metadata log, so no two producers of the cluster ever share an id.

With a transactional id the request goes to the id's transaction coordinator
(``dataplane.transactions``): the first producer of the id gets a new producer id at epoch
0, each later one the same id at the next epoch, which fences the one before; an open
transaction of the old producer is aborted first (CONCURRENT_TRANSACTIONS until it is).
WRITE on the transactional id is needed.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v6 import request as req
from kio.schema.init_producer_id.v6 import response as resp

from dataplane.authorizer import Operation, ResourceType
from dataplane.handlers._groups import millis
from dataplane.handlers._txn import old_client_code, require_transactional_id, transactions
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

API_KEY = 22
ZERO = datetime.timedelta(0)
FENCED_CODE_VERSION = 4


def handle(ctx: RequestContext, request: req.InitProducerIdRequest) -> Any:
    if request.transactional_id is not None:
        return _transactional(ctx, request)
    # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679)
    if not (
        ctx.on_cluster(Operation.IDEMPOTENT_WRITE)
        or ctx.allowed_any(Operation.WRITE, ResourceType.TOPIC)
    ):
        return _answer(ctx, ErrorCode.cluster_authorization_failed, -1, -1)
    return _new_producer(ctx)


async def _new_producer(ctx: RequestContext) -> Any:
    try:
        producer_id = await ctx.broker.producer_ids.generate()
    except BrokerError as exc:
        return _answer(ctx, error_code_for(exc), -1, -1)
    return _answer(ctx, ErrorCode.none, producer_id, 0)


async def _transactional(ctx: RequestContext, request: Any) -> Any:
    tid = str(request.transactional_id)
    try:
        require_transactional_id(ctx, Operation.WRITE, tid)
        pid, epoch = await transactions(ctx).init_producer_id(
            tid,
            millis(request.transaction_timeout, 60000),
            int(getattr(request, "producer_id", -1)),
            int(getattr(request, "producer_epoch", -1)),
        )
    except BrokerError as exc:
        return _answer(ctx, old_client_code(ctx, exc, FENCED_CODE_VERSION), -1, -1)
    return _answer(ctx, ErrorCode.none, pid, epoch)


def _answer(ctx: RequestContext, code: ErrorCode, producer_id: int, epoch: int) -> Any:
    return ctx.make(
        resp.InitProducerIdResponse,
        throttle_time=ZERO,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
