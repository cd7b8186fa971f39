"""A bounded local disk cache of fixed-size chunks of remote objects (remote reads).

Chunk ``i`` of an object is bytes ``[i * chunk_bytes, (i + 1) * chunk_bytes)``. A read
fetches the chunks it lacks with one ranged GET per contiguous run of missing chunks (the
embedded S3 serves a ranged GET at the cost of a whole one, so few large requests matter),
stores each chunk in its own file (temporary file + rename; it is a cache, so no fsync),
and evicts least-recently-used chunks until the cache is under ``max_bytes``. Two threads
missing the same chunk fetch it once. Files left by an earlier process are removed at
start. Remote segments are immutable (a re-upload gets a new key), so a cached chunk is
never stale; a reader that finds a corrupted batch calls ``invalidate`` and reads again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path

from tiered.object_store import ObjectStore


class ChunkCache:
    def __init__(self, directory: Path, max_bytes: int, chunk_bytes: int) -> None:
        if chunk_bytes <= 0:
            raise ValueError("chunk_bytes must be positive")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.chunk_bytes = chunk_bytes
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._chunks: OrderedDict[tuple[str, int], int] = OrderedDict()
        """(key, chunk index) -> size, least recently used first."""
        self._size = 0
        self._inflight: dict[tuple[str, int], Future[bytes]] = {}
        self.hits = 0
        self.misses = 0
        self.fetched_bytes = 0
        self.requests = 0
        self.evictions = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "fetched_bytes": self.fetched_bytes,
                "requests": self.requests,
                "evictions": self.evictions,
                "cached_bytes": self._size,
                "cached_chunks": len(self._chunks),
            }

    def read(self, store: ObjectStore, key: str, object_size: int, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (``end`` clamped to its size)."""
        end = min(end, object_size)
        if start >= end:
            return b""
        first, last = start // self.chunk_bytes, (end - 1) // self.chunk_bytes
        chunks = self._chunks_for(store, key, object_size, first, last, start, end)
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def _chunks_for(  # noqa: PLR0917 - a read's coordinates
        self,
        store: ObjectStore,
        key: str,
        object_size: int,
        first: int,
        last: int,
        start: int,
        end: int,
    ) -> list[bytes]:
        """The pieces of ``[start, end)`` in chunks ``first``..``last``: a cached chunk is
        read only where the range covers it; missing ones are fetched whole (and cached)."""

        def piece(i: int, data: bytes) -> bytes:
            base = i * self.chunk_bytes
            lo, hi = max(start - base, 0), min(end - base, len(data))
            return data if (lo, hi) == (0, len(data)) else data[lo:hi]

        found: dict[int, bytes] = {}
        waits: dict[int, Future[bytes]] = {}
        mine: list[int] = []
        with self._lock:
            for i in range(first, last + 1):
                base = i * self.chunk_bytes
                data = self._load(key, i, max(start - base, 0), end - base)
                if data is not None:
                    self.hits += 1
                    found[i] = data
                elif (key, i) in self._inflight:
                    waits[i] = self._inflight[(key, i)]
                else:
                    self.misses += 1
                    self._inflight[(key, i)] = Future()
                    mine.append(i)
        try:
            for run in _runs(mine):
                fetched = self._fetch(store, key, object_size, run)
                found.update({i: piece(i, data) for i, data in fetched.items()})
        except BaseException as exc:
            with self._lock:
                for i in mine:
                    future = self._inflight.pop((key, i), None)
                    if future is not None and not future.done():
                        future.set_exception(exc)
            raise
        for i, future in waits.items():
            found[i] = piece(i, future.result())
        return [found[i] for i in range(first, last + 1)]

    def _fetch(
        self, store: ObjectStore, key: str, object_size: int, run: list[int]
    ) -> dict[int, bytes]:
        start = run[0] * self.chunk_bytes
        end = min(object_size, (run[-1] + 1) * self.chunk_bytes)
        data = store.get_range(key, start, end)
        out = {}
        for i in run:
            at = (i - run[0]) * self.chunk_bytes
            out[i] = data[at : at + self.chunk_bytes]
        with self._lock:
            self.requests += 1
            self.fetched_bytes += len(data)
            for i, chunk in out.items():
                self._store(key, i, chunk)
                future = self._inflight.pop((key, i), None)
                if future is not None:
                    future.set_result(chunk)
        return out

    # ------------------------------------------------------------------ files (lock held)

    def _path(self, key: str, index: int) -> Path:
        digest = hashlib.sha256(f"{key}\0{index}".encode()).hexdigest()
        return self.directory / digest[:2] / digest

    def _load(self, key: str, index: int, lo: int, hi: int) -> bytes | None:
        """Bytes ``[lo, hi)`` of a cached chunk (one pread), or None."""
        size = self._chunks.get((key, index))
        if size is None:
            return None
        hi = min(hi, size)
        try:
            fd = os.open(self._path(key, index), os.O_RDONLY)
            try:
                data = os.pread(fd, hi - lo, lo)
            finally:
                os.close(fd)
        except OSError:
            self._forget(key, index)
            return None
        if len(data) != hi - lo:
            self._forget(key, index)
            return None
        self._chunks.move_to_end((key, index))
        return data

    def _store(self, key: str, index: int, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        self._forget(key, index)
        path = self._path(key, index)
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            return  # a full cache disk costs a refetch, not a failed read
        self._chunks[(key, index)] = len(data)
        self._size += len(data)
        while self._size > self.max_bytes and self._chunks:
            (old_key, old_index), _ = next(iter(self._chunks.items()))
            self._forget(old_key, old_index)
            self.evictions += 1

    def _forget(self, key: str, index: int) -> None:
        size = self._chunks.pop((key, index), None)
        if size is None:
            return
        self._size -= size
        with contextlib.suppress(OSError):
            self._path(key, index).unlink()

    # ------------------------------------------------------------------ invalidation

    def invalidate(self, key: str) -> None:
        """Drop every cached chunk of ``key``."""
        with self._lock:
            for k, i in [c for c in self._chunks if c[0] == key]:
                self._forget(k, i)

    def clear(self) -> None:
        with self._lock:
            for k, i in list(self._chunks):
                self._forget(k, i)


def _runs(indexes: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in indexes:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs
