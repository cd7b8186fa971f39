"""The control plane's own metering: every cluster's provisioned capacity (``broker_ms`` by
broker type, ``endpoint_ms`` by private endpoint) as usage events in the cluster's
``__sluice_usage`` topic (``wire.usage``; controlplane/README.md, "Metering").

Every ``metering.interval.ms`` (and at start, so a control plane that was down catches up)
the meter takes each cluster in turn: every minute bucket (``wire.usage.BUCKET_MS``) that is
complete and not sent yet, from the cluster's metering cursor on, becomes one
``UsageEvent`` (source ``controlplane``, epoch 0, sequence = the bucket's start) computed
from the recorded transitions (``usage_history.py``); buckets in which nothing was
provisioned send nothing. Events go in Produce requests of at most ``metering.batch.events``
records, acks=all, to the leader of the topic's one partition; the cursor (in ``state.db``)
moves past a request's buckets only once the request is acknowledged. A request whose answer
is lost is sent again later with the same keys and the same contents: readers keep one
record per key. The topic is created when missing (1 partition, replication factor
min(3, brokers), retention 30 days: as the brokers create it; TOPIC_ALREADY_EXISTS is fine).

The same pass meters what clients read straight from the embedded object store
(``spark_tiered_read_bytes``: ``tiered.read_meter``, whose counts the server writes every
second): every minute that ended at least ``READS_LAG_MS`` ago, from the cluster's read
cursor (``read_metering_cursors``) on, becomes one event of source ``objectstore`` (epoch 0,
sequence = the minute's start) with one usage per topic; minutes nobody read send nothing.
Reads from another object store (MinIO, S3) are not metered: only our server counts them.

A pass meters at most ``metering.catchup.max.ms`` of history per cluster; older buckets
are skipped with a warning that names them. A cluster being deleted is metered up to its
end by :meth:`Meter.until_deleted`, which the reconciler's deletion calls before it stops
the brokers; buckets its brokers no longer take are lost with its topic (logged). The topic
is also created at the first pass that finds the cluster ACTIVE, so it is replicated as the
cluster's first brokers allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from controlplane import usage_history
from controlplane.config import Settings
from controlplane.kafka import Admin, KafkaResponseError, on_any
from controlplane.states import ClusterState
from controlplane.store import BrokerRecord, ClusterRecord, Store
from controlplane.usage_history import Clock
from dataplane.config import BROKER_CONFIGS
from tiered.read_meter import Counts
from wire.record_batch import encode_batch
from wire.usage import BUCKET_MS, USAGE_TOPIC, Dimension, Usage, UsageEvent

log = logging.getLogger("sluice.controlplane.metering")

USAGE_TOPIC_CONFIGS = {
    "retention.ms": str(BROKER_CONFIGS["usage.topic.retention.ms"].default),
    "cleanup.policy": "delete",
}
"""The usage topic's settings, as the brokers create it (the default of their
``usage.topic.retention.ms``, a setting clusters cannot change)."""

FAILURES = (KafkaResponseError, OSError, asyncio.IncompleteReadError, TimeoutError)
"""What a pass survives (the cluster's brokers are starting, moving, down): retried at the
next pass."""


READS_SOURCE = "objectstore"
"""The source of the object store's read events (``wire.usage``)."""
READS_LAG_MS = 3_000
"""How long after a minute ends its read counts are final: the server writes them every
second (``tiered.read_meter.FLUSH_MS``), plus a margin."""


def read_events(counts: Counts, bucket: str, start_ms: int, limit_ms: int) -> list[UsageEvent]:
    """The read events of ``bucket`` for the minutes in ``[start_ms, limit_ms)``, in order."""
    minutes: dict[int, list[Usage]] = {}
    for (where, minute, topic), count in sorted(counts.items()):
        if where == bucket and start_ms <= minute < limit_ms and count > 0:
            usage = Usage(Dimension.SPARK_TIERED_READ_BYTES, count, topic=topic)
            minutes.setdefault(minute, []).append(usage)
    return [
        UsageEvent(READS_SOURCE, 0, minute, minute, minute + BUCKET_MS, tuple(usage))
        for minute, usage in sorted(minutes.items())
    ]


class LeaderNotAvailable(OSError):
    """The usage topic's partition has no leader among the cluster's brokers yet."""


class Meter:
    """The metering loop (``start`` / ``stop``) and the final pass of a deleted cluster."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        clock: Clock = time.time,
        reads: Callable[[], Counts] | None = None,
    ) -> None:
        """``reads``: what clients read from the embedded object store
        (``ObjectStoreManager.read_counts``); None: nothing to meter."""
        self.store = store
        self.settings = settings
        self.clock = clock
        self.reads = reads
        self.task: asyncio.Task[None] | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._failing: dict[str, str] = {}
        """Cluster id -> the last failure logged (each is logged once, until a pass works)."""
        self._topics: set[str] = set()
        """Ids of the clusters whose usage topic was seen (or created) by this meter."""

    @property
    def timeout(self) -> float:
        return self.settings.kafka_request_timeout_ms / 1000

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name="metering")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    async def run(self) -> None:
        interval = self.settings.metering_interval_ms / 1000
        while True:
            await self.meter_all()
            await asyncio.sleep(interval)

    async def meter_all(self) -> int:
        """One pass over every cluster (those being deleted are metered by their deletion);
        returns the number of events sent."""
        sent = 0
        for cluster in self.store.list_clusters():
            if cluster.state is ClusterState.DELETING:
                continue
            try:
                sent += await self.meter(cluster)
            except FAILURES as exc:
                self._failed(cluster, exc)
            except Exception:
                log.exception("cluster %s: metering failed", cluster.name)
        return sent

    async def until_deleted(self, cluster: ClusterRecord) -> None:
        """Send every bucket up to the end of ``cluster`` (its end recorded:
        ``usage_history.end_cluster``) while its brokers still run; what they do not take is
        lost with the cluster's usage topic (logged). Takes at most ``kafka.request.timeout.ms``:
        brokers that hang do not hold the deletion up."""
        try:
            await asyncio.wait_for(self.meter(cluster), self.timeout)
        except FAILURES as exc:
            db = self.store.db
            left = usage_history.cursor(db, cluster.cluster_id)
            history = usage_history.load(db, cluster.cluster_id, left or 0)
            first = left if left is not None else usage_history.first_bucket(history)
            end = usage_history.complete_until(history, usage_history.now_ms(self.clock))
            log.warning(
                "cluster %s: deleted before its usage from %s to %s was metered (%s): those "
                "broker-hours and endpoint-hours are lost with its usage topic",
                cluster.name,
                _iso(first),
                _iso(end),
                exc or type(exc).__name__,
            )

    # ------------------------------------------------------------------ one cluster

    async def meter(self, cluster: ClusterRecord) -> int:
        """Send the complete buckets of ``cluster`` not sent yet; returns how many events
        were sent. Raises one of :data:`FAILURES` when its brokers do not take them (the
        buckets sent before stay sent)."""
        lock = self._locks.setdefault(cluster.cluster_id, asyncio.Lock())
        async with lock:
            sent = await self._meter(cluster)
        if self._failing.pop(cluster.cluster_id, None) is not None:
            log.info("cluster %s: metering works again", cluster.name)
        return sent

    async def _meter(self, cluster: ClusterRecord) -> int:
        if cluster.cluster_id not in self._topics and cluster.state is ClusterState.ACTIVE:
            # the topic exists once the cluster runs, replicated as its first brokers allow
            await self._leader(cluster, self.store.brokers(cluster.name))
        history = usage_history.load(
            self.store.db,
            cluster.cluster_id,
            usage_history.cursor(self.store.db, cluster.cluster_id) or 0,
        )
        sent = await self._meter_capacity(cluster, history)
        return sent + await self._meter_reads(cluster, history)

    async def _meter_capacity(self, cluster: ClusterRecord, history: usage_history.History) -> int:
        db = self.store.db
        cid = cluster.cluster_id
        start = usage_history.cursor(db, cid)
        if start is None and not history.transitions:
            # recorded before the control plane metered: metered from now on
            usage_history.record_cluster(db, cluster.name, self.clock)
            history = usage_history.load(db, cid)
        if start is None:
            start = usage_history.first_bucket(history)
            if start is None:
                return 0  # the cluster is gone
        limit = usage_history.complete_until(history, usage_history.now_ms(self.clock))
        if limit <= start:
            return 0
        start = self._cap(cluster, start, limit)
        events: list[UsageEvent] = []
        sent = 0
        batch = self.settings.metering_batch_events
        for bucket in range(start, limit, BUCKET_MS):
            event = usage_history.bucket_event(history, bucket)
            if event is not None:
                events.append(event)
            if len(events) >= batch:
                await self._send(cluster, events)
                sent += len(events)
                usage_history.advance(db, cid, cluster.name, bucket + BUCKET_MS)
                events = []
        if events:
            await self._send(cluster, events)
            sent += len(events)
        usage_history.advance(db, cid, cluster.name, limit)
        return sent

    async def _meter_reads(self, cluster: ClusterRecord, history: usage_history.History) -> int:
        """Send the read events of ``cluster``'s bucket for the minutes that are final."""
        if self.reads is None or not cluster.s3_bucket:
            return 0
        db = self.store.db
        cid = cluster.cluster_id
        table = usage_history.READ_CURSORS
        start = usage_history.cursor(db, cid, table)
        if start is None:
            start = usage_history.first_bucket(history)
            if start is None:
                return 0
        now = usage_history.now_ms(self.clock) - READS_LAG_MS
        limit = now - now % BUCKET_MS
        if history.ended_at is not None:
            limit = min(limit, usage_history.complete_until(history, limit + BUCKET_MS))
        if limit <= start:
            return 0
        start = self._cap(cluster, start, limit, table)
        events = read_events(await asyncio.to_thread(self.reads), cluster.s3_bucket, start, limit)
        batch = self.settings.metering_batch_events
        for i in range(0, len(events), batch):
            chunk = events[i : i + batch]
            await self._send(cluster, chunk)
            usage_history.advance(db, cid, cluster.name, chunk[-1].end_ms, table)
        usage_history.advance(db, cid, cluster.name, limit, table)
        return len(events)

    def _cap(
        self, cluster: ClusterRecord, start: int, limit: int, table: str = usage_history.CURSORS
    ) -> int:
        """The first bucket to meter: at most ``metering.catchup.max.ms`` before ``limit``."""
        most = max(BUCKET_MS, self.settings.metering_catchup_max_ms // BUCKET_MS * BUCKET_MS)
        if limit - start <= most:
            return start
        skipped = limit - most
        log.warning(
            "cluster %s: usage from %s to %s is not metered: the control plane was down "
            "longer than metering.catchup.max.ms (%d ms); metering resumes at %s",
            cluster.name,
            _iso(start),
            _iso(skipped),
            self.settings.metering_catchup_max_ms,
            _iso(skipped),
        )
        usage_history.advance(self.store.db, cluster.cluster_id, cluster.name, skipped, table)
        return skipped

    async def _send(self, cluster: ClusterRecord, events: list[UsageEvent]) -> None:
        """One Produce (acks=all) of ``events`` to the leader of the usage topic."""
        brokers = self.store.brokers(cluster.name)
        leader = await self._leader(cluster, brokers)
        batch = encode_batch(
            [(event.key, event.encode()) for event in events],
            timestamp_ms=usage_history.now_ms(self.clock),
        )
        await Admin.to(leader, self.timeout).produce(USAGE_TOPIC, 0, batch)

    async def _leader(self, cluster: ClusterRecord, brokers: list[BrokerRecord]) -> BrokerRecord:
        """The broker leading the usage topic's partition (the topic created if missing)."""
        describe = _describe_usage_topic
        try:
            leader = await on_any(brokers, describe, self.timeout, read_only=True)
        except KafkaResponseError as exc:
            if exc.code != ErrorCode.unknown_topic_or_partition:
                raise
            create = functools.partial(_create_usage_topic, replicas=min(3, len(brokers)))
            try:
                await on_any(brokers, create, self.timeout)
                log.info("cluster %s: created %s", cluster.name, USAGE_TOPIC)
            except KafkaResponseError as refused:
                if refused.code != ErrorCode.topic_already_exists:
                    raise
            leader = await on_any(brokers, describe, self.timeout, read_only=True)
        self._topics.add(cluster.cluster_id)
        for broker in brokers:
            if broker.broker_id == leader:
                return broker
        raise LeaderNotAvailable(f"{USAGE_TOPIC}-0 has no leader among the cluster's brokers")

    def _failed(self, cluster: ClusterRecord, exc: BaseException) -> None:
        message = str(exc) or type(exc).__name__
        if self._failing.get(cluster.cluster_id) != message:
            self._failing[cluster.cluster_id] = message
            log.warning(
                "cluster %s: usage not metered yet (%s); retrying every %d ms "
                "(metering.interval.ms)",
                cluster.name,
                message,
                self.settings.metering_interval_ms,
            )


async def _describe_usage_topic(admin: Admin) -> int:
    """The leader of the usage topic's partition 0 (-1: none yet)."""
    (topic,) = await admin.metadata([USAGE_TOPIC])
    return topic.partitions[0].leader if topic.partitions else -1


async def _create_usage_topic(admin: Admin, replicas: int) -> None:
    await admin.create_topic(USAGE_TOPIC, 1, max(1, replicas), dict(USAGE_TOPIC_CONFIGS))


def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
