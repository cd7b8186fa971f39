"""CreateTopics (19): each topic validated and created by the cluster's one topic-creation
operation (``dataplane.cluster.topics.create_topic``), decided on the active controller.

The request-wide checks come first, in Kafka's order: duplicate names in the request
(INVALID_REQUEST, listed last), more than 10000 partitions in the whole request
(POLICY_VIOLATION for every topic). ``validate_only`` runs every check and creates nothing.
v5+ answers carry the partition count, replication factor and every config of the topic.

A topic of the same name that is still being deleted is waited for first, so a new
topic never inherits the old one's partition logs.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from kio.schema.create_topics.v7 import request as req
from kio.schema.create_topics.v7 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster.changes import Changes
from dataplane.cluster.topics import CreatedTopic, NewTopic, create_topic, requested_partitions
from dataplane.handlers import _configs
from dataplane.handlers._controller import via_controller_except
from dataplane.handlers.context import RequestContext
from wire.errors import (
    BrokerError,
    InvalidRequest,
    PolicyViolation,
    TopicAuthorizationFailed,
    error_code_for,
    error_message_for,
)

API_KEY = 19
ZERO = datetime.timedelta(0)
MAX_PARTITIONS_PER_REQUEST = 10000
"""Kafka's controller refuses larger requests as a whole (POLICY_VIOLATION)."""
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: req.CreateTopicsRequest) -> Any:
    if not request.validate_only and _pending_removals(ctx, request):
        return _after_removals(ctx, request)
    return _via_controller(ctx, request)


def _via_controller(ctx: RequestContext, request: Any) -> Any:
    """CREATE on the cluster, or on each topic (Kafka's), checked here: a forwarded request
    reaches the controller from this broker."""
    anywhere = ctx.on_cluster(Operation.CREATE)

    def refusal(topic: Any) -> Any | None:
        if anywhere or ctx.on_topic(Operation.CREATE, topic.name):
            return None
        return _error(ctx, topic.name, TopicAuthorizationFailed("Authorization failed."))

    return via_controller_except(
        ctx, request, _create_all, _settled(ctx), items="topics", results="topics", refusal=refusal
    )


def _settled(ctx: RequestContext) -> Callable[[Any], bool]:
    image = ctx.broker.metadata

    def created(response: Any) -> bool:
        return all(
            t.name in image.topics for t in response.topics if t.error_code == ErrorCode.none
        )

    return created


def _pending_removals(ctx: RequestContext, request: Any) -> list[asyncio.Task[None]]:
    removals = ctx.broker.topic_removals
    return [removals[t.name] for t in request.topics if t.name in removals]


async def _after_removals(ctx: RequestContext, request: Any) -> Any:
    while pending := _pending_removals(ctx, request):
        await asyncio.gather(*pending, return_exceptions=True)
    return await _via_controller(ctx, request)


def _create_all(ctx: RequestContext, request: Any, changes: Changes) -> Any:
    config = ctx.broker.config
    counts = Counter(t.name for t in request.topics)
    unique = [_new_topic(t) for t in request.topics if counts[t.name] == 1]
    results: list[Any] = []
    if sum(requested_partitions(config, t) for t in unique) > MAX_PARTITIONS_PER_REQUEST:
        refusal = PolicyViolation("Excessively large number of partitions per request.")
        results = [_error(ctx, t.name, refusal) for t in unique]
    else:
        for topic in unique:
            try:
                created = create_topic(changes, config, topic, validate_only=request.validate_only)
            except (BrokerError, OSError) as exc:
                results.append(_error(ctx, topic.name, exc))
                continue
            if not request.validate_only:
                log.info(
                    "created topic %s (%s) with %d partition(s) and configs %s",
                    created.name,
                    created.topic_id,
                    created.partitions,
                    created.overrides,
                )
            results.append(_result(ctx, created))
    duplicate = InvalidRequest("Duplicate topic name.")
    for name in dict.fromkeys(t.name for t in request.topics if counts[t.name] > 1):
        results.append(_error(ctx, name, duplicate))
    return ctx.make(resp.CreateTopicsResponse, throttle_time=ZERO, topics=tuple(results))


def _new_topic(topic: Any) -> NewTopic:
    return NewTopic(
        name=topic.name,
        partitions=int(topic.num_partitions),
        replication_factor=int(topic.replication_factor),
        configs={c.name: c.value for c in topic.configs},
        assignment=tuple(
            (int(a.partition_index), tuple(int(b) for b in a.broker_ids)) for a in topic.assignments
        ),
    )


def _result(ctx: RequestContext, created: CreatedTopic) -> Any:
    """v5+ answers carry the partition count, replication factor and every config."""
    configs_out = (
        tuple(
            ctx.make(
                resp.CreatableTopicConfigs,
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.is_sensitive,
            )
            for entry in _configs.topic_entries(ctx.broker, created.overrides)
        )
        if ctx.api_version >= 5
        else ()
    )
    return ctx.make(
        resp.CreatableTopicResult,
        name=created.name,
        topic_id=created.topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=0,
        num_partitions=created.partitions,
        replication_factor=created.replication_factor,
        configs=configs_out,
    )


def _error(ctx: RequestContext, name: str, exc: BaseException) -> Any:
    return ctx.make(
        resp.CreatableTopicResult,
        name=name,
        topic_id=None,
        error_code=error_code_for(exc),
        error_message=error_message_for(exc),
        topic_config_error_code=0,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )
