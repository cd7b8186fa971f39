"""BrokerRegistration (62): a broker joins (or rejoins) the cluster at the controller.

Only the active controller answers (NOT_CONTROLLER elsewhere; the sender tries another
voter). The broker's PLAINTEXT listener is where clients reach it, its CONTROLLER listener
where the metadata log reaches it (as a Raft learner, unless it is a voter). A broker of
another cluster id is refused with INCONSISTENT_CLUSTER_ID.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.broker_registration.v4 import request as req
from kio.schema.broker_registration.v4 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster.member import ENDPOINT_PREFIX
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, NotController, error_code_for

API_KEY = 62
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.BrokerRegistrationRequest) -> Any:
    return _register(ctx, request)


async def _register(ctx: RequestContext, request: Any) -> Any:
    controller = ctx.broker.cluster.local_controller()
    if request.cluster_id != ctx.broker.metadata.cluster_id:
        return _answer(ctx, ErrorCode.inconsistent_cluster_id, -1)
    listeners = {listener.name: listener for listener in request.listeners}
    kafka = listeners.get("PLAINTEXT")
    raft = listeners.get("CONTROLLER")
    if kafka is None or raft is None:
        return _answer(ctx, ErrorCode.invalid_request, -1)
    try:
        ctx.require_cluster(Operation.CLUSTER_ACTION)  # brokers only (Kafka's)
        if controller is None:
            raise NotController(f"broker {ctx.broker.node_id} is not the active controller")
        epoch = await controller.register(
            int(request.broker_id),
            kafka.host,
            int(kafka.port),
            raft.host,
            int(raft.port),
            str(request.incarnation_id),
            {
                x.name.removeprefix(ENDPOINT_PREFIX): [x.host, int(x.port)]
                for x in request.listeners
                if x.name.startswith(ENDPOINT_PREFIX)
            },
        )
    except BrokerError as exc:
        return _answer(ctx, error_code_for(exc), -1)
    return _answer(ctx, ErrorCode.none, epoch)


def _answer(ctx: RequestContext, code: ErrorCode, epoch: int) -> Any:
    return ctx.make(
        resp.BrokerRegistrationResponse, throttle_time=ZERO, error_code=code, broker_epoch=epoch
    )
