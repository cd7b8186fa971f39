"""AlterPartitionReassignments (45): move partitions to new replica lists, or cancel.

Decided on the active controller (forwarded from any broker). A target list adds the new
replicas at once; they catch up as followers and, once all are in the ISR, the old ones
are dropped (and the leader moved if it was one of them). ``replicas: null`` cancels an
ongoing reassignment (NO_REASSIGNMENT_IN_PROGRESS when there is none). Errors are per
partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, repeated or
unregistered brokers).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.alter_partition_reassignments.v1 import request as req
from kio.schema.alter_partition_reassignments.v1 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster.changes import Changes
from dataplane.handlers._controller import via_controller
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for, error_message_for

API_KEY = 45
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.AlterPartitionReassignmentsRequest) -> Any:
    if not ctx.on_cluster(Operation.ALTER):  # Kafka's; here: the controller sees this broker
        return ctx.make(
            resp.AlterPartitionReassignmentsResponse,
            throttle_time=ZERO,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message="Cluster authorization failed.",
            responses=(),
        )
    return via_controller(ctx, request, _decide)


def _decide(ctx: RequestContext, request: Any, changes: Changes) -> Any:
    controller = changes.controller
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            code, message = ErrorCode.none, None
            try:
                target = None if p.replicas is None else [int(b) for b in p.replicas]
                record = controller.reassignment(topic.name, int(p.partition_index), target)
                if record is not None:
                    changes.records.append(record)
            except BrokerError as exc:
                code, message = error_code_for(exc), error_message_for(exc)
            parts.append(
                ctx.make(
                    resp.ReassignablePartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    error_message=message,
                )
            )
        topics.append(
            ctx.make(resp.ReassignableTopicResponse, name=topic.name, partitions=tuple(parts))
        )
    return ctx.make(
        resp.AlterPartitionReassignmentsResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(topics),
    )
