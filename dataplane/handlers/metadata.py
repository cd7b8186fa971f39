"""Metadata (3): brokers, controller, topics with ids, partitions and leaders.

Everything comes from this broker's metadata image: the live (unfenced) brokers, each
partition's leader, leader epoch, replicas, ISR and offline replicas (fenced ones). A
partition without a leader is LEADER_NOT_AVAILABLE. Unknown topics are auto-created
through the controller when ``auto.create.topics.enable`` allows it.

Authorization (Kafka's): a request for all topics lists only those the caller may
DESCRIBE; a topic asked for by name or id without DESCRIBE is TOPIC_AUTHORIZATION_FAILED
(whether it exists or not); auto-creation needs CREATE on the cluster or the topic. The
authorized-operations fields are the caller's, when asked for.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any, TypeAlias

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v13 import response as resp

from dataplane.authorizer import Operation, ResourceType
from dataplane.handlers.context import RequestContext, cluster_operations
from dataplane.metadata import TopicInfo
from wire.errors import BrokerError, error_code_for

VersionedRequest: TypeAlias = Any
"""Its fields change shape between versions (read by version), which no single kio class
describes."""
API_KEY = 3
ZERO = datetime.timedelta(0)
ZERO_UUID = uuid.UUID(int=0)
UNSET_OPERATIONS = -(2**31)
LISTENER_NOT_FOUND_VERSION = 6


def handle(ctx: RequestContext, request: VersionedRequest) -> Any:
    requested = request.topics
    if ctx.api_version == 0 and not requested:
        requested = None  # v0: an empty list means all topics
    lost = ctx.broker.replicas.lost_leaders()
    if lost:
        waiting = _named_leaders(ctx, requested) & set(lost)
        if waiting:
            return _after_fences(ctx, request, requested, waiting, max(lost[i] for i in waiting))
    return _respond(ctx, request, requested)


def _named_leaders(ctx: RequestContext, requested: Any) -> set[int]:
    """The leaders of the partitions an answer to ``requested`` would list."""
    image = ctx.broker.metadata
    if requested is None:
        return {state.leader for state in image.partitions.values()}
    names = set()
    for wanted in requested:
        name = getattr(wanted, "name", None)
        topic_id = getattr(wanted, "topic_id", None)
        if name is None and topic_id is not None:
            info = image.topics_by_id.get(topic_id)
            name = None if info is None else info.name
        if name is not None:
            names.add(name)
    return {state.leader for (topic, _), state in image.partitions.items() if topic in names}


async def _after_fences(
    ctx: RequestContext, request: Any, requested: Any, waiting: set[int], until: float
) -> Any:
    """A leader named in the answer closed this broker's fetch connection a moment ago
    (``metadata.leader.loss.wait.ms``) and is not fenced yet: if its process died, its
    supervisor's FenceBroker moves its leaderships within ~30 ms. A client asks for
    metadata the instant its own connection to the dead leader resets; answered at once
    it would learn the dead leader again and (librdkafka) not ask again for a second.
    Waiting for the fence, bounded, answers with the new leaders."""
    await ctx.broker.replicas.wait_for_fences(waiting, until)
    answer = _respond(ctx, request, requested)
    return await answer if asyncio.iscoroutine(answer) else answer


def _respond(ctx: RequestContext, request: Any, requested: Any) -> Any:
    missing: list[str] = []
    if requested is not None and getattr(request, "allow_auto_topic_creation", True):
        topics = ctx.broker.metadata.topics
        missing = [
            w.name
            for w in requested
            if getattr(w, "name", None)
            and w.name not in topics
            and ctx.on_topic(Operation.DESCRIBE, w.name)
        ]
    if missing and ctx.broker.config.get_bool("auto.create.topics.enable"):
        return _after_auto_create(ctx, request, requested, missing)
    return _answer(ctx, request, requested, {})


async def _after_auto_create(
    ctx: RequestContext, request: Any, requested: Any, missing: list[str]
) -> Any:
    errors: dict[str, ErrorCode] = {}
    may_create = ctx.on_cluster(Operation.CREATE)
    for name in dict.fromkeys(missing):
        if not may_create and not ctx.on_topic(Operation.CREATE, name):
            errors[name] = ErrorCode.topic_authorization_failed
            continue
        try:
            await ctx.broker.auto_create(name)
        except BrokerError as exc:
            errors[name] = error_code_for(exc)
    return _answer(ctx, request, requested, errors)


def _answer(ctx: RequestContext, request: Any, requested: Any, errors: dict[str, ErrorCode]) -> Any:
    broker = ctx.broker
    image = broker.metadata
    reachable = {
        b.broker_id: address
        for b in image.live_brokers()
        if (address := b.address_on(ctx.listener)) is not None
    }
    brokers = tuple(
        ctx.make(resp.MetadataResponseBroker, node_id=node, host=host, port=port)
        for node, (host, port) in reachable.items()
    )
    if not brokers:  # not registered yet: this broker, on the listener asked through
        own = broker.cluster.endpoints.get(ctx.listener or "")
        host, port = broker.advertised if own is None else (str(own[0]), int(own[1]))
        brokers = (
            ctx.make(resp.MetadataResponseBroker, node_id=broker.node_id, host=host, port=port),
        )
    topic_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    topics: list[Any] = []
    if requested is None:
        topics = [
            _topic(ctx, info, topic_ops, reachable)
            for info in image.topics.values()
            if ctx.on_topic(Operation.DESCRIBE, info.name)
        ]
    else:
        # Kafka's order: the topics it may describe, then those it may not create, then
        # those it may not describe
        not_created: list[Any] = []
        hidden: list[Any] = []
        denied = ErrorCode.topic_authorization_failed
        for wanted in requested:
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            if name is None and topic_id not in (None, ZERO_UUID):
                info = image.topics_by_id.get(topic_id)
                if info is None:
                    topics.append(_error_topic(ctx, None, ErrorCode.unknown_topic_id, topic_id))
                elif not ctx.on_topic(Operation.DESCRIBE, info.name):
                    hidden.append(_error_topic(ctx, None, denied, topic_id))
                else:
                    topics.append(_topic(ctx, info, topic_ops, reachable))
                continue
            if name is None:
                continue
            info = image.topics.get(name)
            if not ctx.on_topic(Operation.DESCRIBE, name):
                hidden.append(_error_topic(ctx, name, denied))
            elif info is None:
                code = errors.get(name, ErrorCode.unknown_topic_or_partition)
                (not_created if code == denied else topics).append(_error_topic(ctx, name, code))
            else:
                topics.append(_topic(ctx, info, topic_ops, reachable))
        topics += not_created + hidden
    cluster_ops = (
        cluster_operations(ctx)
        if getattr(request, "include_cluster_authorized_operations", False)
        else UNSET_OPERATIONS
    )
    return ctx.make(
        resp.MetadataResponse,
        throttle_time=ZERO,
        brokers=brokers,
        cluster_id=image.cluster_id,
        controller_id=broker.cluster.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=cluster_ops,
        error_code=ErrorCode.none,
    )


def _topic(
    ctx: RequestContext, info: TopicInfo, with_operations: bool, reachable: dict[int, Any]
) -> Any:
    """``reachable``: the brokers that have the request's listener; a partition whose leader
    has not is LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before), as Kafka's."""
    image = ctx.broker.metadata
    parts: list[Any] = []
    for p in range(info.partitions):
        state = image.partitions.get((info.name, p))
        if state is None:
            continue
        offline = tuple(
            b for b in state.replicas if b not in image.brokers or image.brokers[b].fenced
        )
        parts.append(
            ctx.make(
                resp.MetadataResponsePartition,
                error_code=_partition_error(ctx, state.leader, reachable),
                partition_index=p,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=state.replicas,
                isr_nodes=state.isr,
                offline_replicas=offline,
            )
        )
    return ctx.make(
        resp.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.internal,
        partitions=tuple(parts),
        topic_authorized_operations=(
            ctx.operations(ResourceType.TOPIC, info.name) if with_operations else UNSET_OPERATIONS
        ),
    )


def _error_topic(
    ctx: RequestContext, name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None
) -> Any:
    return ctx.make(
        resp.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id or ZERO_UUID,
        is_internal=False,
        partitions=(),
    )


def _partition_error(ctx: RequestContext, leader: int, reachable: dict[int, Any]) -> ErrorCode:
    if leader < 0:
        return ErrorCode.leader_not_available
    if leader not in reachable and reachable:
        return (
            ErrorCode.listener_not_found
            if ctx.api_version >= LISTENER_NOT_FOUND_VERSION
            else ErrorCode.leader_not_available
        )
    return ErrorCode.none
