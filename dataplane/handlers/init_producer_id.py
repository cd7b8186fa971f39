"""InitProducerId (22): a producer id and epoch for idempotent producers.

As Kafka: a request without a transactional id always gets a new producer id at epoch 0
(an idempotent producer that resets its sequences asks for a new id; the epoch bump of
KIP-360 is for transactional ids). Ids come from this broker's block of producer ids
(``cluster.producer_ids``), which the controller committed to the metadata log, so no two
producers of the cluster ever share an id.

Transactions are not supported yet: a request with a transactional id is answered
INVALID_REQUEST, which clients report as a fatal error instead of retrying forever.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v6 import request as req
from kio.schema.init_producer_id.v6 import response as resp

from dataplane.authorizer import Operation, ResourceType
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

API_KEY = 22
MAX_VERSION = 5
"""Kafka 4.3 offers 0-5 (v6, KIP-939's two-phase commit, is not announced by Kafka either)."""
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.InitProducerIdRequest) -> Any:
    if request.transactional_id is not None:
        return _answer(ctx, ErrorCode.invalid_request, -1, -1)
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


def _answer(ctx: RequestContext, code: ErrorCode, producer_id: int, epoch: int) -> Any:
    return ctx.make(
        resp.InitProducerIdResponse,
        throttle_time=ZERO,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
