"""The broker: wires configuration, metadata, logs, replicas and coordinators together.

Nothing here parses bytes or knows the network; the server feeds decoded requests to
handlers, which call into these parts. Metadata changes are decided by the active
controller and reach every broker through the metadata log (``cluster``); this class
reacts to what the log says (``_on_metadata``): partition replicas, deleted topics,
dynamic configs, transforms to run.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
import uuid
from pathlib import Path

from dataplane import clock
from dataplane.cluster.image import Delta, MetadataImage
from dataplane.cluster.member import ClusterMember
from dataplane.cluster.producer_ids import ProducerIdManager
from dataplane.cluster.topics import NewTopic
from dataplane.config import BROKER_CONFIGS, BrokerConfig
from dataplane.coordinator_log import CoordinatorLog
from dataplane.durable import write_atomically
from dataplane.groups.coordinator import GroupCoordinator
from dataplane.log.housekeeping import housekeeping_loop
from dataplane.log.manager import LogManager
from dataplane.metadata import TopicInfo
from dataplane.metering.service import UsageMetering
from dataplane.remote.manager import RemoteLogManager
from dataplane.replication.manager import ReplicaManager
from dataplane.security.access import AccessControl
from dataplane.security.listeners import parse_listeners
from dataplane.transactions.coordinator import TRANSACTIONS, TransactionCoordinator
from dataplane.transactions.markers import MarkerSender, MarkerWriter
from dataplane.transforms.manager import TransformManager
from wire.compression import set_max_decompressed_bytes
from wire.errors import InvalidConfig

log = logging.getLogger(__name__)

META_FILE = "meta.properties"
STARTUP_TIMEOUT_S = 120.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.get_int("node.id")
        set_max_decompressed_bytes(config.get_int("message.max.decompressed.bytes"))
        data_dir = Path(config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        if config.get_str("controller.quorum.voters") and not config.get_str("cluster.id"):
            raise InvalidConfig(
                "cluster.id is required with controller.quorum.voters: give every broker of "
                "the cluster the same id"
            )
        cluster_id = _cluster_identity(data_dir, self.node_id, config.get_str("cluster.id"))
        self.metadata = MetadataImage(node_id=self.node_id, cluster_id=cluster_id)
        self.access = AccessControl(config, self.metadata)
        self.logs = LogManager(config, self.metadata)
        self.cluster = ClusterMember(config, self.metadata, data_dir)
        self.cluster.endpoints = {
            x.name: list(config.advertised_for(x.name, (x.host, x.port)))
            for x in parse_listeners(config, config.listen_host, config.listen_port)
        }
        self.producer_ids = ProducerIdManager(
            self.cluster.allocate_producer_ids, config.get_seconds("producer.id.wait.ms")
        )
        self.replicas = ReplicaManager(config, self.metadata, self.logs, self.cluster)
        self.remote: RemoteLogManager | None = None
        if config.get_bool("remote.log.storage.system.enable"):
            self.remote = RemoteLogManager(config, self.metadata, self.cluster, self.replicas)
            self.logs.tier_factory = self.remote.tier_for
            self.replicas.snapshot_source = self.remote
        self.groups = GroupCoordinator(
            config, self.metadata, self.cluster, self.replicas, self.logs
        )
        self.marker_writer = MarkerWriter(self.replicas, self.logs, self.groups)
        self.transactions = TransactionCoordinator(
            CoordinatorLog(
                TRANSACTIONS,
                config,
                image=self.metadata,
                cluster=self.cluster,
                replicas=self.replicas,
                logs=self.logs,
            ),
            self.producer_ids,
            MarkerSender(
                config,
                self.metadata,
                self.marker_writer,
                self.cluster.new_channels("txn"),
            ),
        )
        self.transforms = TransformManager(
            config, self.metadata, self.cluster, self.replicas, self.producer_ids
        )
        self.usage = UsageMetering(
            config,
            self.metadata,
            self.cluster,
            self.logs,
            new_producer=self.transforms.new_producer,
            data_dir=data_dir,
        )
        self.transforms.meter = self.usage.meter
        self.started_at = clock.now()
        self._tasks: list[asyncio.Task[None]] = []
        self.start_phases: list[tuple[str, float]] = []
        """(phase, time.monotonic() at its end) of ``start``, for the start-up log line."""
        self.static_config_values = dict(config.values)
        """Settings from defaults, the config file and --set; dynamic configs overlay them."""
        self.topic_removals: dict[str, asyncio.Task[None]] = {}
        """Deleted topics whose partition directories are still being removed."""
        self.metadata.listeners.append(self._on_metadata)

    @property
    def advertised(self) -> tuple[str, int]:
        return self.config.advertised

    async def start(self) -> None:
        """Join the cluster: replay the metadata log, register, then open for clients."""
        self.logs.remove_leftover_deletions()
        self.replicas.start()
        await self.cluster.start()
        self.start_phases.append(("metadata", time.monotonic()))
        if self.remote is not None and self.cluster.controller is not None:
            self.cluster.controller.remote_cleanup = self.remote.delete_topic_objects
        # the logs of the replicas the local metadata gives this broker are recovered
        # while it registers, in threads (Kafka's LogManager loads them all at start-up)
        hosted = [
            key
            for key, state in self.replicas.image.partitions.items()
            if self.node_id in state.replicas
        ]
        loading = asyncio.ensure_future(self.logs.load(hosted))
        try:
            await self.cluster.wait_registered(STARTUP_TIMEOUT_S)
        except BaseException:
            loading.cancel()
            raise
        # registration in two: until the controller answered (finding it included), until
        # this broker's image held the registration
        marks = self.cluster.registration_marks
        if len(marks) == 2:
            self.start_phases += marks.items()  # answered, then replayed
        else:
            self.start_phases.append(("registration", time.monotonic()))
        await loading
        self.start_phases.append(("partition logs", time.monotonic()))
        self.replicas.activate()
        self.start_phases.append(("replica roles", time.monotonic()))
        await self.groups.start()
        self.transactions.start()
        if self.remote is not None:
            await self.remote.start()
        self.transforms.start()
        self.usage.start()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(housekeeping_loop(self.logs, self.config)))
        if offset_file := self.config.get_str("clock.offset.file"):
            every = self.config.get_seconds("clock.offset.poll.ms")
            path = Path(self.config.data_dir) / offset_file  # an absolute one stays as is
            self._tasks.append(loop.create_task(clock.follow_offset_file(path, every)))
        self.start_phases.append(("coordinators", time.monotonic()))

    async def stop(self) -> None:
        await self.transforms.stop()
        await self.usage.stop()
        await self.cluster.shut_down_gracefully()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.producer_ids.stop()
        await self.transactions.stop()
        await self.transactions.markers.channels.close()
        await self.groups.stop()
        if self.remote is not None:
            await self.remote.stop()
        await self.replicas.stop()
        await self.cluster.stop()
        self.logs.close()

    # ------------------------------------------------------------------ topics

    async def auto_create(self, name: str) -> TopicInfo | None:
        """Create ``name`` with the broker defaults (num.partitions,
        default.replication.factor) through the controller; None when
        auto.create.topics.enable is off. Raises the creation's error."""
        if not self.config.get_bool("auto.create.topics.enable"):
            return None
        pending = self.topic_removals.get(name)
        if pending is not None:
            await asyncio.gather(pending, return_exceptions=True)
        if await self.cluster.create_topic(NewTopic(name)):
            log.info("auto-created topic %s", name)
        return await self.await_topic(name)

    async def await_topic(self, name: str, timeout: float = 10.0) -> TopicInfo | None:
        """The topic once this broker's image has it (a forwarded creation commits on the
        controller first)."""
        deadline = time.monotonic() + timeout
        while name not in self.metadata.topics and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        return self.metadata.topics.get(name)

    # ------------------------------------------------------------------ metadata reactions

    def _on_metadata(self, delta: Delta) -> None:
        for info in delta.removed:
            self._remove_topic_locally(info)
        if delta.broker_configs or delta.restored:
            self.apply_dynamic_configs()
        self.replicas.on_metadata(delta)
        self.groups.on_metadata(delta)
        self.transactions.on_metadata(delta)
        self.transforms.on_metadata(delta)

    def _remove_topic_locally(self, info: TopicInfo) -> None:
        """A deleted topic: its offsets go, its partition directories go in a task. Until
        that task ends the name stays in ``topic_removals``: creating the topic again
        waits for it, so a new incarnation never reuses an old partition log."""
        self.groups.on_topic_deleted(info.name)
        task = asyncio.get_running_loop().create_task(self._remove_topic(info))
        self.topic_removals[info.name] = task

    async def _remove_topic(self, info: TopicInfo) -> None:
        try:
            # closing each log wakes the fetches long-polling on it (the log's on_change
            # hook, set by its replication Partition): they re-read and see it is gone
            await self.logs.remove_topic(info)
            log.info("deleted topic %s (%s)", info.name, info.topic_id)
        finally:
            if self.topic_removals.get(info.name) is asyncio.current_task():
                del self.topic_removals[info.name]

    # ------------------------------------------------------------------ dynamic configs

    def apply_dynamic_configs(self) -> None:
        """Overlay the dynamic broker configs of the metadata image on the static ones:
        this broker's own (scope "N") over the cluster-wide default (scope "")."""
        values = dict(self.static_config_values)
        for scope in ("", str(self.node_id)):
            for key, raw in self.metadata.broker_configs.get(scope, {}).items():
                definition = BROKER_CONFIGS.get(key)
                try:
                    if definition is None:
                        raise InvalidConfig(f"unknown broker config {key!r}")
                    values[key] = definition.parse(raw)
                except InvalidConfig as exc:
                    log.warning("ignoring dynamic broker config %s=%r: %s", key, raw, exc)
        for key, value in values.items():
            self.config.values[key] = value  # in place: every part holds this config
        self.logs.invalidate_configs()


def _cluster_identity(data_dir: Path, node_id: int, configured: str) -> str:
    """The cluster id this data directory belongs to (``meta.properties``, as Kafka).

    A configured ``cluster.id`` must match the stored one; without either, a new id is
    generated. A data directory of another node id is refused.
    """
    path = data_dir / META_FILE
    stored: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                stored[key.strip()] = value.strip()
    if stored:
        if configured and stored.get("cluster.id") != configured:
            raise InvalidConfig(
                f"{data_dir} holds data of cluster {stored.get('cluster.id')}, not of "
                f"cluster.id={configured}; use another --data-dir or the matching id"
            )
        if stored.get("node.id") not in (None, str(node_id)):
            raise InvalidConfig(
                f"{data_dir} holds data of node {stored.get('node.id')}, not of "
                f"node.id={node_id}; use another --data-dir or the matching id"
            )
        return stored["cluster.id"]
    cluster_id = configured or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    write_atomically(path, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n".encode())
    return cluster_id
