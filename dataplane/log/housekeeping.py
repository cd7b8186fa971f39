"""Periodic log work: time-based rolls, retention, compaction."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


async def housekeeping_loop(broker: Any) -> None:
    interval = int(broker.config["log.retention.check.interval.ms"]) / 1000
    while True:
        await asyncio.sleep(min(interval, 1.0))
        for plog in list(broker.logs.logs.values()):
            plog.maybe_roll_by_time()
