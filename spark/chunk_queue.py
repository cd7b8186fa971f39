"""Ranged GETs of the segment objects one executor task reads, queued ahead of the decoder.

A task reads its objects one after the other, each from a byte position to its end, in
GETs of ``sluice.read.chunk.bytes``. The process's prefetch thread keeps
``sluice.read.prefetch.chunks`` GETs in flight ahead of the chunk being decoded, across
the objects' boundaries: the first chunk of the next segment arrives while this one is
decoded, so a task waits for one GET at its start, not one per segment. The GETs run one at
a time (the receive releases the interpreter lock); each queued one holds a chunk of memory.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from tiered.object_store import S3ObjectStore

_pools: dict[int, ThreadPoolExecutor] = {}


def _pool() -> ThreadPoolExecutor:
    """The process's prefetch thread (a worker forked from a process that had one makes its
    own: threads do not survive a fork)."""
    pid = os.getpid()
    pool = _pools.get(pid)
    if pool is None:
        pool = _pools[pid] = ThreadPoolExecutor(1, thread_name_prefix="sluice-prefetch")
    return pool


@dataclass(frozen=True)
class _Get:
    number: int
    """Which object of the queue (in the order they were added)."""
    key: str
    start: int
    end: int


class ChunkQueue:
    """Chunks of the objects added, in order, with ``depth`` GETs queued ahead (0: each GET
    made when its chunk is asked for). Not thread-safe: one task's reader uses it."""

    def __init__(self, store: S3ObjectStore, chunk_bytes: int, depth: int) -> None:
        if chunk_bytes <= 0 or depth < 0:
            raise ValueError(f"chunk bytes {chunk_bytes} and depth {depth}: positive, not negative")
        self.store = store
        self.chunk_bytes = chunk_bytes
        self.depth = depth
        self._objects = 0
        self._gets: deque[_Get] = deque()
        self._ahead: deque[tuple[_Get, Future[bytes]]] = deque()
        self._done = -1
        """Objects numbered up to this one are no longer read: their GETs are skipped."""

    def add(self, key: str, position: int, size: int) -> int:
        """Queue ``[position, size)`` of ``key``; its number for :meth:`chunks`."""
        number = self._objects
        self._objects += 1
        for start in range(position, size, self.chunk_bytes):
            self._gets.append(_Get(number, key, start, min(size, start + self.chunk_bytes)))
        return number

    def chunks(self, number: int) -> Generator[bytes]:
        """The chunks of object ``number``, in order, until its end or a short answer (the
        object ends there). Objects before it that were left early are skipped; once this
        generator is left, the object's chunks not yet asked for are never fetched."""
        try:
            while True:
                self._fill()
                if not self._ahead:
                    return
                get, future = self._ahead[0]
                if get.number < number:
                    self._ahead.popleft()
                    future.cancel()
                    continue
                if get.number > number:
                    return
                self._ahead.popleft()
                data = future.result()
                if data:
                    yield data
                if len(data) < get.end - get.start:
                    return
        finally:
            self._done = max(self._done, number)

    def close(self) -> None:
        """Cancel what is queued (a GET already running finishes; its chunk is dropped)."""
        for _, future in self._ahead:
            future.cancel()
        self._ahead.clear()
        self._gets.clear()

    def _fill(self) -> None:
        while len(self._ahead) <= self.depth and self._gets:
            get = self._gets.popleft()
            if get.number <= self._done:
                continue
            self._ahead.append((get, self._submit(get)))

    def _submit(self, get: _Get) -> Future[bytes]:
        if self.depth:
            return _pool().submit(self.store.get_range, get.key, get.start, get.end)
        future: Future[bytes] = Future()  # no prefetch: the GET is made here, now
        try:
            future.set_result(self.store.get_range(get.key, get.start, get.end))
        except Exception as exc:
            future.set_exception(exc)
        return future
