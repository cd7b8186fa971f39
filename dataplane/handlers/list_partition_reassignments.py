"""ListPartitionReassignments (46): partitions being moved, with their adding and removing
replicas (all topics, or the partitions asked for). Answered from the metadata image."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0 import request as req
from kio.schema.list_partition_reassignments.v0 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext

API_KEY = 46
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.ListPartitionReassignmentsRequest) -> Any:
    if not ctx.on_cluster(Operation.DESCRIBE):  # Kafka's
        return ctx.make(
            resp.ListPartitionReassignmentsResponse,
            throttle_time=ZERO,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message="Cluster authorization failed.",
            topics=(),
        )
    image = ctx.broker.metadata
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.name: {int(p) for p in t.partition_indexes} for t in request.topics}
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), state in sorted(image.partitions.items()):
        if not state.adding and not state.removing:
            continue
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        by_topic.setdefault(topic, []).append(
            ctx.make(
                resp.OngoingPartitionReassignment,
                partition_index=partition,
                replicas=state.replicas,
                adding_replicas=state.adding,
                removing_replicas=state.removing,
            )
        )
    return ctx.make(
        resp.ListPartitionReassignmentsResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(
            ctx.make(resp.OngoingTopicReassignment, name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )
