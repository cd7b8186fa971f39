"""The broker: wires configuration, metadata, logs and coordinators together.

Nothing here parses bytes or knows the network; the server feeds decoded requests to
handlers, which call into these parts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dataplane.config import BROKER_CONFIGS, BrokerConfig
from dataplane.errors import InvalidConfig
from dataplane.log.manager import LogManager
from dataplane.metadata import MetadataStore, TopicInfo

if TYPE_CHECKING:
    from dataplane.groups.coordinator import GroupCoordinator
    from dataplane.log.partition_log import PartitionLog

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = int(config["node.id"])
        data_dir = Path(config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        self.metadata = MetadataStore(
            data_dir, node_id=self.node_id, cluster_id=str(config["cluster.id"])
        )
        self.logs = LogManager(config, self.metadata)
        self.groups: GroupCoordinator | None = None
        self.started_at = time.time()
        self._tasks: list[asyncio.Task[None]] = []
        self.static_config_values = dict(config.values)
        """Settings from defaults, the config file and --set; dynamic configs overlay them."""
        self.topic_removals: dict[str, asyncio.Task[None]] = {}
        """Deleted topics whose partition directories are still being removed."""
        self.apply_dynamic_configs()

    @property
    def advertised(self) -> tuple[str, int]:
        return self.config.advertised

    async def start(self) -> None:
        self.logs.remove_leftover_deletions()
        self.logs.open_all()
        from dataplane.groups.coordinator import GroupCoordinator

        self.groups = GroupCoordinator(self)
        await self.groups.start()
        from dataplane.log.housekeeping import housekeeping_loop

        self._tasks.append(asyncio.get_running_loop().create_task(housekeeping_loop(self)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.groups is not None:
            await self.groups.stop()
        self.logs.close()

    # ------------------------------------------------------------------ topics

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicInfo:
        info = self.metadata.create_topic(name, partitions, replication_factor, configs)
        self.logs.ensure_partitions(info)
        return info

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create ``name`` with broker defaults when auto.create.topics.enable is set."""
        if not self.config["auto.create.topics.enable"] or name in self.topic_removals:
            return None
        partitions = int(self.config["num.partitions"])
        self.metadata.validate_new_topic(
            name,
            partitions,
            1,
            {},
            max_partitions=int(self.config["max.partitions.per.topic"]),
        )
        log.info("auto-creating topic %s with %d partition(s)", name, partitions)
        return self.create_topic(name, partitions, 1, {})

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow topic ``name`` to ``count`` partitions and open the new partition logs."""
        info = self.metadata.set_partitions(name, count)
        self.logs.ensure_partitions(info)
        return info

    def delete_topic(self, name: str) -> asyncio.Task[None]:
        """Forget topic ``name`` now; its partition directories go in the returned task.

        Until that task ends the name stays in ``topic_removals``: creating the topic
        again waits for it, so a new incarnation never reuses an old partition log.
        """
        info = self.metadata.delete_topic(name)
        if self.groups is not None:
            self.groups.on_topic_deleted(name)  # committed offsets go with the topic
        plogs = [plog for p in range(info.partitions) if (plog := self.logs.logs.get((name, p)))]
        task = asyncio.get_running_loop().create_task(self._remove_topic(info, plogs))
        self.topic_removals[name] = task
        return task

    async def _remove_topic(self, info: TopicInfo, plogs: list[PartitionLog]) -> None:
        try:
            await self.logs.remove_topic(info)
            log.info("deleted topic %s (%s)", info.name, info.topic_id)
        finally:
            if self.topic_removals.get(info.name) is asyncio.current_task():
                del self.topic_removals[info.name]
            for plog in plogs:
                plog._wake()  # fetches long-polling on the deleted partitions re-read

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
