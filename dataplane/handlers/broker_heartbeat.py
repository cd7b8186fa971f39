"""BrokerHeartbeat (63): a registered broker says it is alive.

Only the active controller answers. ``want_shut_down`` is a controlled shutdown: the
broker is fenced at once, so its leaderships move before it stops. A broker that misses
``broker.session.timeout.ms`` of heartbeats is fenced; a fenced broker, or one whose epoch
is not current (STALE_BROKER_EPOCH), registers again.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.broker_heartbeat.v2 import request as req
from kio.schema.broker_heartbeat.v2 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, NotController, error_code_for

API_KEY = 63
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.BrokerHeartbeatRequest) -> Any:
    if request.want_shut_down:
        return _controlled_shutdown(ctx, request)
    controller = ctx.broker.cluster.local_controller()
    try:
        ctx.require_cluster(Operation.CLUSTER_ACTION)  # brokers only (Kafka's)
        if controller is None or not controller.active:
            raise NotController(f"broker {ctx.broker.node_id} is not the active controller")
        fenced = controller.heartbeat(int(request.broker_id), int(request.broker_epoch))
        code = ErrorCode.none
    except BrokerError as exc:
        fenced, code = True, error_code_for(exc)
    return ctx.make(
        resp.BrokerHeartbeatResponse,
        throttle_time=ZERO,
        error_code=code,
        is_caught_up=True,
        is_fenced=fenced,
        should_shut_down=False,
    )


async def _controlled_shutdown(ctx: RequestContext, request: Any) -> Any:
    """The broker is stopping: fence it now, so its leaderships move at once."""
    controller = ctx.broker.cluster.local_controller()
    code = ErrorCode.none
    try:
        ctx.require_cluster(Operation.CLUSTER_ACTION)
        if controller is None:
            raise NotController(f"broker {ctx.broker.node_id} is not the active controller")
        controller.heartbeat(int(request.broker_id), int(request.broker_epoch))
        await controller.fence(int(request.broker_id), "controlled shutdown")
    except BrokerError as exc:
        code = error_code_for(exc)
    return ctx.make(
        resp.BrokerHeartbeatResponse,
        throttle_time=ZERO,
        error_code=code,
        is_caught_up=True,
        is_fenced=code == ErrorCode.none,
        should_shut_down=code == ErrorCode.none,
    )
