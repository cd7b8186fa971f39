"""OffsetForLeaderEpoch (23): the end offset of a leader epoch (consumers validate
their position with it after a leader change)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from dataplane.errors import BrokerError, error_code_for
from dataplane.handlers.context import RequestContext

API_KEY = 23
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            try:
                plog = ctx.broker.logs.get(topic.topic, p.partition)
                current = plog.leader_epoch
                if p.leader_epoch > current:
                    epoch, end = -1, -1
                else:
                    epoch, end = current, plog.log_end_offset
                partitions.append(
                    ctx.make(
                        "EpochEndOffset",
                        error_code=ErrorCode.none,
                        partition=p.partition,
                        leader_epoch=epoch,
                        end_offset=end,
                    )
                )
            except BrokerError as exc:
                partitions.append(
                    ctx.make(
                        "EpochEndOffset",
                        error_code=error_code_for(exc),
                        partition=p.partition,
                        leader_epoch=-1,
                        end_offset=-1,
                    )
                )
        topics.append(
            ctx.make("OffsetForLeaderTopicResult", topic=topic.topic, partitions=tuple(partitions))
        )
    return ctx.make("OffsetForLeaderEpochResponse", throttle_time=ZERO, topics=tuple(topics))
