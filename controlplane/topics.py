"""Topic operations of the Topics API, spoken to the brokers in the Kafka admin protocol.

Stopgap until issue 4 (Raft): brokers do not share metadata, so a topic change is applied to
every broker of the cluster, broker 0 first (it serves all client traffic, see reconciler.py),
and reads come from broker 0. A replication factor up to the broker count is accepted but each
broker keeps one copy (replication factor 1) until replication lands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kio.schema.errors import ErrorCode

from controlplane import errors, store
from controlplane.kafka import SOURCE_DYNAMIC_TOPIC, Admin, KafkaResponseError, TopicMetadata
from controlplane.store import BrokerRecord, ClusterRecord, Store

T = TypeVar("T")

_BAD_REQUEST = {
    ErrorCode.invalid_topic_exception,
    ErrorCode.invalid_partitions,
    ErrorCode.invalid_replication_factor,
    ErrorCode.invalid_replica_assignment,
    ErrorCode.invalid_config,
    ErrorCode.invalid_request,
    ErrorCode.policy_violation,
}


@dataclass(frozen=True)
class TopicView:
    cluster: str
    meta: TopicMetadata
    config: dict[str, str] = field(default_factory=dict)
    effective_config: dict[str, str] = field(default_factory=dict)


def map_kafka_error(exc: KafkaResponseError, cluster: str, topic: str) -> errors.ControlPlaneError:
    """The one place where a Kafka error code becomes a control-plane error."""
    code = exc.code
    if code == ErrorCode.topic_already_exists:
        return errors.TopicAlreadyExists(f"topic {topic!r} already exists in cluster {cluster!r}")
    if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id):
        return errors.TopicNotFound(f"topic {topic!r} not found in cluster {cluster!r}")
    if code == ErrorCode.invalid_config:
        return errors.InvalidConfig(f"invalid topic config: {exc.detail}")
    if code in _BAD_REQUEST:
        return errors.BadRequest(f"{exc.detail} ({code.name})")
    if code == ErrorCode.topic_deletion_disabled:
        return errors.PreconditionFailed(
            f"topic deletion is disabled in cluster {cluster!r} (delete.topic.enable=false)"
        )
    return errors.KafkaError(f"{exc} (cluster {cluster!r})")


def validate_topic_config(config: dict[str, str], remove: Sequence[str] = ()) -> None:
    from dataplane.config import TOPIC_CONFIGS
    from dataplane.errors import InvalidConfig as BrokerInvalidConfig

    for key, value in config.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise errors.InvalidConfig(f"unknown topic config {key!r}")
        try:
            definition.parse(value)
        except BrokerInvalidConfig as exc:
            raise errors.InvalidConfig(
                exc.message or f"invalid value {value!r} for {key}"
            ) from None
    for key in remove:
        if key not in TOPIC_CONFIGS:
            raise errors.InvalidConfig(f"unknown topic config {key!r}")


class TopicOps:
    def __init__(self, store_: Store, timeout: float) -> None:
        self.store = store_
        self.timeout = timeout

    def _cluster(self, name: str, *, change: bool) -> tuple[ClusterRecord, list[BrokerRecord]]:
        cluster = self.store.get_cluster(name)
        if cluster is None:
            raise errors.ClusterNotFound(f"cluster {name!r} not found")
        if change and cluster.state != store.ACTIVE:
            raise errors.ClusterNotReady(
                f"cluster {name!r} is {cluster.state}; topics can be changed when it is ACTIVE"
            )
        if cluster.state in (store.CREATING, store.DELETING):
            raise errors.ClusterNotReady(f"cluster {name!r} is {cluster.state}")
        return cluster, self.store.brokers(name)

    async def _on(
        self,
        broker: BrokerRecord,
        what: str,
        call: Callable[[Admin], Awaitable[T]],
        cluster: str,
        topic: str,
    ) -> T:
        """Run one admin call on one broker; transport and Kafka errors become typed errors."""
        try:
            return await call(Admin(broker.host, broker.port, self.timeout))
        except KafkaResponseError as exc:
            raise map_kafka_error(exc, cluster, topic) from None
        except asyncio.IncompleteReadError:
            raise errors.BrokerUnavailable(
                f"broker {broker.broker_id} at {broker.address} closed the connection during "
                f"{what} (it may not support this request yet)"
            ) from None
        except (TimeoutError, OSError) as exc:
            raise errors.BrokerUnavailable(
                f"broker {broker.broker_id} at {broker.address} did not answer {what}: "
                f"{exc or type(exc).__name__}"
            ) from None

    async def create_topic(
        self,
        cluster_name: str,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        config: dict[str, str],
    ) -> TopicView:
        cluster, brokers = self._cluster(cluster_name, change=True)
        if partitions is not None and partitions < 1:
            raise errors.BadRequest(f"invalid partition count {partitions}: must be at least 1")
        if replication_factor is not None and not 1 <= replication_factor <= len(brokers):
            raise errors.BadRequest(
                f"invalid replication factor {replication_factor}: cluster {cluster_name!r} "
                f"has {len(brokers)} broker(s)"
            )
        validate_topic_config(config)
        primary, *others = brokers
        await self._on(
            primary,
            "create topic",
            lambda a: a.create_topic(name, partitions or -1, 1, config),
            cluster_name,
            name,
        )
        await self._everywhere(
            others, "create topic", lambda a: a.create_topic(name, partitions or -1, 1, config)
        )
        return await self.describe_topic(cluster.name, name)

    async def _everywhere(
        self, brokers: Sequence[BrokerRecord], what: str, call: Callable[[Admin], Awaitable[None]]
    ) -> None:
        """The stopgap fan-out to the other brokers: 'already so' answers are fine."""

        async def one(broker: BrokerRecord) -> None:
            try:
                await call(Admin(broker.host, broker.port, self.timeout))
            except KafkaResponseError as exc:
                if exc.code not in (
                    ErrorCode.topic_already_exists,
                    ErrorCode.unknown_topic_or_partition,
                ):
                    raise errors.KafkaError(
                        f"broker {broker.broker_id}: {what} failed: {exc}"
                    ) from None
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                raise errors.BrokerUnavailable(
                    f"broker {broker.broker_id} at {broker.address} did not answer {what}: "
                    f"{exc or type(exc).__name__}"
                ) from None

        await asyncio.gather(*(one(b) for b in brokers))

    async def list_topics(self, cluster_name: str, include_internal: bool) -> list[TopicView]:
        _, brokers = self._cluster(cluster_name, change=False)
        topics = await self._on(brokers[0], "metadata", lambda a: a.metadata(), cluster_name, "")
        return [TopicView(cluster_name, t) for t in topics if include_internal or not t.internal]

    async def describe_topic(self, cluster_name: str, name: str) -> TopicView:
        _, brokers = self._cluster(cluster_name, change=False)
        primary = brokers[0]
        (meta,) = await self._on(
            primary, "metadata", lambda a: a.metadata([name]), cluster_name, name
        )
        entries = await self._on(
            primary,
            "describe configs",
            lambda a: a.describe_topic_configs(name),
            cluster_name,
            name,
        )
        return TopicView(
            cluster_name,
            meta,
            config={e.name: e.value or "" for e in entries if e.source == SOURCE_DYNAMIC_TOPIC},
            effective_config={e.name: e.value or "" for e in entries if e.value is not None},
        )

    async def delete_topic(self, cluster_name: str, name: str) -> None:
        _, brokers = self._cluster(cluster_name, change=True)
        primary, *others = brokers
        await self._on(primary, "delete topic", lambda a: a.delete_topic(name), cluster_name, name)
        await self._everywhere(others, "delete topic", lambda a: a.delete_topic(name))

    async def alter_topic_config(
        self, cluster_name: str, name: str, config: dict[str, str], remove: list[str]
    ) -> TopicView:
        _, brokers = self._cluster(cluster_name, change=True)
        validate_topic_config(config, remove)
        primary, *others = brokers
        await self._on(
            primary,
            "alter configs",
            lambda a: a.alter_topic_configs(name, config, remove),
            cluster_name,
            name,
        )
        await self._everywhere(
            others, "alter configs", lambda a: a.alter_topic_configs(name, config, remove)
        )
        return await self.describe_topic(cluster_name, name)


async def copy_topics(
    primary: BrokerRecord, targets: Sequence[BrokerRecord], timeout: float
) -> None:
    """Create broker 0's topics (with their overrides) on ``targets`` where they are missing."""
    if not targets:
        return
    source = Admin(primary.host, primary.port, timeout)
    topics = [t for t in await source.metadata() if not t.internal]
    for topic in topics:
        entries = await source.describe_topic_configs(topic.name)
        overrides = {
            e.name: e.value for e in entries if e.source == SOURCE_DYNAMIC_TOPIC and e.value
        }
        for target in targets:
            try:
                await Admin(target.host, target.port, timeout).create_topic(
                    topic.name, len(topic.partitions), 1, overrides
                )
            except KafkaResponseError as exc:
                if exc.code != ErrorCode.topic_already_exists:
                    raise
