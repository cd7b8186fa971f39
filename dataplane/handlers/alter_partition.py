"""AlterPartition (56): a partition leader asks the controller to change the ISR.

Only the active controller answers. Each change is checked against the partition's
current leader, leader epoch (FENCED_LEADER_EPOCH) and partition epoch
(INVALID_UPDATE_VERSION), so a deposed leader cannot change anything. The accepted changes
of one request commit together, as one metadata entry.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.alter_partition.v3 import request as req
from kio.schema.alter_partition.v3 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster.controller import IsrChange
from dataplane.cluster.image import PartitionState
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

API_KEY = 56
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
    asked: list[tuple[Any, Any, IsrChange | None]] = []  # (topic, partition, change)
    for topic in request.topics:
        info = image.topics_by_id.get(topic.topic_id)
        for p in topic.partitions:
            change = None
            if info is not None:
                change = IsrChange(
                    info.name,
                    int(p.partition_index),
                    int(p.leader_epoch),
                    int(p.partition_epoch),
                    tuple(int(b.broker_id) for b in p.new_isr_with_epochs),
                )
            asked.append((topic, p, change))
    changes = [change for _, _, change in asked if change is not None]
    try:
        outcomes = iter(await controller.alter_partitions(int(request.broker_id), changes))
    except BrokerError as exc:  # the controller stopped leading: the whole request
        outcomes = iter([exc] * len(changes))
    answers: dict[Any, list[Any]] = {}
    for topic, p, change in asked:
        outcome = None if change is None else next(outcomes)
        answers.setdefault(topic.topic_id, []).append(_partition(ctx, p, outcome))
    topics = [
        ctx.make(resp.TopicData, topic_id=topic_id, partitions=tuple(parts))
        for topic_id, parts in answers.items()
    ]
    return ctx.make(
        resp.AlterPartitionResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        topics=tuple(topics),
    )


def _partition(
    ctx: RequestContext,
    p: Any,
    outcome: PartitionState | BrokerError | None,
) -> Any:
    code, leader, epoch, partition_epoch = ErrorCode.none, -1, -1, -1
    isr: tuple[int, ...] = ()
    if outcome is None:
        code = ErrorCode.unknown_topic_id
    elif isinstance(outcome, BrokerError):
        code = error_code_for(outcome)
    else:
        leader, epoch = outcome.leader, outcome.leader_epoch
        isr, partition_epoch = outcome.isr, outcome.partition_epoch
    return ctx.make(
        resp.PartitionData,
        partition_index=p.partition_index,
        error_code=code,
        leader_id=leader,
        leader_epoch=epoch,
        isr=tuple(isr),
        leader_recovery_state=0,
        partition_epoch=partition_epoch,
    )
