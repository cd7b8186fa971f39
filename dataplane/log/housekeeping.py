"""Periodic log work: time-based rolls, retention, compaction, producer expiry.

Every second: roll active segments older than ``segment.ms`` (by the wall-clock time of
their first append) and close descriptors of deleted segments whose grace period is over.
Every ``log.retention.check.interval.ms``: retention and expiry of idle producer ids.
Every ``log.cleaner.backoff.ms`` (when ``log.cleaner.enable``): a log cleaner pass over
the compacted partitions, one at a time, the rewrite in a thread.

A failure in one step is logged and the loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from dataplane.log.cleaner import LogCleaner

log = logging.getLogger(__name__)


async def housekeeping_loop(broker: Any) -> None:
    logs = broker.logs
    config = broker.config
    retention_every = int(config["log.retention.check.interval.ms"]) / 1000
    cleaner_every = int(config["log.cleaner.backoff.ms"]) / 1000
    cleaner = None
    if config["log.cleaner.enable"]:
        cleaner = LogCleaner(dedupe_buffer_size=int(config["log.cleaner.dedupe.buffer.size"]))
    tick = min(1.0, retention_every, cleaner_every)
    next_retention = time.monotonic() + retention_every
    next_clean = time.monotonic() + cleaner_every
    while True:
        await asyncio.sleep(tick)
        now_ms = int(time.time() * 1000)
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
        if cleaner is not None and time.monotonic() >= next_clean:
            try:
                await cleaner.clean_all(logs)
            except Exception:
                log.exception("log cleaner pass failed")
            next_clean = time.monotonic() + cleaner_every
