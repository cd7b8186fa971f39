"""The brokers' log files, read for the Logs service (``cloudctl logs``).

Each broker's stdout and stderr go to its log file (``BrokerRecord.log_path``), which keeps
growing across restarts. A line of the broker's logging starts with its time as Python's
logging writes it (``2026-11-25 08:00:00,123``, local time; the control plane's own start line
too, ``process.log_time``); other lines (a traceback's) take the time of the line before them.

History (:func:`read_history`): every broker's lines at or after ``since``, merged by time
(stable: a broker's own order is kept), the newest ``tail`` (at most ``logs.max.lines``; the
others counted). Follow (:func:`follow`): new complete lines of each file, checked every
``logs.follow.interval.ms``; a file that shrank (removed and written again) is read from its
start.
"""

from __future__ import annotations

import asyncio
import heapq
import re
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

LINE_TIME = re.compile(rb"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3}) ")


@dataclass(frozen=True)
class Line:
    broker_id: int
    text: str
    time: float | None
    """Seconds since the epoch: the line's own time, or that of the line before it."""


def line_time(raw: bytes) -> float | None:
    """The time a log line starts with (local time, as logging writes it), or None."""
    match = LINE_TIME.match(raw)
    if match is None:
        return None
    try:
        when = time.strptime(match.group(1).decode(), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return time.mktime(when) + int(match.group(2)) / 1000


def parse_lines(broker_id: int, data: bytes, last: float | None) -> tuple[list[Line], float | None]:
    """The complete lines of ``data`` (a file's bytes up to a newline); ``last`` is the time
    of the line before them. Returns the lines and the time of the last one."""
    out = []
    for raw in data.splitlines():
        own = line_time(raw)
        if own is not None:
            last = own
        out.append(Line(broker_id, raw.decode(errors="replace"), last))
    return out, last


@dataclass
class Cursor:
    """Where a followed file was read up to."""

    path: Path
    offset: int = 0
    last_time: float | None = None


def _read_complete(path: Path, offset: int) -> tuple[bytes, int]:
    """The bytes of ``path`` from ``offset`` up to its last newline, and the offset after
    them (a line being written is read once it is complete)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            if size < offset:
                offset = 0  # removed and written again
            fh.seek(offset)
            data = fh.read(size - offset)
    except FileNotFoundError:
        return b"", 0
    end = data.rfind(b"\n")
    if end < 0:
        return b"", offset
    return data[: end + 1], offset + end + 1


def read_history(
    paths: Mapping[int, str], since: float | None, tail: int, limit: int
) -> tuple[list[Line], int, dict[int, Cursor]]:
    """Lines of every broker's log (broker id -> path) at or after ``since``, merged by time;
    the newest ``tail`` (0: all) and at most ``limit``. Returns them, the count left out, and
    where each file was read up to (for :func:`follow`)."""
    per_broker: list[list[Line]] = []
    cursors: dict[int, Cursor] = {}
    for broker_id, raw_path in sorted(paths.items()):
        path = Path(raw_path)
        data, offset = _read_complete(path, 0)
        lines, last = parse_lines(broker_id, data, None)
        cursors[broker_id] = Cursor(path, offset, last)
        if since is not None:
            lines = [ln for ln in lines if ln.time is not None and ln.time >= since]
        per_broker.append(lines)
    merged = list(heapq.merge(*per_broker, key=lambda ln: ln.time or 0.0))
    keep = min(tail or limit, limit)
    omitted = max(0, len(merged) - keep)
    return merged[omitted:], omitted, cursors


async def follow(cursors: Mapping[int, Cursor], interval: float) -> AsyncIterator[list[Line]]:
    """New complete lines of the files, as they are written (until cancelled)."""
    while True:
        found: list[Line] = []
        for broker_id, cursor in sorted(cursors.items()):
            data, cursor.offset = await asyncio.to_thread(
                _read_complete, cursor.path, cursor.offset
            )
            if data:
                lines, cursor.last_time = parse_lines(broker_id, data, cursor.last_time)
                found += lines
        if found:
            yield found
        await asyncio.sleep(interval)
