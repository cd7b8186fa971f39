"""AlterPartition (56): a partition leader asks the controller to change the ISR.

Only the active controller answers. Each change is checked against the partition's
current leader, leader epoch (FENCED_LEADER_EPOCH) and partition epoch
(INVALID_UPDATE_VERSION), so a deposed leader cannot change anything.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.alter_partition.v3 import request as req
from kio.schema.alter_partition.v3 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, NotController, error_code_for

API_KEY = 56
MIN_VERSION = 3
INTERNAL = True
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.AlterPartitionRequest) -> Any:
    return _alter(ctx, request)


async def _alter(ctx: RequestContext, request: Any) -> Any:
    controller = ctx.broker.cluster.local_controller()
    if controller is None or not ctx.on_cluster(Operation.CLUSTER_ACTION):  # brokers only
        return ctx.make(
            resp.AlterPartitionResponse,
            throttle_time=ZERO,
            error_code=ErrorCode.not_controller
            if controller is None
            else ErrorCode.cluster_authorization_failed,
            topics=(),
        )
    image = ctx.broker.metadata
    topics = []
    for topic in request.topics:
        info = image.topics_by_id.get(topic.topic_id)
        parts = []
        for p in topic.partitions:
            code, leader, epoch, partition_epoch = ErrorCode.none, -1, -1, -1
            isr: tuple[int, ...] = ()
            try:
                if info is None:
                    raise NotController("unknown topic id")  # replaced below
                state = await controller.alter_partition(
                    info.name,
                    int(p.partition_index),
                    int(request.broker_id),
                    int(p.leader_epoch),
                    int(p.partition_epoch),
                    [int(b.broker_id) for b in p.new_isr_with_epochs],
                )
                leader, epoch = state.leader, state.leader_epoch
                isr, partition_epoch = state.isr, state.partition_epoch
            except BrokerError as exc:
                code = ErrorCode.unknown_topic_id if info is None else error_code_for(exc)
            parts.append(
                ctx.make(
                    resp.PartitionData,
                    partition_index=p.partition_index,
                    error_code=code,
                    leader_id=leader,
                    leader_epoch=epoch,
                    isr=tuple(isr),
                    leader_recovery_state=0,
                    partition_epoch=partition_epoch,
                )
            )
        topics.append(ctx.make(resp.TopicData, topic_id=topic.topic_id, partitions=tuple(parts)))
    return ctx.make(
        resp.AlterPartitionResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        topics=tuple(topics),
    )
