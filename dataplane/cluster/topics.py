"""Creating a topic: one cluster operation — validate, place, record — used by the
CreateTopics handler, auto-creation and the internal topics.

``create_topic(changes, topic)`` runs on the active controller inside
``QuorumController.decide``: it checks the request as Kafka's controller does, in Kafka's
order, and records the topic and its partitions in ``changes`` (committed with the rest of
the decision). Checks: the name (INVALID_TOPIC_EXCEPTION, also for '.'/'_' collisions),
existence (TOPIC_ALREADY_EXISTS), the configs (INVALID_CONFIG naming the key), then the
layout: a manual assignment (registered brokers only, consecutive partitions, one replica
count), or a partition count and replication factor where -1 means the broker default
(``num.partitions``, ``default.replication.factor``), and ``max.partitions.per.topic``.
Messages are Kafka's word for word.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from dataplane.cluster.changes import Changes
from dataplane.config import BrokerConfig
from dataplane.config.rules import check_topic_name, colliding_topic, validate_topic_configs
from wire.errors import (
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidTopic,
    TopicAlreadyExists,
)

DEFAULT = -1
"""A partition count or replication factor of -1: the broker's default."""


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    partitions: int = DEFAULT
    replication_factor: int = DEFAULT
    configs: dict[str, str | None] = field(default_factory=dict)
    assignment: tuple[tuple[int, tuple[int, ...]], ...] = ()
    """A manual assignment: (partition index, replica broker ids) pairs; empty for none."""


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    replication_factor: int
    overrides: dict[str, str]
    """The topic's config overrides as stored."""


def requested_partitions(config: BrokerConfig, topic: NewTopic) -> int:
    """How many partitions ``topic`` asks for (for the per-request limit)."""
    if topic.assignment:
        return len(topic.assignment)
    if topic.partitions == DEFAULT:
        return config.get_int("num.partitions")
    return max(topic.partitions, 0)


def create_topic(
    changes: Changes, config: BrokerConfig, topic: NewTopic, *, validate_only: bool = False
) -> CreatedTopic:
    """Validate ``topic`` against the image and record its creation in ``changes`` (nothing
    is recorded with ``validate_only``); raises the typed error Kafka answers with."""
    image = changes.image
    name = topic.name
    check_topic_name(name)
    other = colliding_topic(name, image.topics)
    if other is not None:
        raise InvalidTopic(f"Topic '{name}' collides with existing topic: {other}")
    if name in image.topics:
        raise TopicAlreadyExists(f"Topic '{name}' already exists.")
    validate_topic_configs(
        topic.configs, tiered=config.get_bool("remote.log.storage.system.enable")
    )
    overrides = {k: v for k, v in topic.configs.items() if v is not None}
    partitions, factor, assignment = _layout(changes, config, topic)
    limit = config.get_int("max.partitions.per.topic")
    if partitions > limit:
        raise InvalidPartitions(
            f"Number of partitions {partitions} exceeds max.partitions.per.topic={limit}."
        )
    if validate_only:
        topic_id = uuid.uuid4()  # as Kafka: validate-only answers carry a fresh id too
    else:
        topic_id = uuid.UUID(changes.create_topic(name, partitions, factor, overrides, assignment))
    return CreatedTopic(name, topic_id, partitions, factor, overrides)


def _layout(
    changes: Changes, config: BrokerConfig, topic: NewTopic
) -> tuple[int, int, list[list[int]] | None]:
    """(partition count, replication factor, manual assignment or None)."""
    if topic.assignment:
        if topic.replication_factor != DEFAULT:
            raise InvalidRequest(
                "A manual partition assignment was specified, but replication factor was "
                "not set to -1."
            )
        if topic.partitions != DEFAULT:
            raise InvalidRequest(
                "A manual partition assignment was specified, but numPartitions was not set to -1."
            )
        seen: set[int] = set()
        replicas: int | None = None
        lists: dict[int, list[int]] = {}
        for index, broker_ids in topic.assignment:
            if index in seen:
                raise InvalidReplicaAssignment(
                    f"Found multiple manual partition assignments for partition {index}"
                )
            seen.add(index)
            check_assignment(changes, broker_ids, replicas)
            replicas = len(broker_ids)
            lists[index] = list(broker_ids)
        if seen != set(range(len(seen))):
            raise InvalidReplicaAssignment(
                "partitions should be a consecutive 0-based integer sequence"
            )
        return len(seen), replicas or 1, [lists[p] for p in range(len(seen))]
    if topic.replication_factor < DEFAULT or topic.replication_factor == 0:
        raise InvalidReplicationFactor(
            "Replication factor must be larger than 0, or -1 to use the default value."
        )
    if topic.partitions < DEFAULT or topic.partitions == 0:
        raise InvalidPartitions("Number of partitions was set to an invalid non-positive value.")
    partitions = topic.partitions
    if partitions == DEFAULT:
        partitions = config.get_int("num.partitions")
    factor = topic.replication_factor
    if factor == DEFAULT:
        factor = config.get_int("default.replication.factor")
    brokers = len(changes.image.live_brokers())
    if factor > brokers:
        raise InvalidReplicationFactor(
            f"Unable to replicate the partition {factor} time(s): The target replication "
            f"factor of {factor} cannot be reached because only {brokers} broker(s) are "
            "registered or some brokers have all their log directories cordoned."
        )
    return partitions, factor, None


def check_assignment(changes: Changes, broker_ids: Sequence[int], replicas: int | None) -> None:
    """Kafka's validateManualPartitionAssignment against the registered brokers."""
    if not broker_ids:
        raise InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list."
        )
    previous: int | None = None
    for broker_id in sorted(broker_ids):
        if broker_id not in changes.image.brokers:
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
