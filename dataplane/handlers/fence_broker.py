"""FenceBroker (32003, Sluice's own): the control plane saw a broker's process exit.

The supervisor watches each broker process through a pidfd and knows when one dies, which
the controller can only learn when the broker's session expires (``broker.session.timeout.ms``;
Kafka and MSK have nothing better). It tells any broker, which forwards to the active
controller; the controller fences the registration of that process (named by the
``broker.incarnation.id`` its supervisor gave it), so leaderships move at once. A newer
registration (the broker already restarted) or one already fenced is left alone. Needs
ALTER on the cluster, as UnregisterBroker does (the control plane's own user).

When the broker that exited was the active controller itself, the broker asked (a voter
that followed it) campaigns at once instead of waiting for an election timeout (500-1,000
ms), waits for the election's outcome, then fences it as the new controller or forwards
to whoever won.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from dataplane.authorizer import Operation
from dataplane.cluster.member import ControllerIsLocal
from dataplane.handlers._controller import FORWARD_TIMEOUT_S
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, NotController, error_code_for, error_message_for
from wire.internal import FENCE_BROKER_KEY, FenceBrokerRequest, FenceBrokerResponse

API_KEY = FENCE_BROKER_KEY
ZERO = i32Timedelta.parse(datetime.timedelta(0))


def handle(ctx: RequestContext, request: FenceBrokerRequest) -> Any:
    return _fence(ctx, request)


async def _fence(ctx: RequestContext, request: FenceBrokerRequest) -> FenceBrokerResponse:
    if not ctx.on_cluster(Operation.ALTER):
        return _answer(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    member = ctx.broker.cluster
    try:
        controller = member.local_controller()
        if controller is None and member.controller_gone(
            int(request.broker_id), str(request.incarnation)
        ):
            # forwarded now, the request would reach a voter that campaigns as well (a
            # split vote: an election timeout after all)
            with contextlib.suppress(TimeoutError):
                await member.raft.wait_for_leader(FORWARD_TIMEOUT_S)
            controller = member.local_controller()
        if controller is None:
            try:
                response: FenceBrokerResponse = await member.send_to_controller(
                    request, timeout=FORWARD_TIMEOUT_S
                )
                return response
            except ControllerIsLocal:
                controller = member.local_controller()
        if controller is None:
            raise NotController(f"broker {ctx.broker.node_id} is not the active controller")
        fenced = await controller.fence(
            int(request.broker_id), str(request.reason), incarnation=str(request.incarnation)
        )
    except BrokerError as exc:
        return _answer(error_code_for(exc), error_message_for(exc))
    return _answer(ErrorCode.none, None, fenced)


def _answer(code: ErrorCode, message: str | None, fenced: bool = False) -> FenceBrokerResponse:
    return FenceBrokerResponse(
        throttle_time=ZERO, error_code=code, error_message=message, fenced=fenced
    )
