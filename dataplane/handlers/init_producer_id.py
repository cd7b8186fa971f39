"""InitProducerId (22): a producer id and epoch for idempotent producers.

Transactions are not supported yet: a request with a transactional id is answered
INVALID_REQUEST, which clients report as a fatal error instead of retrying forever.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from dataplane.cluster.changes import Changes
from dataplane.handlers._controller import via_controller
from dataplane.handlers.context import RequestContext

API_KEY = 22
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return ctx.make(
            "InitProducerIdResponse",
            throttle_time=ZERO,
            error_code=ErrorCode.invalid_request,
            producer_id=-1,
            producer_epoch=-1,
        )
    existing = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if existing >= 0 and 0 <= epoch < 32767:
        # KIP-360: an idempotent producer bumps its epoch to reset its sequences.
        return ctx.make(
            "InitProducerIdResponse",
            throttle_time=ZERO,
            error_code=ErrorCode.none,
            producer_id=existing,
            producer_epoch=epoch + 1,
        )
    return via_controller(ctx, request, _allocate)


def _allocate(ctx: RequestContext, request: Any, changes: Changes) -> Any:
    """On the active controller: a fresh producer id, committed before it is handed out."""
    return ctx.make(
        "InitProducerIdResponse",
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        producer_id=changes.allocate_producer_id(),
        producer_epoch=0,
    )
