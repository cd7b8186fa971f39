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

from dataplane.config import BrokerConfig
from dataplane.log.manager import LogManager
from dataplane.metadata import MetadataStore, TopicInfo

if TYPE_CHECKING:
    from dataplane.groups.coordinator import GroupCoordinator

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = int(config["node.id"])
        data_dir = Path(config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        self.metadata = MetadataStore(data_dir, node_id=self.node_id)
        self.logs = LogManager(config, self.metadata)
        self.groups: GroupCoordinator | None = None
        self.started_at = time.time()
        self._tasks: list[asyncio.Task[None]] = []

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
        if not self.config["auto.create.topics.enable"]:
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
