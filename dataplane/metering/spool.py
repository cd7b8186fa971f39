"""A broker's unsent usage events, on disk until the usage topic has them.

``DATA_DIR/usage/spool.jsonl`` holds one encoded event per line, in sequence order. An
event is appended and fsynced before it is sent, and the file is rewritten without it once
the topic acknowledged it: a broker killed at any point re-sends, under the same key, every
event it made that the topic might not have (a re-send the topic already had is a duplicate
key, which readers drop). A line torn by a kill in the middle of an append was never sent
and is dropped with a warning (its quantities are the one interval the guarantee does not
cover, as the counters of the interval in progress).

``DATA_DIR/usage/incarnation`` counts the broker's starts: the EPOCH of its event keys.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from dataplane.durable import write_all, write_atomically
from wire.usage import MalformedUsage, UsageEvent

log = logging.getLogger(__name__)

SPOOL = "spool.jsonl"
INCARNATION = "incarnation"


class Spool:
    def __init__(self, directory: Path, max_events: int) -> None:
        self.directory = directory
        self.max_events = max_events
        self.pending: list[UsageEvent] = []
        self._lock = threading.Lock()
        """``append`` and ``acknowledged`` run in worker threads: one at a time."""
        self.dropped = 0
        """Events dropped because the spool was full (each logged with what it held)."""

    @property
    def path(self) -> Path:
        return self.directory / SPOOL

    def open(self) -> int:
        """Load the unsent events; returns this start's incarnation (the previous + 1)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        marker = self.directory / INCARNATION
        previous = 0
        if marker.exists():
            text = marker.read_text().strip()
            if not text.isdigit():
                raise ValueError(f"{marker} holds {text[:40]!r}, not a number: remove it")
            previous = int(text)
        incarnation = previous + 1
        write_atomically(marker, f"{incarnation}\n".encode())
        self.pending = []
        if self.path.exists():
            for number, line in enumerate(self.path.read_bytes().splitlines(), 1):
                try:
                    self.pending.append(UsageEvent.decode(line))
                except MalformedUsage as exc:
                    log.warning("%s line %d dropped (torn by a crash?): %s", self.path, number, exc)
        if self.pending:
            log.info("%d unsent usage events from before the restart", len(self.pending))
        return incarnation

    def append(self, event: UsageEvent) -> None:
        """Keep ``event`` durably (blocking: call it off the event loop)."""
        with self._lock:
            self._append(event)

    def _append(self, event: UsageEvent) -> None:
        if len(self.pending) >= self.max_events:
            oldest = self.pending.pop(0)
            self.dropped += 1
            log.error(
                "usage spool full (usage.spool.max.events=%d): dropped event %s: %s",
                self.max_events,
                oldest.key.decode(),
                oldest.encode().decode(),
            )
            self._rewrite()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            write_all(fd, event.encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        self.pending.append(event)

    def acknowledged(self, count: int) -> None:
        """The first ``count`` pending events are in the topic (blocking)."""
        with self._lock:
            del self.pending[:count]
            self._rewrite()

    def _rewrite(self) -> None:
        write_atomically(self.path, b"".join(e.encode() + b"\n" for e in self.pending))
