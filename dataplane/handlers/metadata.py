"""Metadata (3): brokers, controller, topics with ids, partitions and leaders."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from dataplane.errors import BrokerError, error_code_for
from dataplane.handlers.context import RequestContext
from dataplane.metadata import TopicInfo

API_KEY = 3
ZERO = datetime.timedelta(0)
ZERO_UUID = uuid.UUID(int=0)
UNSET_OPERATIONS = -(2**31)
# Without an authorizer every operation is allowed; the bit sets Kafka reports then.
CLUSTER_OPERATIONS = 8096  # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS
#                            ALTER_CONFIGS IDEMPOTENT_WRITE
TOPIC_OPERATIONS = 3576  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    host, port = broker.advertised
    brokers = (ctx.make("MetadataResponseBroker", node_id=broker.node_id, host=host, port=port),)
    requested = request.topics
    if ctx.api_version == 0 and not requested:
        requested = None  # v0: an empty list means all topics
    topic_ops = (
        TOPIC_OPERATIONS
        if getattr(request, "include_topic_authorized_operations", False)
        else UNSET_OPERATIONS
    )
    topics: list[Any] = []
    if requested is None:
        topics = [_topic(ctx, info, topic_ops) for info in broker.metadata.topics.values()]
    else:
        allow_auto = getattr(request, "allow_auto_topic_creation", True)
        for wanted in requested:
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            if name is None and topic_id not in (None, ZERO_UUID):
                info = broker.metadata.topics_by_id.get(topic_id)
                if info is None:
                    topics.append(_error_topic(ctx, None, ErrorCode.unknown_topic_id, topic_id))
                else:
                    topics.append(_topic(ctx, info, topic_ops))
                continue
            if name is None:
                continue
            info = broker.metadata.topics.get(name)
            if info is None and allow_auto:
                try:
                    info = broker.auto_create(name)
                except BrokerError as exc:
                    topics.append(_error_topic(ctx, name, error_code_for(exc)))
                    continue
            if info is None:
                topics.append(_error_topic(ctx, name, ErrorCode.unknown_topic_or_partition))
            else:
                topics.append(_topic(ctx, info, topic_ops))
    cluster_ops = (
        CLUSTER_OPERATIONS
        if getattr(request, "include_cluster_authorized_operations", False)
        else UNSET_OPERATIONS
    )
    return ctx.make(
        "MetadataResponse",
        throttle_time=ZERO,
        brokers=brokers,
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.node_id,
        topics=tuple(topics),
        cluster_authorized_operations=cluster_ops,
        error_code=ErrorCode.none,
    )


def _topic(ctx: RequestContext, info: TopicInfo, operations: int) -> Any:
    node = ctx.broker.node_id
    partitions = tuple(
        ctx.make(
            "MetadataResponsePartition",
            error_code=ErrorCode.none,
            partition_index=p,
            leader_id=node,
            leader_epoch=ctx.broker.logs.get(info.name, p).leader_epoch
            if (info.name, p) in ctx.broker.logs.logs
            else 0,
            replica_nodes=(node,),
            isr_nodes=(node,),
            offline_replicas=(),
        )
        for p in range(info.partitions)
    )
    return ctx.make(
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


def _error_topic(
    ctx: RequestContext, name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None
) -> Any:
    return ctx.make(
        "MetadataResponseTopic",
        error_code=code,
        name=name,
        topic_id=topic_id or ZERO_UUID,
        is_internal=False,
        partitions=(),
    )
