"""DescribeCluster (60): cluster id, this broker (the only one, never fenced), controller.

Only the BROKERS endpoint type is served (v1+): CONTROLLERS is MISMATCHED_ENDPOINT_TYPE
and anything else UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST on v0), with Kafka's
messages. Without an authorizer every operation on the cluster is allowed, so the
authorized operations, when asked for, are all that Kafka supports on a cluster.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.describe_cluster.v2 import request as req
from kio.schema.describe_cluster.v2 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.handlers.context import RequestContext, cluster_operations

API_KEY = 60
ZERO = datetime.timedelta(0)
BROKERS, CONTROLLERS = 1, 2
ENDPOINT_NAMES = {BROKERS: "BROKER", CONTROLLERS: "CONTROLLER"}
NOT_REQUESTED = -(2**31)
"""cluster_authorized_operations when not asked for (Integer.MIN_VALUE)."""


def handle(ctx: RequestContext, request: req.DescribeClusterRequest) -> Any:
    endpoint = getattr(request, "endpoint_type", BROKERS)
    if endpoint not in ENDPOINT_NAMES:
        return _error(
            ctx,
            ErrorCode.invalid_request
            if ctx.api_version == 0
            else ErrorCode.unsupported_endpoint_type,
            f"Unsupported endpoint type {endpoint}",
        )
    if endpoint != BROKERS:
        return _error(
            ctx,
            ErrorCode.invalid_request
            if ctx.api_version == 0
            else ErrorCode.mismatched_endpoint_type,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            f"type {ENDPOINT_NAMES[endpoint]}",
        )
    broker = ctx.broker
    image = broker.metadata
    brokers = tuple(
        ctx.make(
            resp.DescribeClusterBroker,
            broker_id=b.broker_id,
            host=address[0],
            port=address[1],
            rack=None,
            is_fenced=b.fenced,
        )
        for _, b in sorted(image.brokers.items())
        if not b.fenced or getattr(request, "include_fenced_brokers", False)
        # only the brokers that have the listener the request came through, as Kafka's
        if (address := b.address_on(ctx.listener)) is not None
    )
    return ctx.make(
        resp.DescribeClusterResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=image.cluster_id,
        controller_id=broker.cluster.controller_id,
        brokers=brokers,
        cluster_authorized_operations=cluster_operations(ctx)
        if request.include_cluster_authorized_operations
        else NOT_REQUESTED,
    )


def _error(ctx: RequestContext, code: ErrorCode, message: str) -> Any:
    return ctx.make(
        resp.DescribeClusterResponse,
        throttle_time=ZERO,
        error_code=code,
        error_message=message,
        endpoint_type=BROKERS,
        cluster_id="",
        controller_id=-1,
        brokers=(),
        cluster_authorized_operations=NOT_REQUESTED,
    )
