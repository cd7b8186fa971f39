"""AllocateProducerIds (67, KIP-730): a broker asks the active controller for a block of
producer ids.

Only the active controller answers (NOT_CONTROLLER elsewhere, and the broker retries with
the controller it learns of). The block is committed to the metadata log before the answer
leaves; a broker whose epoch is not its current registration gets STALE_BROKER_EPOCH.
Internal: served, not announced in ApiVersions.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.allocate_producer_ids.v0 import request as req
from kio.schema.allocate_producer_ids.v0 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, NotController, error_code_for

API_KEY = 67
ZERO = datetime.timedelta(0)


async def handle(ctx: RequestContext, request: req.AllocateProducerIdsRequest) -> Any:
    controller = ctx.broker.cluster.local_controller()
    start, length, code = -1, 0, ErrorCode.none
    try:
        ctx.require_cluster(Operation.CLUSTER_ACTION)  # brokers only (Kafka's)
        if controller is None:
            raise NotController(f"broker {ctx.broker.node_id} is not the active controller")
        start, length = await controller.allocate_producer_ids(
            int(request.broker_id), int(request.broker_epoch)
        )
    except BrokerError as exc:
        code = error_code_for(exc)
    return ctx.make(
        resp.AllocateProducerIdsResponse,
        throttle_time=ZERO,
        error_code=code,
        producer_id_start=start,
        producer_id_len=length,
    )
