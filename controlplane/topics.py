"""Topic operations of the Topics API, spoken to the brokers in the Kafka admin protocol.

The brokers of a cluster share their metadata (a Raft quorum), and any broker answers every
admin request (it forwards changes to the active controller). So each operation goes to one
broker: the first that can be reached, in broker-id order (``kafka.on_any``). Reads (Metadata,
DescribeConfigs) are retried on the next broker after any transport failure; changes only when
nothing was sent. Describe and list come from one broker's Metadata: leader, replicas and ISR
are the cluster's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from controlplane import errors, store
from controlplane.kafka import (
    SOURCE_DYNAMIC_TOPIC,
    Admin,
    ConfigEntry,
    KafkaResponseError,
    TopicMetadata,
    on_any,
)
from controlplane.objectstore import ObjectStoreManager
from controlplane.store import BrokerRecord, ClusterRecord, Store
from tiered.errors import ObjectStoreError
from tiered.layout import cluster_prefix, parse_key
from tiered.object_store import ObjectInfo, S3ObjectStore

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
    hot_bytes: int = 0
    """Local segment files of the topic on every broker (all replicas)."""
    tiered_bytes: int = 0
    """Segments of the topic in the object store (readable ones; stored once)."""
    tiered_segments: int = 0


@dataclass(frozen=True)
class Orphan:
    key: str
    size: int
    reason: str


@dataclass(frozen=True)
class OrphanReport:
    orphans: list[Orphan]
    scanned: int
    deleted: bool

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.orphans)


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
    def __init__(
        self, store_: Store, timeout: float, object_store: ObjectStoreManager | None = None
    ) -> None:
        self.store = store_
        self.timeout = timeout
        self.object_store = object_store

    def _cluster(self, name: str, *, change: bool) -> tuple[ClusterRecord, list[BrokerRecord]]:
        cluster = self.store.get_cluster(name)
        if cluster is None:
            raise errors.ClusterNotFound(f"cluster {name!r} not found")
        if change and (cluster.state not in (store.ACTIVE, store.FAILED) or cluster.busy):
            # FAILED with no operation: a scale-in that failed (the cluster runs as before)
            doing = f" ({cluster.operation})" if cluster.operation else ""
            raise errors.ClusterNotReady(
                f"cluster {name!r} is {cluster.state}{doing}; topics can be changed when it is "
                "ACTIVE"
            )
        if cluster.state in (store.CREATING, store.DELETING):
            raise errors.ClusterNotReady(f"cluster {name!r} is {cluster.state}")
        return cluster, self.store.brokers(name)

    async def _on_any(
        self,
        brokers: Sequence[BrokerRecord],
        what: str,
        call: Callable[[Admin], Awaitable[T]],
        cluster: str,
        topic: str,
        *,
        read_only: bool,
    ) -> T:
        """Run one admin call on one broker of the cluster (the next one if it cannot be
        reached); transport and Kafka errors become typed errors."""
        try:
            return await on_any(brokers, call, self.timeout, read_only=read_only)
        except KafkaResponseError as exc:
            raise map_kafka_error(exc, cluster, topic) from None
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            # (the CLI tells these from an unreachable control plane by the leading "broker")
            tried = ", ".join(f"{b.broker_id} at {b.address}" for b in brokers)
            why = "closed the connection" if isinstance(exc, asyncio.IncompleteReadError) else exc
            raise errors.BrokerUnavailable(
                f"broker(s) {tried} of cluster {cluster!r} did not answer {what}: "
                f"{why or type(exc).__name__}"
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
        await self._on_any(
            brokers,
            "create topic",
            lambda a: a.create_topic(name, partitions or -1, replication_factor or -1, config),
            cluster_name,
            name,
            read_only=False,
        )
        return await self.describe_topic(cluster.name, name)

    async def list_topics(self, cluster_name: str, include_internal: bool) -> list[TopicView]:
        _, brokers = self._cluster(cluster_name, change=False)
        topics = await self._on_any(
            brokers, "metadata", lambda a: a.metadata(), cluster_name, "", read_only=True
        )
        return [TopicView(cluster_name, t) for t in topics if include_internal or not t.internal]

    async def describe_topic(self, cluster_name: str, name: str) -> TopicView:
        _, brokers = self._cluster(cluster_name, change=False)

        async def both(admin: Admin) -> tuple[TopicMetadata, list[ConfigEntry]]:
            (meta,) = await admin.metadata([name])
            return meta, await admin.describe_topic_configs(name)

        meta, entries = await self._on_any(
            brokers, "metadata", both, cluster_name, name, read_only=True
        )
        remote = await self._on_any(
            brokers,
            "describe remote log",
            lambda a: a.describe_remote_log([name]),
            cluster_name,
            name,
            read_only=True,
        )
        segments = [
            seg
            for part in remote.get("topics", {}).get(name, {}).get("partitions", {}).values()
            for seg in part.get("segments", [])
            if seg.get("state") == "copy_finished"
        ]
        hot = await asyncio.to_thread(_hot_bytes, brokers, name, len(meta.partitions))
        return TopicView(
            cluster_name,
            meta,
            config={e.name: e.value or "" for e in entries if e.source == SOURCE_DYNAMIC_TOPIC},
            effective_config={e.name: e.value or "" for e in entries if e.value is not None},
            hot_bytes=hot,
            tiered_bytes=sum(int(seg["size_bytes"]) for seg in segments),
            tiered_segments=len(segments),
        )

    async def find_orphans(
        self, cluster_name: str, *, delete: bool, min_age_seconds: float
    ) -> OrphanReport:
        """Objects under the cluster's prefix that no remote-tier record names."""
        cluster, brokers = self._cluster(cluster_name, change=False)
        if self.object_store is None or not cluster.s3_bucket:
            raise errors.PreconditionFailed(
                f"cluster {cluster_name!r} has no object store (start the control plane "
                "with its embedded S3 or --s3-endpoint)"
            )
        settings = self.object_store.settings_for(cluster.s3_endpoint, cluster.s3_bucket)
        store = S3ObjectStore(settings)
        try:
            # the listing first, the metadata after: a leader records a copy before it puts
            # the first object, so every object listed is named by the metadata read later
            listed = await asyncio.to_thread(
                lambda: list(store.list(cluster_prefix(cluster.cluster_id)))
            )
            remote = await self._on_any(
                brokers,
                "describe remote log",
                lambda a: a.describe_remote_log(None),
                cluster_name,
                "",
                read_only=True,
            )
            report = _find_orphans(listed, remote, min_age_seconds)
            if delete and report.orphans:
                await asyncio.to_thread(store.delete_many, [o.key for o in report.orphans])
                report = OrphanReport(report.orphans, report.scanned, deleted=True)
            return report
        except ObjectStoreError as exc:
            raise errors.KafkaError(f"the object store of {cluster_name!r}: {exc}") from None

    async def delete_topic(self, cluster_name: str, name: str) -> None:
        _, brokers = self._cluster(cluster_name, change=True)
        await self._on_any(
            brokers,
            "delete topic",
            lambda a: a.delete_topic(name),
            cluster_name,
            name,
            read_only=False,
        )

    async def alter_topic_config(
        self, cluster_name: str, name: str, config: dict[str, str], remove: list[str]
    ) -> TopicView:
        _, brokers = self._cluster(cluster_name, change=True)
        validate_topic_config(config, remove)
        await self._on_any(
            brokers,
            "alter configs",
            lambda a: a.alter_topic_configs(name, config, remove),
            cluster_name,
            name,
            read_only=False,
        )
        return await self.describe_topic(cluster_name, name)


def _hot_bytes(brokers: Sequence[BrokerRecord], topic: str, partitions: int) -> int:
    total = 0
    for broker in brokers:
        for p in range(partitions):
            directory = Path(broker.data_dir) / f"{topic}-{p}"
            with contextlib.suppress(OSError):
                total += sum(f.stat().st_size for f in directory.glob("*.log"))
    return total


def _find_orphans(
    listed: Sequence[ObjectInfo], remote: dict[str, Any], min_age_seconds: float
) -> OrphanReport:
    named = {
        seg["segment_id"]
        for topic in remote.get("topics", {}).values()
        for part in topic.get("partitions", {}).values()
        for seg in part.get("segments", [])
    }
    live_topics = {t["topic_id"] for t in remote.get("topics", {}).values()}
    pending = {p["topic_id"] for p in remote.get("pending_topic_deletions", [])}
    cutoff = datetime.now(UTC) - timedelta(seconds=min_age_seconds)
    orphans: list[Orphan] = []
    for info in listed:
        if info.last_modified is not None and info.last_modified > cutoff:
            continue
        parsed = parse_key(info.key)
        if parsed is None:
            orphans.append(Orphan(info.key, info.size, "unparseable"))
        elif parsed.topic_id in pending:
            continue  # its topic's deletion is under way
        elif parsed.topic_id not in live_topics:
            orphans.append(Orphan(info.key, info.size, "deleted topic"))
        elif parsed.segment_id not in named:
            orphans.append(Orphan(info.key, info.size, "unknown segment"))
    return OrphanReport(orphans, len(listed), deleted=False)


def plan_reassignment(
    topics: Sequence[TopicMetadata], removed: set[int], remaining: Sequence[int]
) -> tuple[dict[tuple[str, int], list[int]], str | None]:
    """New replica lists that move every partition off the ``removed`` brokers (scale-in).

    A removed broker is replaced in place (the order of the others is kept, so the preferred
    leader stays where it was unless it goes) by a remaining broker that does not hold the
    partition yet, the least loaded first (replicas it holds, counting those planned so far;
    ties go to the lowest id). Returns the moves, or a reason when a partition cannot move (more
    replicas than brokers would remain).
    """
    load = dict.fromkeys(remaining, 0)
    for topic in topics:
        for p in topic.partitions:
            for replica in p.replicas:
                if replica in load:
                    load[replica] += 1
    moves: dict[tuple[str, int], list[int]] = {}
    for topic in topics:
        for p in topic.partitions:
            if not removed.intersection(p.replicas):
                continue
            target: list[int] = []
            for replica in p.replicas:
                if replica not in removed:
                    target.append(replica)
                    continue
                free = [b for b in load if b not in p.replicas and b not in target]
                if not free:
                    return {}, (
                        f"partition {topic.name}-{p.partition} has {len(p.replicas)} replicas "
                        f"but only {len(remaining)} broker(s) would remain"
                    )
                chosen = min(free, key=lambda b: (load[b], b))
                load[chosen] += 1
                target.append(chosen)
            moves[(topic.name, p.partition)] = target
    return moves, None
