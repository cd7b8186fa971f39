"""Periodic log work: time-based rolls, retention, compaction, producer expiry.

Every second: roll active segments older than ``segment.ms`` (by the wall-clock time of
their first append) and close descriptors of deleted segments whose grace period is over.
Every ``log.retention.check.interval.ms``: retention and expiry of idle producer ids.
Every ``HW_CHECKPOINT_INTERVAL_S``: the ``high-watermark`` file of partitions whose high
watermark replication moves (in a thread: each write is an fsynced rename).
Every ``log.cleaner.backoff.ms`` (when ``log.cleaner.enable``): a log cleaner pass over
the compacted partitions, one at a time, the rewrite in a thread.

A failure in one step is logged and the loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from dataplane import clock
from dataplane.log.cleaner import LogCleaner

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.log.manager import LogManager
    from dataplane.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

HW_CHECKPOINT_INTERVAL_S = 5.0
"""As Kafka's replica.high.watermark.checkpoint.interval.ms default."""


def checkpoint_high_watermarks(plogs: list[PartitionLog]) -> None:
    """Write the high watermark of every replicated (manual high watermark) log."""
    for plog in plogs:
        if plog.closed or plog.auto_high_watermark:
            continue
        try:
            plog.checkpoint_high_watermark()
        except OSError as exc:
            if not plog.closed:
                log.error("%s: cannot checkpoint the high watermark: %s", plog.name, exc)


async def housekeeping_loop(logs: LogManager, config: BrokerConfig) -> None:
    retention_every = config.get_seconds("log.retention.check.interval.ms")
    cleaner_every = config.get_seconds("log.cleaner.backoff.ms")
    cleaner = None
    if config.get_bool("log.cleaner.enable"):
        cleaner = LogCleaner(dedupe_buffer_size=config.get_int("log.cleaner.dedupe.buffer.size"))
    tick = min(1.0, retention_every, cleaner_every)
    next_retention = time.monotonic() + retention_every
    next_clean = time.monotonic() + cleaner_every
    next_hw = time.monotonic() + HW_CHECKPOINT_INTERVAL_S
    while True:
        await asyncio.sleep(tick)
        now_ms = clock.now_ms()
        try:
            logs.roll_idle_segments(now_ms)
            logs.reap()
        except Exception:
            log.exception("segment roll / reap failed")
        if time.monotonic() >= next_retention:
            next_retention = time.monotonic() + retention_every
            try:
                logs.apply_retention(now_ms)
                logs.expire_producers(now_ms)
            except Exception:
                log.exception("retention failed")
        if time.monotonic() >= next_hw:
            next_hw = time.monotonic() + HW_CHECKPOINT_INTERVAL_S
            try:
                await asyncio.to_thread(checkpoint_high_watermarks, list(logs.logs.values()))
            except Exception:
                log.exception("high watermark checkpoint failed")
        if cleaner is not None and time.monotonic() >= next_clean:
            try:
                await cleaner.clean_all(logs)
            except Exception:
                log.exception("log cleaner pass failed")
            next_clean = time.monotonic() + cleaner_every
