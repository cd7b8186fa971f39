"""OffsetForLeaderEpoch (23): where the leader's log for an epoch ends.

Consumers validate their position with it after a leader change; followers use it to find
where their log diverges from the leader's and truncate there. The answer is Kafka's: for
the leader's current epoch its log end; for an older one the start of the next larger
epoch in the leader-epoch cache (with the largest epoch not above the requested one); -1
for an epoch before the first the log knows. Only the leader answers.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4 import request as req
from kio.schema.offset_for_leader_epoch.v4 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, TopicAuthorizationFailed, error_code_for

API_KEY = 23
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.OffsetForLeaderEpochRequest) -> Any:
    # a follower needs CLUSTER_ACTION on the cluster, a consumer DESCRIBE on each topic
    follower = getattr(request, "replica_id", -1) >= 0
    follower_allowed = follower and ctx.on_cluster(Operation.CLUSTER_ACTION)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            try:
                if not (
                    follower_allowed if follower else ctx.on_topic(Operation.DESCRIBE, topic.topic)
                ):
                    raise TopicAuthorizationFailed(f"not authorized for topic {topic.topic}")
                part = ctx.broker.replicas.leader(
                    topic.topic, p.partition, getattr(p, "current_leader_epoch", -1)
                )
                epoch, end = part.plog.end_offset_for_epoch(p.leader_epoch)
                partitions.append(
                    ctx.make(
                        resp.EpochEndOffset,
                        error_code=ErrorCode.none,
                        partition=p.partition,
                        leader_epoch=epoch,
                        end_offset=end,
                    )
                )
            except BrokerError as exc:
                partitions.append(
                    ctx.make(
                        resp.EpochEndOffset,
                        error_code=error_code_for(exc),
                        partition=p.partition,
                        leader_epoch=-1,
                        end_offset=-1,
                    )
                )
        topics.append(
            ctx.make(
                resp.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(partitions)
            )
        )
    return ctx.make(resp.OffsetForLeaderEpochResponse, throttle_time=ZERO, topics=tuple(topics))
