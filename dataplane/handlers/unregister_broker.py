"""UnregisterBroker (64): forget a broker that was removed from the cluster.

Decided on the active controller (forwarded from any broker). The broker is fenced first
(it leaves every ISR and loses its leaderships), then its registration is removed.
BROKER_ID_NOT_REGISTERED for an id that is not registered (Kafka's code and message).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.unregister_broker.v0 import request as req
from kio.schema.unregister_broker.v0 import response as resp

from dataplane.authorizer import Operation
from dataplane.cluster import records as r
from dataplane.cluster.changes import Changes
from dataplane.handlers._controller import via_controller
from dataplane.handlers.context import RequestContext

API_KEY = 64
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.UnregisterBrokerRequest) -> Any:
    if not ctx.on_cluster(Operation.ALTER):  # Kafka's; here: the controller sees this broker
        return ctx.make(
            resp.UnregisterBrokerResponse,
            throttle_time=ZERO,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message="Cluster authorization failed.",
        )
    return via_controller(ctx, request, _decide)


def _decide(ctx: RequestContext, request: Any, changes: Changes) -> Any:
    broker_id = int(request.broker_id)
    controller = changes.controller
    if broker_id not in changes.image.brokers:
        return ctx.make(
            resp.UnregisterBrokerResponse,
            throttle_time=ZERO,
            error_code=ErrorCode.broker_id_not_registered,
            error_message=f"Broker ID {broker_id} is not currently registered",
        )
    changes.records.extend(controller.fence_records(broker_id))
    changes.records.append(r.UnregisterBroker(broker_id))
    return ctx.make(
        resp.UnregisterBrokerResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message=None,
    )
