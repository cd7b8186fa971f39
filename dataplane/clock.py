"""The broker's wall clock: the one time source for everything that stamps or compares wall
time (LogAppendTime, segment ages and time retention, transaction and group timestamps,
metering intervals). Intervals and timeouts that need no wall time use ``time.monotonic``.

Fault injection (issue 19) skews one broker's clock through this seam: with
``clock.offset.file`` set, the broker re-reads that file (a number of milliseconds, signed)
every ``clock.offset.poll.ms`` and adds it to the system's wall clock, as a host whose clock
NTP steps would see. A missing or unreadable file means no offset. The offset is per process:
every broker runs in a process of its own (in-process test brokers share it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

log = logging.getLogger("sluice.clock")

_offset_s = [0.0]
"""The skew in seconds (a one-element list: module state changed in place, not rebound)."""


def now() -> float:
    """Seconds since the epoch, as this broker's clock reads them."""
    return time.time() + _offset_s[0]


def now_ms() -> int:
    """Milliseconds since the epoch, as this broker's clock reads them."""
    return int((time.time() + _offset_s[0]) * 1000)


def offset_ms() -> int:
    """The offset now applied to the system's clock."""
    return round(_offset_s[0] * 1000)


def set_offset_ms(offset: int) -> None:
    """Skew this process's clock by ``offset`` ms from the system's (0: none)."""
    if offset != offset_ms():
        log.warning("wall clock offset now %+d ms (was %+d ms)", offset, offset_ms())
    _offset_s[0] = offset / 1000


def read_offset_file(path: Path) -> int:
    """The offset a ``clock.offset.file`` holds; 0 when it is missing or not an integer."""
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


async def follow_offset_file(path: Path, every_s: float) -> None:
    """Apply the offset ``path`` holds now and every ``every_s`` seconds (a broker task)."""
    while True:
        set_offset_ms(read_offset_file(path))
        await asyncio.sleep(every_s)
