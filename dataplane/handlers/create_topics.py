"""CreateTopics (19): validate each topic as Kafka's controller does, then create it.

Checks, in Kafka's order: duplicate names in the request (INVALID_REQUEST, listed last),
more than 10000 partitions in the whole request (POLICY_VIOLATION for every topic), the
name (INVALID_TOPIC_EXCEPTION, also for '.'/'_' collisions), existence
(TOPIC_ALREADY_EXISTS), configs (INVALID_CONFIG naming the key), then the partition
layout: a manual assignment (registered brokers only), or a partition count
and replication factor where -1 means the broker default (num.partitions,
default.replication.factor). ``validate_only`` runs every check and creates nothing.
v5+ answers carry the partition count, replication factor and every config of the topic.

A topic of the same name that is still being deleted is waited for first, so a new
topic never inherits the old one's partition logs.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from dataplane.cluster.changes import Changes
from dataplane.config import rules
from dataplane.handlers import _configs
from dataplane.handlers._controller import via_controller
from dataplane.handlers.context import RequestContext
from wire.errors import (
    BrokerError,
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidTopic,
    PolicyViolation,
    TopicAlreadyExists,
    error_code_for,
    error_message_for,
)

API_KEY = 19
ZERO = datetime.timedelta(0)
MAX_PARTITIONS_PER_REQUEST = 10000
"""Kafka's controller refuses larger requests as a whole (POLICY_VIOLATION)."""
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Plan:
    partitions: int
    replication_factor: int
    assignment: list[list[int]] | None = None


def handle(ctx: RequestContext, request: Any) -> Any:
    if not request.validate_only and _pending_removals(ctx, request):
        return _after_removals(ctx, request)
    return via_controller(ctx, request, _create_all, _settled(ctx))


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
    return await via_controller(ctx, request, _create_all, _settled(ctx))


def _create_all(ctx: RequestContext, request: Any, changes: Changes) -> Any:
    counts = Counter(t.name for t in request.topics)
    unique = [t for t in request.topics if counts[t.name] == 1]
    results: list[Any] = []
    if sum(_requested_partitions(ctx, t) for t in unique) > MAX_PARTITIONS_PER_REQUEST:
        refusal = PolicyViolation("Excessively large number of partitions per request.")
        results = [_error(ctx, t.name, refusal) for t in unique]
    else:
        for topic in unique:
            try:
                results.append(_create(ctx, topic, changes, validate_only=request.validate_only))
            except BrokerError as exc:
                results.append(_error(ctx, topic.name, exc))
            except OSError as exc:
                log.error("creating topic %s failed: %s", topic.name, exc)
                results.append(_error(ctx, topic.name, exc))
    duplicate = InvalidRequest("Duplicate topic name.")
    for name in dict.fromkeys(t.name for t in request.topics if counts[t.name] > 1):
        results.append(_error(ctx, name, duplicate))
    return ctx.make("CreateTopicsResponse", throttle_time=ZERO, topics=tuple(results))


def _requested_partitions(ctx: RequestContext, topic: Any) -> int:
    if topic.assignments:
        return len(topic.assignments)
    if topic.num_partitions == -1:
        return ctx.broker.config.get_int("num.partitions")
    return max(topic.num_partitions, 0)


def _create(ctx: RequestContext, topic: Any, changes: Changes, *, validate_only: bool) -> Any:
    broker = ctx.broker
    name: str = topic.name
    rules.check_topic_name(name)
    other = rules.colliding_topic(name, broker.metadata.topics)
    if other is not None:
        raise InvalidTopic(f"Topic '{name}' collides with existing topic: {other}")
    if name in broker.metadata.topics:
        raise TopicAlreadyExists(f"Topic '{name}' already exists.")
    configs: dict[str, str | None] = {c.name: c.value for c in topic.configs}
    rules.validate_topic_configs(
        configs, tiered=broker.config.get_bool("remote.log.storage.system.enable")
    )
    overrides = {k: v for k, v in configs.items() if v is not None}
    plan = _plan(ctx, topic, changes)
    limit = broker.config.get_int("max.partitions.per.topic")
    if plan.partitions > limit:
        raise InvalidPartitions(
            f"Number of partitions {plan.partitions} exceeds max.partitions.per.topic={limit}."
        )
    if validate_only:
        topic_id = uuid.uuid4()  # as Kafka: validate-only answers carry a fresh id too
    else:
        topic_id = uuid.UUID(
            changes.create_topic(
                name, plan.partitions, plan.replication_factor, overrides, plan.assignment
            )
        )
        log.info(
            "created topic %s (%s) with %d partition(s) and configs %s",
            name,
            topic_id,
            plan.partitions,
            overrides,
        )
    configs_out = (
        tuple(
            ctx.make(
                "CreatableTopicConfigs",
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.is_sensitive,
            )
            for entry in _configs.topic_entries(broker, overrides)
        )
        if ctx.api_version >= 5
        else ()
    )
    return ctx.make(
        "CreatableTopicResult",
        name=name,
        topic_id=topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=0,
        num_partitions=plan.partitions,
        replication_factor=plan.replication_factor,
        configs=configs_out,
    )


def _plan(ctx: RequestContext, topic: Any, changes: Changes) -> _Plan:
    """Partition count and replication factor, or the Kafka error for the request's."""
    config = ctx.broker.config
    if topic.assignments:
        if topic.replication_factor != -1:
            raise InvalidRequest(
                "A manual partition assignment was specified, but replication factor was "
                "not set to -1."
            )
        if topic.num_partitions != -1:
            raise InvalidRequest(
                "A manual partition assignment was specified, but numPartitions was not set to -1."
            )
        seen: set[int] = set()
        replicas: int | None = None
        lists: dict[int, list[int]] = {}
        for assignment in topic.assignments:
            if assignment.partition_index in seen:
                raise InvalidReplicaAssignment(
                    "Found multiple manual partition assignments for partition "
                    f"{assignment.partition_index}"
                )
            seen.add(assignment.partition_index)
            check_assignment(ctx, list(assignment.broker_ids), replicas)
            replicas = len(assignment.broker_ids)
            lists[assignment.partition_index] = [int(b) for b in assignment.broker_ids]
        if seen != set(range(len(seen))):
            raise InvalidReplicaAssignment(
                "partitions should be a consecutive 0-based integer sequence"
            )
        return _Plan(len(seen), replicas or 1, [lists[p] for p in range(len(seen))])
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise InvalidReplicationFactor(
            "Replication factor must be larger than 0, or -1 to use the default value."
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise InvalidPartitions("Number of partitions was set to an invalid non-positive value.")
    partitions = topic.num_partitions
    if partitions == -1:
        partitions = config.get_int("num.partitions")
    factor = topic.replication_factor
    if factor == -1:
        factor = config.get_int("default.replication.factor")
    brokers = len(changes.image.live_brokers())
    if factor > brokers:
        raise InvalidReplicationFactor(
            f"Unable to replicate the partition {factor} time(s): The target replication "
            f"factor of {factor} cannot be reached because only {brokers} broker(s) are "
            "registered or some brokers have all their log directories cordoned."
        )
    return _Plan(partitions, factor)


def check_assignment(ctx: RequestContext, broker_ids: list[int], replicas: int | None) -> None:
    """Kafka's validateManualPartitionAssignment against the registered brokers."""
    if not broker_ids:
        raise InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list."
        )
    previous: int | None = None
    for broker_id in sorted(broker_ids):
        if broker_id not in ctx.broker.metadata.brokers:
            raise InvalidReplicaAssignment(
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered."
            )
        if broker_id == previous:
            raise InvalidReplicaAssignment(
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        previous = broker_id
    if replicas is not None and len(broker_ids) != replicas:
        raise InvalidReplicaAssignment(
            f"The manual partition assignment includes a partition with {len(broker_ids)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replicas} replica(s)."
        )


def _error(ctx: RequestContext, name: str, exc: BaseException) -> Any:
    return ctx.make(
        "CreatableTopicResult",
        name=name,
        topic_id=None,
        error_code=error_code_for(exc),
        error_message=error_message_for(exc),
        topic_config_error_code=0,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )
