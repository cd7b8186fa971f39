"""All partition logs of a broker: directories, effective topic configs, fsync batching.

Partition directories are ``DATA_DIR/TOPIC-PARTITION`` as in Kafka. The flusher gives
``log.flush.policy=fsync`` its group commit: every produce that needs durability waits
for the next fsync round, and one round covers every write made before it started
(including writes to a segment that rolled since and is not sealed yet).

Effective topic configs are cached per topic and recomputed when the topic's metadata
entry is replaced (a TopicConfig record replaces it); whoever changes broker-level
settings at run time calls :meth:`LogManager.invalidate_configs`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dataplane.config import TOPIC_CONFIGS, BrokerConfig, TopicSettings
from dataplane.log.local_log import LocalLog
from dataplane.log.partition_log import PartitionLog, RemoteTier
from dataplane.metadata import TopicInfo
from wire.errors import UnknownTopicOrPartition

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class LogManager:
    def __init__(self, config: BrokerConfig, metadata: MetadataImage) -> None:
        self.config = config
        self.metadata = metadata
        self.data_dir = Path(config.data_dir)
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self._flush_waiters: list[asyncio.Future[None]] = []
        self._flush_task: asyncio.Task[None] | None = None
        self._dirty: set[PartitionLog] = set()
        self._config_cache: dict[str, tuple[TopicInfo | None, TopicSettings]] = {}
        self._loading: set[TopicPartition] = set()
        """Partitions whose logs ``load`` is opening in its threads."""
        self.tier_factory: Callable[[str, int], RemoteTier] | None = None
        """Makes each partition's remote tier, when the broker has tiered storage."""
        LocalLog.full_backoff_s = config.get_int("log.dir.full.backoff.ms") / 1000

    # ------------------------------------------------------------------ configs

    def topic_config(self, topic: str, key: str) -> Any:
        return self._configs_of(topic)[key]

    def effective_configs(self, topic: str) -> dict[str, Any]:
        return dict(self._configs_of(topic))

    def invalidate_configs(self) -> None:
        """Forget cached effective configs (after a broker-level config change)."""
        self._config_cache.clear()

    def _configs_of(self, topic: str) -> TopicSettings:
        info = self.metadata.topics.get(topic)
        cached = self._config_cache.get(topic)
        if cached is not None and cached[0] is info:
            return cached[1]
        parsed: dict[str, Any] = {}
        for key, definition in TOPIC_CONFIGS.items():
            if info is not None and key in info.configs:
                parsed[key] = definition.parse(info.configs[key])
            else:
                parsed[key] = self.config.topic_default(key)
        values = TopicSettings(parsed)
        self._config_cache[topic] = (info, values)
        return values

    # ------------------------------------------------------------------ partitions

    def open_partition(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker holds a replica of, opened on first use."""
        plog = self.logs.get((topic, partition))
        if plog is None:
            if (topic, partition) in self._loading:
                raise RuntimeError(f"{topic}-{partition} is opened while it is being loaded")
            plog = self.logs[(topic, partition)] = self._open(topic, partition)
        return plog

    async def load(self, keys: Iterable[TopicPartition]) -> None:
        """Open the logs of ``keys`` that have a directory here, each in one of
        ``num.recovery.threads.per.data.dir`` threads, as Kafka's LogManager loads every
        log at start-up: a broker killed mid-write scans and checks its active segments
        (recovery), which took a restarted soak broker a median 0.2-0.7 s on the event
        loop, after its registration. Called before the registration, it overlaps that
        wait. Nothing may open these logs meanwhile (``open_partition`` refuses); a log
        whose load fails is left to ``open_partition``, which fails alike where the
        replica role is taken (logged, retried)."""
        todo = [
            k
            for k in keys
            if k not in self.logs and k not in self._loading
            if (self.data_dir / f"{k[0]}-{k[1]}").is_dir()
        ]
        if not todo:
            return
        self._loading.update(todo)
        loop = asyncio.get_running_loop()
        threads = self.config.get_int("num.recovery.threads.per.data.dir")
        pool = ThreadPoolExecutor(threads, thread_name_prefix="log-recovery")
        try:
            loads = [loop.run_in_executor(pool, self._load, *k) for k in todo]
            for key, outcome in zip(
                todo, await asyncio.gather(*loads, return_exceptions=True), strict=True
            ):
                if isinstance(outcome, BaseException):
                    log.warning("%s-%d: cannot load the log: %s", *key, outcome)
                elif key[0] not in self.metadata.topics:  # deleted meanwhile
                    outcome.close()
                else:
                    self.logs[key] = self._with_tier(outcome)
        finally:
            self._loading.difference_update(todo)
            pool.shutdown(wait=False)

    async def remove_partition(self, topic: str, partition: int) -> None:
        """Close and delete one partition's directory (a replica moved away)."""
        plog = self.logs.pop((topic, partition), None)
        if plog is None:
            return
        plog.close()
        self._dirty.discard(plog)
        target = plog.directory.with_name(f"{plog.directory.name}.{uuid.uuid4().hex}-delete")
        plog.directory.rename(target)
        await asyncio.to_thread(_remove_all, [target])

    def _open(self, topic: str, partition: int) -> PartitionLog:
        return self._with_tier(self._load(topic, partition))

    def _with_tier(self, plog: PartitionLog) -> PartitionLog:
        if self.tier_factory is not None:
            plog.remote_tier = self.tier_factory(plog.topic, plog.partition)
        return plog

    def _load(self, topic: str, partition: int) -> PartitionLog:
        """Open (and recover) a partition's log; any thread may call it."""
        directory = self.data_dir / f"{topic}-{partition}"

        def view(key: str, _topic: str = topic) -> Any:
            return self.topic_config(_topic, key)

        return PartitionLog(
            directory,
            topic,
            partition,
            view,
            max_producer_entries=self.config.get_int("max.producer.state.entries"),
            settings=lambda: self._configs_of(topic),
        )

    def get(self, topic: str, partition: int) -> PartitionLog:
        try:
            return self.logs[(topic, partition)]
        except KeyError:
            raise UnknownTopicOrPartition(
                f"this broker has no partition {partition} of topic {topic!r}"
            ) from None

    def partitions_of(self, topic: str) -> Iterator[PartitionLog]:
        info = self.metadata.topics.get(topic)
        if info is None:
            return
        for partition in range(info.partitions):
            found = self.logs.get((topic, partition))
            if found is not None:
                yield found

    async def remove_topic(self, info: TopicInfo) -> None:
        """Close and delete a topic's partition directories (renamed first, as Kafka)."""
        doomed: list[Path] = []
        for partition in range(info.partitions):
            plog = self.logs.pop((info.name, partition), None)
            if plog is None:
                continue
            plog.close()
            self._dirty.discard(plog)
            target = plog.directory.with_name(f"{plog.directory.name}.{uuid.uuid4().hex}-delete")
            plog.directory.rename(target)
            doomed.append(target)
        await asyncio.to_thread(_remove_all, doomed)

    def remove_leftover_deletions(self) -> None:
        for path in self.data_dir.glob("*-delete"):
            shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------------ durability

    @property
    def fsync_on_append(self) -> bool:
        return self.config.get_str("log.flush.policy") == "fsync"

    def sync(self, plog: PartitionLog) -> asyncio.Future[None]:
        """A future that resolves once everything written so far to ``plog`` is fsynced."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._dirty.add(plog)
        self._flush_waiters.append(future)
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_rounds())
        return future

    async def _flush_rounds(self) -> None:
        while self._flush_waiters:
            waiters, self._flush_waiters = self._flush_waiters, []
            dirty, self._dirty = self._dirty, set()
            fds = [fd for plog in dirty for fd in plog.sync_fds()]
            try:
                await asyncio.to_thread(_fsync_all, fds)
            except OSError as exc:
                log.error("fsync failed: %s", exc)
                for future in waiters:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for plog in dirty:
                plog.dirty = False
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def close(self) -> None:
        """Close every log cleanly: sealed segments, active indexes and producer snapshots
        written, so the next start skips recovery scans."""
        for plog in self.logs.values():
            try:
                plog.close_cleanly()
            except OSError as exc:
                log.error("closing %s-%d: %s", plog.topic, plog.partition, exc)
        self.logs.clear()

    # ------------------------------------------------------------------ housekeeping

    def apply_retention(self, now_ms: int) -> int:
        """Retention of every partition; returns the number of segments deleted."""
        deleted = 0
        for plog in list(self.logs.values()):
            try:
                deleted += plog.apply_retention(now_ms)
            except OSError as exc:
                log.error("retention of %s failed: %s", plog.name, exc)
        return deleted

    def roll_idle_segments(self, now_ms: int) -> None:
        for plog in list(self.logs.values()):
            if not plog.closed:
                try:
                    plog.maybe_roll_by_time(now_ms)
                except OSError as exc:
                    log.error("rolling %s failed: %s", plog.name, exc)

    def reap(self) -> None:
        for plog in list(self.logs.values()):
            plog.reap()

    def expire_producers(self, now_ms: int) -> None:
        max_idle = self.config.get_int("producer.id.expiration.ms")
        for plog in list(self.logs.values()):
            plog.producers.expire(now_ms, max_idle)


def _fsync_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.fsync(fd)
        except OSError as exc:
            # A descriptor closed since the round began (topic deleted, segment reaped)
            # has nothing left to make durable; any other failure fails the round.
            if exc.errno != errno.EBADF:
                raise


def _remove_all(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
