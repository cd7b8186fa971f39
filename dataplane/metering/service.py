"""A broker's metering loop: counters and samples into usage events, events into the
cluster's ``__sluice_usage`` topic (README.md here defines every dimension).

Every ``usage.flush.interval.ms`` (aligned to the wall clock, and cut at every hour) the
broker makes one event ``broker-N/INCARNATION/SEQUENCE`` from

- the counters the handlers added to since the last flush (``Meter``): bytes in and out
  by topic and principal, replication bytes, tiered retrieval, endpoint bytes, transform
  records and guest time;
- a sample of its hot storage: the local log bytes of each topic's replicas it holds,
  times the interval's length.

At each minute boundary the active controller also makes the ``controller`` event of the
minute just ended, from its metadata image: partitions and tiered (remote) bytes per topic
(internal ``__`` topics apart), times a minute. Any controller makes the same event for the
same minute (its key is the minute), so a controller change never counts a minute twice; a
minute without any active controller at its end is not counted (a failover takes seconds).

Events are spooled to disk (``Spool``) before they are sent and dropped from the spool
once the topic acknowledged them (acks=all, idempotent), in order, one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dataplane import clock as wall_clock
from dataplane.cluster.topics import NewTopic
from dataplane.metering.meter import Meter
from dataplane.metering.spool import Spool
from wire.errors import BrokerError, InvalidConfig
from wire.record_batch import Record
from wire.usage import BUCKET_MS, HOUR_MS, USAGE_TOPIC, Dimension, Usage, UsageEvent

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage
    from dataplane.cluster.member import ClusterMember
    from dataplane.config import BrokerConfig
    from dataplane.log.manager import LogManager
    from dataplane.transforms.producer import OutputProducer

log = logging.getLogger(__name__)

SEND_RETRY_S = 1.0
STOP_WAIT_S = 2.0
"""How long a stopping broker waits for each step of metering's shutdown."""
Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``); the one time source metering reads."""


class UsageMetering:
    def __init__(
        self,
        config: BrokerConfig,
        image: MetadataImage,
        cluster: ClusterMember,
        logs: LogManager,
        *,
        new_producer: Callable[[], OutputProducer],
        data_dir: Path,
        clock: Clock = wall_clock.now,
    ) -> None:
        self.enabled = config.get_bool("usage.metering.enable")
        self.meter = Meter(self.enabled)
        self.interval_ms = config.get_int("usage.flush.interval.ms")
        if HOUR_MS % self.interval_ms:
            raise InvalidConfig(
                f"usage.flush.interval.ms={self.interval_ms} does not divide an hour: choose "
                "one that does (1000, 5000, 10000, 60000, ...)"
            )
        self.retention_ms = config.get_int("usage.topic.retention.ms")
        self.image = image
        self.cluster = cluster
        self.logs = logs
        self.new_producer = new_producer
        self.clock = clock
        self.spool = Spool(data_dir / "usage", config.get_int("usage.spool.max.events"))
        self.source = f"broker-{image.node_id}"
        self.incarnation = 0
        self.sequence = 0
        self._since_ms = 0
        self._controller_minute = -1
        """The start of the last minute the controller's event was made for."""
        self._task: asyncio.Task[None] | None = None
        self._sender: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._empty = asyncio.Event()
        self._producer: OutputProducer | None = None

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if not self.enabled:
            return
        self.incarnation = self.spool.open()
        self._since_ms = self.now_ms()
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        self._sender = loop.create_task(self._send_loop())

    async def stop(self) -> None:
        """Flush what was counted (spooled; sent if the topic takes it within
        ``STOP_WAIT_S``). Every wait is bounded: a send stuck in a retry never holds the
        broker's shutdown (its event stays in the spool for the next start)."""
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.wait([self._task], timeout=STOP_WAIT_S)
        try:
            await self._flush(self.now_ms())
        except OSError as exc:
            log.error("usage could not be spooled at shutdown: %s", exc)
        self._wake.set()
        if self.spool.pending:
            self._empty.clear()
            drained = asyncio.ensure_future(self._empty.wait())
            await asyncio.wait([drained], timeout=STOP_WAIT_S)
            drained.cancel()
        if self._sender is not None:
            self._sender.cancel()
            done, _ = await asyncio.wait([self._sender], timeout=STOP_WAIT_S)
            if not done:
                log.warning(
                    "the usage sender did not stop within %.0f s; %d unsent events stay in "
                    "the spool for the next start",
                    STOP_WAIT_S,
                    len(self.spool.pending),
                )

    # ------------------------------------------------------------------ flushing

    async def _run(self) -> None:
        while True:
            now = self.now_ms()
            boundary = now - now % self.interval_ms + self.interval_ms
            await asyncio.sleep(max(boundary - now, 0) / 1000)
            now = self.now_ms()
            if now >= boundary + self.interval_ms:  # the clock stepped forward while asleep
                boundary = now - now % self.interval_ms
            try:
                await self._flush(boundary)
                await self._controller_sample(boundary)
            except OSError as exc:
                log.error("usage could not be spooled (counters kept for the next try): %s", exc)

    async def _flush(self, end_ms: int) -> None:
        """One event for [since, end_ms), cut at the hour (counters go to the later part
        only when the interval spans a boundary: it never does unless the clock jumped)."""
        start_ms = self._since_ms
        end_ms = max(end_ms, start_ms)
        hour_end = start_ms - start_ms % HOUR_MS + HOUR_MS
        if end_ms > hour_end:  # a clock jump, or a stop after a long stall
            start_ms = end_ms - end_ms % HOUR_MS if end_ms % HOUR_MS else end_ms - HOUR_MS
        self._since_ms = end_ms
        usage = self.meter.take() + self._storage_sample(end_ms - start_ms)
        if not usage:
            return
        event = UsageEvent(
            self.source, self.incarnation, self.sequence, start_ms, end_ms, tuple(usage)
        )
        self.sequence += 1
        await asyncio.to_thread(self.spool.append, event)
        self._wake.set()

    def _storage_sample(self, elapsed_ms: int) -> list[Usage]:
        if elapsed_ms <= 0:
            return []
        by_topic: defaultdict[str, int] = defaultdict(int)
        for (topic, _), plog in list(self.logs.logs.items()):
            if topic != USAGE_TOPIC:
                by_topic[topic] += plog.size_bytes
        return [
            Usage(Dimension.HOT_STORAGE_BYTE_MS, size * elapsed_ms, topic)
            for topic, size in sorted(by_topic.items())
            if size
        ]

    async def _controller_sample(self, boundary_ms: int) -> None:
        if boundary_ms % BUCKET_MS or self.cluster.local_controller() is None:
            return
        start = boundary_ms - BUCKET_MS
        if start <= self._controller_minute:
            return
        self._controller_minute = start
        usage: list[Usage] = []
        for name, info in sorted(self.image.topics.items()):
            if name.startswith("__"):  # internal topics: offsets, usage, transform modules
                continue
            usage.append(Usage(Dimension.PARTITION_MS, info.partitions * BUCKET_MS, name))
            tiered = 0
            for index in range(info.partitions):
                remote = self.image.remote_log(name, index)
                if remote is not None:
                    tiered += remote.size_bytes()
            if tiered:
                usage.append(Usage(Dimension.TIERED_STORAGE_BYTE_MS, tiered * BUCKET_MS, name))
        if usage:
            event = UsageEvent("controller", 0, start, start, boundary_ms, tuple(usage))
            await asyncio.to_thread(self.spool.append, event)
            self._wake.set()

    # ------------------------------------------------------------------ sending

    async def _send_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.spool.pending:
                event = self.spool.pending[0]
                try:
                    await self._send(event)
                except (BrokerError, OSError, TimeoutError) as exc:
                    log.warning(
                        "usage event %s not sent yet (%s); retrying in %.0f s",
                        event.key.decode(),
                        exc,
                        SEND_RETRY_S,
                    )
                    self._producer = None
                    await asyncio.sleep(SEND_RETRY_S)
                    continue
                await asyncio.to_thread(self.spool.acknowledged, 1)
            self._empty.set()

    async def _send(self, event: UsageEvent) -> None:
        if USAGE_TOPIC not in self.image.topics:
            live = len(self.image.live_brokers())
            topic = NewTopic(
                USAGE_TOPIC,
                partitions=1,
                replication_factor=max(1, min(3, live)),
                configs={"retention.ms": str(self.retention_ms), "cleanup.policy": "delete"},
            )
            if await self.cluster.create_topic(topic):
                log.info("created %s", USAGE_TOPIC)
        if self._producer is None:
            self._producer = self.new_producer()
        record = Record(0, event.end_ms, event.key, event.encode())
        await self._producer.send_records(USAGE_TOPIC, 0, [record])
