"""Topic operations of the Topics API, spoken to the brokers in the Kafka admin protocol.

The brokers of a cluster share their metadata (a Raft quorum), and any broker answers every
admin request (it forwards changes to the active controller). So each operation goes to one
broker: the first that can be reached, in broker-id order (``kafka.on_any``). Reads (Metadata,
DescribeConfigs) are retried on the next broker after any transport failure; changes only when
nothing was sent. Describe and list come from one broker's Metadata: leader, replicas and ISR
are the cluster's.

Storage (``TopicStorage``): the hot tier is read from the brokers' data directories (the
control plane runs the brokers, so it knows them: ``DATA_DIR/TOPIC-PARTITION/*.log``, every
replica counted); the tiered one from DescribeRemoteLog (Sluice's API 32001, asked of any
broker: the remote-segment records of the metadata log). ``find_orphans`` lists the cluster's
bucket and reports the objects no record names.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from controlplane import errors
from controlplane.kafka import (
    SOURCE_DYNAMIC_TOPIC,
    Admin,
    ConfigEntry,
    KafkaResponseError,
    TopicMetadata,
    on_any,
)
from controlplane.objectstore import ObjectStoreManager
from controlplane.states import ClusterState, StorageMode
from controlplane.store import BrokerRecord, ClusterRecord, Store
from dataplane.config import TOPIC_CONFIGS
from dataplane.config.rules import validate_topic_configs
from tiered.errors import ObjectStoreError
from tiered.layout import cluster_prefix, parse_key
from tiered.object_store import ObjectInfo, S3ObjectStore
from wire.errors import InvalidConfig as BrokerInvalidConfig

T = TypeVar("T")

SETTLE_POLL = 0.05
"""Seconds between two looks at a topic a change has not reached yet."""
BROKERS_BACK_POLL = 0.2
"""Seconds between two creates refused while some brokers restart (up to the request
timeout, ``kafka.request.timeout.ms``)."""
DESCRIBE_REMOTE_LOG_NAMES = 100
"""Up to this many topics are named in a DescribeRemoteLog request; more ask for all."""

_BAD_REQUEST = {
    ErrorCode.invalid_topic_exception,
    ErrorCode.invalid_partitions,
    ErrorCode.invalid_replication_factor,
    ErrorCode.invalid_replica_assignment,
    ErrorCode.invalid_config,
    ErrorCode.invalid_request,
    ErrorCode.policy_violation,
}


COPY_FINISHED = "copy_finished"
"""The state of a readable remote segment (``dataplane/remote/README.md``)."""
UNKNOWN_SEGMENT = "unknown segment"
UNPARSEABLE = "unparseable"
DELETED_TOPIC = "deleted topic"


@dataclass(frozen=True)
class PartitionStorage:
    """What the object store holds of one partition."""

    remote_log_start_offset: int = -1
    """The first offset it holds (-1: nothing): the oldest readable segment's base offset, or
    the remote log start that retention or DeleteRecords set, if later."""
    tiered_bytes: int = 0
    """Bytes of its readable (``copy_finished``) segments."""
    tiered_segments: int = 0


@dataclass(frozen=True)
class TopicStorage:
    """Where a topic's data is: the hot tier and the tiered one."""

    hot_bytes: int = 0
    """Local segment files (``*.log``) of the topic on every broker: all replicas."""
    replica_hot: dict[int, dict[int, int]] = field(default_factory=dict)
    """Per partition, the bytes of those files on each broker that has any (broker id ->
    bytes)."""
    partitions: dict[int, PartitionStorage] = field(default_factory=dict)
    """The tiered tier per partition (partitions with nothing remote may be absent)."""

    @property
    def tiered_bytes(self) -> int:
        """Readable segments in the object store (stored once, whatever the replication)."""
        return sum(p.tiered_bytes for p in self.partitions.values())

    @property
    def tiered_segments(self) -> int:
        return sum(p.tiered_segments for p in self.partitions.values())

    def partition(self, partition: int) -> PartitionStorage:
        return self.partitions.get(partition, PartitionStorage())


@dataclass(frozen=True)
class TopicView:
    cluster: str
    meta: TopicMetadata
    config: dict[str, str] = field(default_factory=dict)
    effective_config: dict[str, str] = field(default_factory=dict)
    storage: TopicStorage = field(default_factory=TopicStorage)


@dataclass(frozen=True)
class Orphan:
    """An object of the cluster's bucket that no remote-segment record names."""

    key: str
    size: int
    reason: str
    """``UNKNOWN_SEGMENT``, ``UNPARSEABLE`` or ``DELETED_TOPIC``."""
    last_modified: datetime | None = None


@dataclass(frozen=True)
class OrphanReport:
    orphans: list[Orphan]
    scanned: int
    """Objects listed under the cluster's prefix."""
    deleted: bool
    """The orphans were removed."""
    too_young: int = 0
    """Objects that would be orphans but are younger than the minimum age (left out)."""
    bucket: str = ""
    prefix: str = ""

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.orphans)


def map_kafka_error(exc: KafkaResponseError, cluster: str, topic: str) -> errors.ControlPlaneError:
    """The one place where a Kafka error code becomes a control-plane error."""
    code = exc.code
    about = {"cluster": cluster, "topic": topic}
    if code == ErrorCode.topic_already_exists:
        return errors.TopicAlreadyExists(
            f"topic {topic!r} already exists in cluster {cluster!r}", **about
        )
    if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id):
        return errors.TopicNotFound(f"topic {topic!r} not found in cluster {cluster!r}", **about)
    if code == ErrorCode.invalid_config:
        return errors.InvalidConfig(f"invalid topic config: {exc.detail}", **about)
    if code in _BAD_REQUEST:
        return errors.BadRequest(f"{exc.detail} ({code.name})", **about)
    if code == ErrorCode.topic_deletion_disabled:
        return errors.PreconditionFailed(
            f"topic deletion is disabled in cluster {cluster!r} (delete.topic.enable=false)",
            **about,
        )
    return errors.KafkaError(f"{exc} (cluster {cluster!r})", **about, kafkaError=code.name)


def check_storage_mode(cluster: ClusterRecord, config: Mapping[str, str], topic: str) -> None:
    """A topic of a cluster without a remote tier cannot ask for one."""
    wanted = config.get("remote.storage.enable", "").strip().lower() == "true"
    if wanted and cluster.effective_storage_mode is StorageMode.LOCAL:
        why = (
            "its storage mode is LOCAL"
            if cluster.storage_mode is StorageMode.LOCAL
            else "the control plane runs without an object store"
        )
        raise errors.PreconditionFailed(
            f"topic {topic!r}: remote.storage.enable=true needs a cluster with tiered storage, "
            f"and cluster {cluster.name!r} has none ({why}); create the cluster with "
            "--storage-mode tiered",
            cluster=cluster.name,
            topic=topic,
            key="remote.storage.enable",
        )


def validate_topic_config(
    config: dict[str, str], remove: Sequence[str] = (), *, cluster: str = "", topic: str = ""
) -> None:
    """Check topic settings with the brokers' own validation (``dataplane.config.rules``,
    Kafka's messages), before anything is sent; errors name the key (and the cluster and
    topic given). Rules that depend on a broker's state (existence, tiered storage being
    enabled on it) are the brokers' to check."""
    about = {"cluster": cluster, "topic": topic}
    for key, value in config.items():
        try:
            validate_topic_configs({key: value})
        except BrokerInvalidConfig as exc:
            raise errors.InvalidConfig(exc.message or str(exc), **about, key=key) from None
    try:
        validate_topic_configs(config)
    except BrokerInvalidConfig as exc:
        raise errors.InvalidConfig(exc.message or str(exc), **about) from None
    for key in remove:
        if key not in TOPIC_CONFIGS:
            raise errors.InvalidConfig(f"Unknown topic config name: {key}", **about, key=key)


class TopicOps:
    def __init__(
        self,
        store_: Store,
        timeout: float,
        object_store: ObjectStoreManager | None = None,
        default_replication_factor: int = 3,
    ) -> None:
        self.store = store_
        self.timeout = timeout
        self.object_store = object_store
        self.default_replication_factor = default_replication_factor
        """``topic.default.replication.factor``: capped by the cluster's broker count."""

    def _cluster(self, name: str, *, change: bool) -> tuple[ClusterRecord, list[BrokerRecord]]:
        cluster = errors.existing_cluster(self.store, name)
        if change and (
            cluster.state not in (ClusterState.ACTIVE, ClusterState.FAILED) or cluster.busy
        ):
            # FAILED with no operation: a scale-in that failed (the cluster runs as before)
            doing = f" ({cluster.operation})" if cluster.operation else ""
            raise errors.ClusterNotReady(
                f"cluster {name!r} is {cluster.state}{doing}; topics can be changed when it is "
                "ACTIVE",
                cluster=name,
            )
        if cluster.state in (ClusterState.CREATING, ClusterState.DELETING):
            raise errors.ClusterNotReady(f"cluster {name!r} is {cluster.state}", cluster=name)
        return cluster, self.store.brokers(name)

    def topic_defaults(
        self,
        cluster: ClusterRecord,
        brokers: int,
        replication_factor: int | None,
        config: dict[str, str],
    ) -> tuple[int, dict[str, str]]:
        """The replication factor (-1: the brokers' default.replication.factor) and topic
        config a new topic gets: as MSK, min(3, brokers) replicas and, with 3 replicas,
        min.insync.replicas=2 (RF-1), unless the request or the cluster's config says."""
        if replication_factor is None:
            if "default.replication.factor" in cluster.config:
                return -1, config
            replication_factor = min(self.default_replication_factor, brokers)
        if (
            replication_factor == 3
            and "min.insync.replicas" not in config
            and "min.insync.replicas" not in cluster.config
        ):
            config = {**config, "min.insync.replicas": str(replication_factor - 1)}
        return replication_factor, config

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
            tried = ", ".join(f"{b.broker_id} at {b.address}" for b in brokers)
            why = "closed the connection" if isinstance(exc, asyncio.IncompleteReadError) else exc
            raise errors.BrokerUnavailable(
                f"broker(s) {tried} of cluster {cluster!r} did not answer {what}: "
                f"{why or type(exc).__name__}",
                cluster=cluster,
                topic=topic,
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
            raise errors.BadRequest(
                f"invalid partition count {partitions}: must be at least 1",
                cluster=cluster_name,
                topic=name,
            )
        if replication_factor is not None and not 1 <= replication_factor <= len(brokers):
            raise errors.BadRequest(
                f"replication factor {replication_factor} is not possible in cluster "
                f"{cluster_name!r}: each replica of a partition lives on its own broker, and "
                f"the cluster has {len(brokers)}, so give 1 to {len(brokers)}"
                + (
                    " (or add brokers with `update-broker-count`)" if replication_factor > 1 else ""
                ),
                cluster=cluster_name,
                topic=name,
            )
        validate_topic_config(config, cluster=cluster_name, topic=name)
        check_storage_mode(cluster, config, name)
        factor, config = self.topic_defaults(cluster, len(brokers), replication_factor, config)
        deadline = time.monotonic() + self.timeout

        async def create(admin: Admin) -> None:
            # the cluster has the brokers for ``factor`` (checked above): a refusal for too
            # few registered brokers means some are restarting (a rolling restart for a
            # config change or a new endpoint, a heal), so the create waits for them
            while True:
                try:
                    await admin.create_topic(name, partitions or -1, factor, config)
                    return
                except KafkaResponseError as exc:
                    waiting = exc.code == ErrorCode.invalid_replication_factor
                    if not waiting or time.monotonic() > deadline:
                        raise
                await asyncio.sleep(BROKERS_BACK_POLL)

        await self._on_any(brokers, "create topic", create, cluster_name, name, read_only=False)
        return await self._describe_when(
            cluster.name,
            name,
            lambda v: (
                bool(v.meta.partitions)
                and (partitions is None or len(v.meta.partitions) == partitions)
                and set(config) <= set(v.config)
            ),
        )

    async def _describe_when(
        self, cluster_name: str, name: str, applied: Callable[[TopicView], bool]
    ) -> TopicView:
        """The topic once a change shows (``applied``): a change is committed by the active
        controller before it answers, but the broker asked next may apply it a moment later
        (and, for a topic just created, not know the topic yet). After
        ``kafka.request.timeout.ms`` the topic as it is, or the error that it is missing."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                view = await self.describe_topic(cluster_name, name)
            except errors.TopicNotFound:
                if time.monotonic() > deadline:
                    raise
            else:
                if applied(view) or time.monotonic() > deadline:
                    return view
            await asyncio.sleep(SETTLE_POLL)

    async def list_topics(self, cluster_name: str, include_internal: bool) -> list[TopicView]:
        _, brokers = self._cluster(cluster_name, change=False)
        topics = await self._on_any(
            brokers, "metadata", lambda a: a.metadata(), cluster_name, "", read_only=True
        )
        shown = [t for t in topics if include_internal or not t.internal]
        storage = await self._storage(brokers, cluster_name, shown)
        return [TopicView(cluster_name, t, storage=storage[t.name]) for t in shown]

    async def describe_topic(self, cluster_name: str, name: str) -> TopicView:
        _, brokers = self._cluster(cluster_name, change=False)

        async def both(admin: Admin) -> tuple[TopicMetadata, list[ConfigEntry]]:
            (meta,) = await admin.metadata([name])
            return meta, await admin.describe_topic_configs(name)

        meta, entries = await self._on_any(
            brokers, "metadata", both, cluster_name, name, read_only=True
        )
        storage = await self._storage(brokers, cluster_name, [meta])
        return TopicView(
            cluster_name,
            meta,
            config={e.name: e.value or "" for e in entries if e.source == SOURCE_DYNAMIC_TOPIC},
            effective_config={e.name: e.value or "" for e in entries if e.value is not None},
            storage=storage[meta.name],
        )

    async def _storage(
        self, brokers: Sequence[BrokerRecord], cluster_name: str, topics: Sequence[TopicMetadata]
    ) -> dict[str, TopicStorage]:
        """Hot bytes from the brokers' data directories, the tiered tier from one
        DescribeRemoteLog (of the named topics, or of all when there are many).

        The directories first: a broker deletes a local segment only once its copy is
        finished, so a segment gone from the disk when it is scanned is in the remote
        metadata read after, and every byte is counted in one tier or both."""
        if not topics:
            return {}
        data_dirs = {b.broker_id: Path(b.data_dir) for b in brokers}
        counts = {t.name: len(t.partitions) for t in topics}
        hot = await asyncio.to_thread(replica_hot_bytes, data_dirs, counts)
        names = [t.name for t in topics]
        asked = names if len(names) <= DESCRIBE_REMOTE_LOG_NAMES else None
        remote = await self._on_any(
            brokers,
            "describe remote log",
            lambda a: a.describe_remote_log(asked),
            cluster_name,
            names[0] if len(names) == 1 else "",
            read_only=True,
        )
        return {
            t.name: TopicStorage(
                hot_bytes=sum(n for p in hot[t.name].values() for n in p.values()),
                replica_hot=hot[t.name],
                partitions=tiered_storage(remote, t.name),
            )
            for t in topics
        }

    async def find_orphans(
        self, cluster_name: str, *, delete: bool, min_age_seconds: float
    ) -> OrphanReport:
        """Objects under the cluster's prefix that no remote-segment record names.

        Order matters. The listing comes first and the metadata after: a leader records a
        copy (``copy_started``) before it puts the first object, so an upload listed is named
        by the metadata read later. Candidates are then checked against a second listing: an
        object deleted meanwhile with its record (remote retention, a topic's cleanup) is not
        an orphan. Objects younger than ``min_age_seconds`` are left out all the same (a
        store whose listing lags its writes)."""
        cluster, brokers = self._cluster(cluster_name, change=False)
        if self.object_store is None or not cluster.s3_bucket:
            raise errors.PreconditionFailed(
                f"cluster {cluster_name!r} has no object store (start the control plane "
                "with its embedded S3 or --s3-endpoint)",
                cluster=cluster_name,
            )
        settings = self.object_store.settings_for(cluster.s3_endpoint, cluster.s3_bucket)
        object_store = S3ObjectStore(settings)
        prefix = cluster_prefix(cluster.cluster_id)

        def listing() -> list[ObjectInfo]:
            return list(object_store.list(prefix))

        try:
            listed = await asyncio.to_thread(listing)
            remote = await self._on_any(
                brokers,
                "describe remote log",
                lambda a: a.describe_remote_log(None),
                cluster_name,
                "",
                read_only=True,
            )
            cutoff = datetime.now(UTC) - timedelta(seconds=min_age_seconds)
            report = find_orphans(listed, remote, cutoff)
            if report.orphans:
                still = {info.key for info in await asyncio.to_thread(listing)}
                report = replace(report, orphans=[o for o in report.orphans if o.key in still])
            if delete and report.orphans:
                await asyncio.to_thread(object_store.delete_many, [o.key for o in report.orphans])
        except ObjectStoreError as exc:
            raise errors.ObjectStoreUnavailable(
                f"the object store of cluster {cluster_name!r} (bucket {cluster.s3_bucket} at "
                f"{cluster.s3_endpoint}): {exc}",
                cluster=cluster_name,
                bucket=cluster.s3_bucket,
                endpoint=cluster.s3_endpoint,
            ) from None
        return replace(report, deleted=delete, bucket=cluster.s3_bucket, prefix=prefix)

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

    async def add_partitions(self, cluster_name: str, name: str, total: int) -> TopicView:
        """Raise the partition count to ``total`` (CreatePartitions; the broker places them)."""
        _, brokers = self._cluster(cluster_name, change=True)
        current = await self.describe_topic(cluster_name, name)
        count = len(current.meta.partitions)
        if total <= count:
            raise errors.BadRequest(
                f"topic {name!r} has {count} partition(s); --total must be more than that "
                "(Kafka never removes partitions)",
                cluster=cluster_name,
                topic=name,
            )
        await self._on_any(
            brokers,
            "create partitions",
            lambda a: a.create_partitions(name, total),
            cluster_name,
            name,
            read_only=False,
        )
        return await self._describe_when(
            cluster_name, name, lambda v: len(v.meta.partitions) == total
        )

    async def alter_topic_config(
        self, cluster_name: str, name: str, config: dict[str, str], remove: list[str]
    ) -> TopicView:
        cluster, brokers = self._cluster(cluster_name, change=True)
        validate_topic_config(config, remove, cluster=cluster_name, topic=name)
        check_storage_mode(cluster, config, name)
        await self._on_any(
            brokers,
            "alter configs",
            lambda a: a.alter_topic_configs(name, config, remove),
            cluster_name,
            name,
            read_only=False,
        )
        return await self._describe_when(
            cluster_name,
            name,
            lambda v: (
                all(same(v.config.get(k), val) for k, val in config.items())
                and not set(remove) & set(v.config)
            ),
        )


def same(shown: str | None, given: str) -> bool:
    """A setting shows the value given (as the broker renders it: trimmed, any case)."""
    return shown is not None and shown.strip().lower() == given.strip().lower()


def replica_hot_bytes(
    data_dirs: Mapping[int, Path], topics: dict[str, int]
) -> dict[str, dict[int, dict[int, int]]]:
    """Bytes of the local segment files (``DATA_DIR/TOPIC-PARTITION/*.log``) of each topic
    (name -> partition count), per partition and broker (id -> data directory) holding any."""
    out: dict[str, dict[int, dict[int, int]]] = {t: {} for t in topics}
    for broker_id, data_dir in data_dirs.items():
        for topic, partitions in topics.items():
            for p in range(partitions):
                directory = data_dir / f"{topic}-{p}"
                if not directory.is_dir():
                    continue  # no replica here
                size = 0
                for f in directory.glob("*.log"):
                    with contextlib.suppress(OSError):  # a segment just deleted
                        size += f.stat().st_size
                out[topic].setdefault(p, {})[broker_id] = size
    return out


def hot_bytes(data_dirs: Sequence[Path], topics: dict[str, int]) -> dict[str, int]:
    """Bytes of the local segment files of each topic over every broker's data directory:
    all replicas count."""
    found = replica_hot_bytes(dict(enumerate(data_dirs)), topics)
    return {t: sum(n for p in found[t].values() for n in p.values()) for t in topics}


def tiered_storage(remote: dict[str, Any], topic: str) -> dict[int, PartitionStorage]:
    """The tiered tier of one topic per partition, from a DescribeRemoteLog document
    (``wire.internal``): readable segments only, as the brokers serve them."""
    out: dict[int, PartitionStorage] = {}
    partitions = remote.get("topics", {}).get(topic, {}).get("partitions", {})
    for key, part in partitions.items():
        finished = [s for s in part.get("segments", []) if s.get("state") == COPY_FINISHED]
        if not finished:
            out[int(key)] = PartitionStorage()
            continue
        first = min(int(s["base_offset"]) for s in finished)
        out[int(key)] = PartitionStorage(
            remote_log_start_offset=max(first, int(part.get("log_start_offset", -1))),
            tiered_bytes=sum(int(s["size_bytes"]) for s in finished),
            tiered_segments=len(finished),
        )
    return out


def find_orphans(
    listed: Sequence[ObjectInfo], remote: dict[str, Any], cutoff: datetime
) -> OrphanReport:
    """The objects of ``listed`` (under one cluster's prefix) that the DescribeRemoteLog
    document ``remote`` does not account for, leaving out those written after ``cutoff``.

    A record in any state names its segment's objects (a copy in flight, a deletion under
    way); the objects of a topic whose deletion is pending are its cleanup's to delete.
    """
    named = {
        (s["topic"], s["topic_id"], int(s["partition"]), int(s["base_offset"]), s["segment_id"])
        for t in remote.get("topics", {}).values()
        for part in t.get("partitions", {}).values()
        for s in part.get("segments", [])
    }
    live_topics = {t["topic_id"] for t in remote.get("topics", {}).values()}
    pending = {p["topic_id"] for p in remote.get("pending_topic_deletions", [])}
    orphans: list[Orphan] = []
    too_young = 0
    for info in listed:
        parsed = parse_key(info.key)
        if parsed is None:
            reason = UNPARSEABLE
        elif parsed.topic_id in pending:
            continue  # its topic's cleanup deletes it
        elif parsed.topic_id not in live_topics:
            reason = DELETED_TOPIC
        elif (
            parsed.topic,
            parsed.topic_id,
            parsed.partition,
            parsed.base_offset,
            parsed.segment_id,
        ) not in named:
            reason = UNKNOWN_SEGMENT
        else:
            continue
        if info.last_modified is not None and info.last_modified > cutoff:
            too_young += 1
        else:
            orphans.append(Orphan(info.key, info.size, reason, info.last_modified))
    return OrphanReport(orphans, len(listed), deleted=False, too_young=too_young)


MORE_SHOWN = 5
"""Partitions named after the first in a refused scale-in's reason."""


def plan_reassignment(
    topics: Sequence[TopicMetadata], removed: set[int], remaining: Sequence[int]
) -> tuple[dict[tuple[str, int], list[int]], str | None]:
    """New replica lists that move every partition off the ``removed`` brokers (scale-in).

    A removed broker is replaced in place (the order of the others is kept, so the preferred
    leader stays where it was unless it goes) by a remaining broker that does not hold the
    partition yet, the least loaded first (replicas it holds, counting those planned so far;
    ties go to the lowest id). The service's internal topics (``internal`` in Metadata: offsets,
    transactions, usage) were created with ``min(3, brokers)`` replicas: one with more replicas
    than brokers would remain shrinks to as many as remain (its removed replicas are dropped, not
    replaced). Returns the moves, or a reason when a partition of a user's topic cannot move
    (more replicas than brokers would remain).
    """
    load = dict.fromkeys(remaining, 0)
    for topic in topics:
        for p in topic.partitions:
            for replica in p.replicas:
                if replica in load:
                    load[replica] += 1
    moves: dict[tuple[str, int], list[int]] = {}
    stuck: list[tuple[bool, str, int, int]] = []  # (internal, topic, partition, replicas)
    for topic in topics:
        for p in topic.partitions:
            if not removed.intersection(p.replicas):
                continue
            if len(p.replicas) > len(remaining) and not topic.internal:
                stuck.append(
                    (topic.name.startswith("__"), topic.name, p.partition, len(p.replicas))
                )
                continue
            # replicas to add in place of removed ones: all of them, unless an internal topic
            # shrinks to the brokers that remain
            kept = sum(1 for replica in p.replicas if replica not in removed)
            wanted = min(len(p.replicas), len(remaining)) - kept
            target: list[int] = []
            for replica in p.replicas:
                if replica not in removed:
                    target.append(replica)
                    continue
                if wanted <= 0:
                    continue
                wanted -= 1
                free = [b for b in load if b not in p.replicas and b not in target]
                chosen = min(free, key=lambda b: (load[b], b))
                load[chosen] += 1
                target.append(chosen)
            moves[(topic.name, p.partition)] = target
    if stuck:
        # named in a fixed order, the users' topics before the internal ones
        stuck.sort()
        _, name, partition, replicas = stuck[0]
        more = [f"{t}-{q}" for _, t, q, _ in stuck[1:]]
        shown = ", ".join(more[:MORE_SHOWN]) + (", ..." if len(more) > MORE_SHOWN else "")
        return {}, (
            f"partition {name}-{partition} has {replicas} replicas but only "
            f"{len(remaining)} broker(s) would remain"
            + (f" (and {len(more)} more: {shown})" if more else "")
        )
    return moves, None
