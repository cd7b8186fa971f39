"""Keyed one-shot timers on the event loop (the coordinator's ``Timer`` in Kafka).

A key names one pending expiry ("heartbeat of member M of group G", "join phase of group
G"); scheduling a key again replaces its timer, as Kafka's coordinator timer does. Timers
are ``loop.call_later`` handles: nothing polls, and ``cancel_all`` stops every one of them.
A callback that raises is logged and does not stop the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)


class Timer:
    def __init__(self) -> None:
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def schedule(self, key: Hashable, delay_ms: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` after ``delay_ms`` unless ``key`` is cancelled or rescheduled."""
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, callback)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        handles, self._handles = self._handles, {}
        for handle in handles.values():
            handle.cancel()

    def __len__(self) -> int:
        return len(self._handles)

    def _fire(self, key: Hashable, callback: Callable[[], None]) -> None:
        self._handles.pop(key, None)
        try:
            callback()
        except Exception:
            log.exception("group coordinator timer %r failed", key)
