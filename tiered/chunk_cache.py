"""A bounded local disk cache of fixed-size chunks of remote objects (remote reads).

Chunk ``i`` of an object is bytes ``[i * chunk_bytes, (i + 1) * chunk_bytes)`` (the last
one shorter). ``read`` serves what is cached from disk and fetches the chunks it lacks with
ONE ranged GET per contiguous run of missing chunks: the embedded S3 serves a ranged GET at
the cost of a whole one, so few large requests matter. Each fetched chunk goes to its own
file, named by a hash of (object key, chunk index), written to a temporary file and renamed
(it is a cache: no fsync). An in-memory index (LRU order, sizes) says what is cached; after
each fetch the least recently used chunks are evicted until the cache holds at most
``max_bytes`` (while fetches are being written it may briefly hold those chunks more). A read
larger than the cache still returns all its bytes and caches the chunks at its end that fit.

Threads: one lock guards the index; file reads and writes, and requests, happen outside it.
A chunk being fetched has an in-flight future: a second reader missing it waits for the
first instead of fetching it again. A cached chunk is opened under the lock and read after,
so an eviction meanwhile does not pull the file from under the reader.

Read-ahead: with ``readahead`` N > 0, a read that ends in chunk i starts fetching chunks
i+1..i+N of the same object in the background (N threads, one GET per chunk, in parallel)
unless they are cached or in flight: a consumer reading a segment from its start finds the
next chunks fetched, or being fetched, while it handles the one it has, instead of waiting
for each GET in turn. ``prefetch`` starts the same for chunks a caller names (the remote
reader: the next segment's first chunks, when a read nears the end of one). A read-ahead
chunk is an in-flight fetch like any other: a reader needing it waits for it (and gets its
error if it fails; the next reader fetches it again). Only a cache that holds at least
N + 1 chunks reads ahead. A fetched chunk is handed to the readers waiting for it before it
is written to its file.

Admission: with ``admit_fetches`` N > 1, a chunk is written to disk the Nth time it is
fetched, not before: a consumer reading history once (a backfill) passes every chunk once,
and writing them all to a cache it never reads again was the largest cost of a cold read
(copying 16 MiB into the page cache per chunk: 18-41 % of the broker's CPU). The keys of
chunks fetched but not yet admitted are remembered (``GHOSTS_PER_CHUNK`` x the chunks the
cache holds, at least ``MIN_GHOSTS``), so a chunk read again soon is admitted.

Memory: the chunks fetched last are also kept in memory, up to ``memory_bytes``
(least recently used dropped first; they stay on disk). A consumer reading a segment from
its start reads each chunk many times (a fetch takes a megabyte of a 16 MiB chunk), right
after its read-ahead fetched it: those reads take slices of the chunk in memory instead of
reading its file, and ``read_resident`` answers them without blocking (no file, no
request: the broker serves them on its event loop, never handing them to a thread).

Remote segments are immutable (a re-upload is a new attempt with a new key), so a cached
chunk is never stale; a reader that finds a corrupted batch calls ``invalidate`` and reads
again. Files left in the directory by an earlier process are removed at construction.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tiered.errors import ObjectStoreError
from tiered.object_store import ObjectStore

CHUNK_BYTES_KEY = "remote.fetch.chunk.bytes"
DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024
CACHE_BYTES_KEY = "remote.fetch.cache.bytes"
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
MEMORY_BYTES_KEY = "remote.fetch.memory.bytes"
DEFAULT_MEMORY_BYTES = 64 * 1024 * 1024
ADMIT_KEY = "remote.fetch.cache.admit.fetches"
GHOSTS_PER_CHUNK = 4
MIN_GHOSTS = 64
READAHEAD_KEY = "remote.fetch.readahead.chunks"
DEFAULT_READAHEAD = 1
MAX_READAHEAD = 16
"""The most chunks read ahead (and threads fetching them) a cache allows."""

_Chunk = tuple[str, int]
"""(object key, chunk index)."""


class ChunkCache:
    """Thread-safe; one per broker, under ``DATA_DIR/.remote-cache``."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int = DEFAULT_CACHE_BYTES,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        readahead: int = 0,
        *,
        memory_bytes: int = 0,
        admit_fetches: int = 1,
    ) -> None:
        if chunk_bytes <= 0:
            raise ValueError(f"{CHUNK_BYTES_KEY} must be positive, got {chunk_bytes}")
        if max_bytes < 0:
            raise ValueError(f"{CACHE_BYTES_KEY} must not be negative, got {max_bytes}")
        if not 0 <= readahead <= MAX_READAHEAD:
            raise ValueError(f"{READAHEAD_KEY} must be in [0, {MAX_READAHEAD}], got {readahead}")
        if memory_bytes < 0:
            raise ValueError(f"{MEMORY_BYTES_KEY} must not be negative, got {memory_bytes}")
        self.memory_bytes = memory_bytes
        if admit_fetches < 1:
            raise ValueError(f"{ADMIT_KEY} must be at least 1, got {admit_fetches}")
        self.admit_fetches = admit_fetches
        self._ghosts: OrderedDict[_Chunk, int] = OrderedDict()
        """Chunks fetched and not written to disk -> times fetched, oldest first."""
        self._max_ghosts = max(MIN_GHOSTS, GHOSTS_PER_CHUNK * (max_bytes // chunk_bytes))
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.chunk_bytes = chunk_bytes
        self.readahead = readahead if max_bytes >= (readahead + 1) * chunk_bytes else 0
        self._ahead: ThreadPoolExecutor | None = None
        """The read-ahead threads (``readahead`` of them), made on first use."""
        _empty_directory(self.directory)
        self._lock = threading.Lock()
        self._chunks: OrderedDict[_Chunk, int] = OrderedDict()
        """Cached chunk -> its size in bytes, least recently used first."""
        self._size = 0
        self._memory: OrderedDict[_Chunk, bytes] = OrderedDict()
        """Chunks also held in memory, least recently used first."""
        self._memory_size = 0
        self._inflight: dict[_Chunk, Future[bytes]] = {}
        self.hits = 0
        """Chunks served without a request of their own (from memory or disk, or fetched
        by a concurrent reader)."""
        self.memory_hits = 0
        """Of those, chunks served from memory."""
        self.misses = 0
        """Chunks this cache had to fetch."""
        self.fetched_bytes = 0
        self.requests = 0
        """Ranged GETs sent."""
        self.evictions = 0
        """Chunks evicted to stay under ``max_bytes``."""
        self.read_ahead = 0
        """Chunks fetched ahead of a read."""
        self.on_fetched: Callable[[str, int, bytes], None] | None = None
        """Called with (object key, chunk index, bytes) for every chunk fetched, in the
        fetching thread, before the chunk is handed to any reader (the remote reader checks
        the CRCs of the batches in it there, off the broker's event loop). It must not
        raise."""

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": self.hits,
                "memory_hits": self.memory_hits,
                "memory_bytes": self._memory_size,
                "misses": self.misses,
                "fetched_bytes": self.fetched_bytes,
                "requests": self.requests,
                "evictions": self.evictions,
                "read_ahead": self.read_ahead,
                "cached_bytes": self._size,
                "cached_chunks": len(self._chunks),
            }

    # ------------------------------------------------------------------ reads

    def read(  # noqa: PLR0912 - cache hits, misses and read-ahead of one read
        self, store: ObjectStore, key: str, object_size: int, start: int, end: int
    ) -> bytes | memoryview:
        """Bytes ``[start, end)`` of the object (``end`` clamped to ``object_size``); a view
        of a chunk fetched for it, or the bytes read from cached chunks.

        Raises the store's errors (``ObjectStoreUnavailable`` is retriable), and
        ``ObjectStoreError`` if the object is shorter than ``object_size``.
        """
        if start < 0:
            raise ValueError(f"read {key}: negative start {start}")
        end = min(end, object_size)
        if start >= end:
            return b""
        first, last = start // self.chunk_bytes, (end - 1) // self.chunk_bytes
        cached: dict[int, tuple[int, int]] = {}  # chunk -> (open fd, chunk size)
        waits: dict[int, Future[bytes]] = {}
        mine: dict[int, Future[bytes]] = {}
        pieces: dict[int, bytes | memoryview] = {}
        with self._lock:
            for i in range(first, last + 1):
                expected = min(self.chunk_bytes, object_size - i * self.chunk_bytes)
                held = self._resident(key, i, expected)
                if held is not None:
                    pieces[i] = self._piece(i, held, start, end)
                    continue
                opened = self._open(key, i, expected)
                if opened is not None:
                    self.hits += 1
                    cached[i] = opened
                elif (future := self._inflight.get((key, i))) is not None:
                    self.hits += 1
                    waits[i] = future
                else:
                    self.misses += 1
                    mine[i] = self._inflight[(key, i)] = Future()
        try:
            # our own fetches first: other readers may be waiting for them
            for run in _runs(sorted(mine)):
                fetched = self._fetch(store, key, object_size, run, mine)
                pieces.update((i, self._piece(i, data, start, end)) for i, data in fetched.items())
            for i in sorted(cached):
                fd, size = cached.pop(i)
                pieces[i] = self._read_cached(store, key, i, fd, size, start, end)
            for i, future in waits.items():
                pieces[i] = self._piece(i, future.result(), start, end)
        except BaseException as exc:
            self._fail(key, mine, exc)
            raise
        finally:
            for fd, _ in cached.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.readahead:  # the chunks after the last one read, but cached or in flight ones
            self.prefetch(store, key, object_size, (last + 1) * self.chunk_bytes, self.readahead)
        if first == last:
            return pieces[first]
        return b"".join(pieces[i] for i in range(first, last + 1))

    def read_resident(
        self, store: ObjectStore, key: str, object_size: int, start: int, end: int
    ) -> bytes | memoryview | None:
        """``read``, if every chunk it needs is in memory; else None. Never blocks: no file
        is read and no request made (read-ahead is started, in the background)."""
        if start < 0:
            raise ValueError(f"read {key}: negative start {start}")
        end = min(end, object_size)
        if start >= end:
            return b""
        first, last = start // self.chunk_bytes, (end - 1) // self.chunk_bytes
        pieces: list[bytes | memoryview] = []
        with self._lock:
            for i in range(first, last + 1):
                expected = min(self.chunk_bytes, object_size - i * self.chunk_bytes)
                held = self._resident(key, i, expected)
                if held is None:
                    return None
                pieces.append(self._piece(i, held, start, end))
        if self.readahead:
            self.prefetch(store, key, object_size, (last + 1) * self.chunk_bytes, self.readahead)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _resident(self, key: str, index: int, expected: int) -> bytes | None:
        """A chunk held in memory (now the most recently used), or None. Lock held."""
        chunk = (key, index)
        data = self._memory.get(chunk)
        if data is None or len(data) != expected:
            return None
        self._memory.move_to_end(chunk)
        if chunk in self._chunks:
            self._chunks.move_to_end(chunk)
        self.hits += 1
        self.memory_hits += 1
        return data

    def _remember(self, chunk: _Chunk, data: bytes) -> None:
        """Hold a fetched chunk in memory, dropping the least recently used ones beyond
        ``memory_bytes``. Lock held."""
        if len(data) > self.memory_bytes:
            return
        old = self._memory.pop(chunk, None)
        if old is not None:
            self._memory_size -= len(old)
        self._memory[chunk] = data
        self._memory_size += len(data)
        while self._memory_size > self.memory_bytes:
            _, dropped = self._memory.popitem(last=False)
            self._memory_size -= len(dropped)

    def prefetch(
        self, store: ObjectStore, key: str, object_size: int, start: int, count: int
    ) -> None:
        """Start fetching in the background the first ``count`` chunks (at most
        ``readahead``) of the object from the one holding byte ``start``, but those cached or
        in flight. Nothing when the cache does not read ahead."""
        chunks = (object_size + self.chunk_bytes - 1) // self.chunk_bytes
        first = start // self.chunk_bytes
        started: dict[int, Future[bytes]] = {}
        with self._lock:
            if not self.readahead:
                return  # closed meanwhile, or no room to read ahead
            if self._ahead is None:
                self._ahead = ThreadPoolExecutor(self.readahead, "remote-readahead")
            for i in range(first, min(chunks, first + min(count, self.readahead))):
                chunk = (key, i)
                if (
                    chunk not in self._chunks
                    and chunk not in self._inflight
                    and (chunk not in self._memory)
                ):
                    started[i] = self._inflight[chunk] = Future()
                    self.read_ahead += 1
            ahead = self._ahead
        for i, future in started.items():
            try:
                ahead.submit(self._fetch_ahead, store, key, object_size, i, future)
            except RuntimeError as exc:  # closed
                self._fail(key, {i: future}, exc)

    def _fetch_ahead(
        self, store: ObjectStore, key: str, object_size: int, index: int, future: Future[bytes]
    ) -> None:
        try:
            self._fetch(store, key, object_size, [index], {index: future})
        except BaseException as exc:
            self._fail(key, {index: future}, exc)

    def close(self) -> None:
        """Stop reading ahead. Fetches already started finish in the background (their
        in-flight futures must resolve: a reader may be waiting for them)."""
        with self._lock:
            ahead, self._ahead, self.readahead = self._ahead, None, 0
        if ahead is not None:
            ahead.shutdown(wait=False)

    def _piece(self, index: int, data: bytes, start: int, end: int) -> bytes | memoryview:
        """The part of chunk ``index`` (``data``) inside ``[start, end)``: a view, not a
        copy (a fetch's 1 MiB of a 16 MiB chunk)."""
        base = index * self.chunk_bytes
        lo, hi = max(start - base, 0), min(end - base, len(data))
        return data if (lo, hi) == (0, len(data)) else memoryview(data)[lo:hi]

    def _read_cached(  # noqa: PLR0917 - a read's coordinates
        self, store: ObjectStore, key: str, index: int, fd: int, size: int, start: int, end: int
    ) -> bytes:
        """The part of a cached chunk inside ``[start, end)``, one pread (closes ``fd``). A
        chunk file that cannot be read whole is dropped and the part fetched directly."""
        base = index * self.chunk_bytes
        lo, hi = max(start - base, 0), min(end - base, size)
        try:
            data = os.pread(fd, hi - lo, lo)
        except OSError:
            data = b""
        finally:
            os.close(fd)
        if len(data) == hi - lo:
            return data
        with self._lock:
            self._forget((key, index))
        data = store.get_range(key, base + lo, base + hi)
        with self._lock:
            self.requests += 1
            self.fetched_bytes += len(data)
        if len(data) != hi - lo:
            raise ObjectStoreError(
                f"{key}: bytes [{base + lo}, {base + hi}) asked, {len(data)} returned",
                op="get_range",
                key=key,
            )
        return data

    def _fetch(
        self,
        store: ObjectStore,
        key: str,
        object_size: int,
        run: list[int],
        futures: dict[int, Future[bytes]],
    ) -> dict[int, bytes]:
        """One ranged GET for the contiguous chunks ``run``; caches what fits and resolves
        their in-flight futures."""
        lo = run[0] * self.chunk_bytes
        hi = min(object_size, (run[-1] + 1) * self.chunk_bytes)
        data = store.get_range(key, lo, hi)
        with self._lock:
            self.requests += 1
            self.fetched_bytes += len(data)
        if len(data) != hi - lo:
            raise ObjectStoreError(
                f"{key}: bytes [{lo}, {hi}) asked, {len(data)} returned: the object is shorter"
                f" than the {object_size} bytes its reader expects",
                op="get_range",
                key=key,
            )
        if len(run) == 1:
            chunks = {run[0]: data}
        else:
            chunks = {
                i: data[at : at + self.chunk_bytes] for i, at in _offsets(run, self.chunk_bytes)
            }
        hook = self.on_fetched
        if hook is not None:  # before anyone reads them: what it notes is of these bytes
            for i in run:
                hook(key, i, chunks[i])
        # waiters first; the chunks stay in flight (found by new readers) until written
        for i in run:
            futures[i].set_result(chunks[i])
        if self.memory_bytes:
            with self._lock:
                for i in run:
                    self._remember((key, i), chunks[i])
        admitted = self._admitted(key, self._fitting(run, chunks))
        written = [i for i in admitted if self._write((key, i), chunks[i])]
        with self._lock:
            for i in written:
                self._add((key, i), len(chunks[i]))
            self._evict()
            for i in run:
                if self._inflight.get((key, i)) is futures[i]:
                    del self._inflight[(key, i)]
        return chunks

    def _admitted(self, key: str, indexes: list[int]) -> list[int]:
        """The chunks of ``indexes`` (just fetched) to write to disk: each the
        ``admit_fetches``-th time it is fetched; the others are counted."""
        if self.admit_fetches == 1:
            return indexes
        admitted: list[int] = []
        with self._lock:
            for i in indexes:
                seen = self._ghosts.pop((key, i), 0) + 1
                if seen >= self.admit_fetches:
                    admitted.append(i)
                    continue
                self._ghosts[(key, i)] = seen
                if len(self._ghosts) > self._max_ghosts:
                    self._ghosts.popitem(last=False)
        return admitted

    def _fitting(self, run: list[int], chunks: dict[int, bytes]) -> list[int]:
        """The chunks of ``run`` worth writing: the last ones whose total fits the cache
        (the earlier ones would be evicted by them at once)."""
        keep: list[int] = []
        total = 0
        for i in reversed(run):
            total += len(chunks[i])
            if total > self.max_bytes:
                break
            keep.append(i)
        return keep

    def _fail(self, key: str, mine: dict[int, Future[bytes]], exc: BaseException) -> None:
        """Our fetches that did not happen: waiters get ``exc``, the next reader retries."""
        with self._lock:
            for i, future in mine.items():
                if self._inflight.get((key, i)) is future:
                    del self._inflight[(key, i)]
        for future in mine.values():
            if not future.done():
                future.set_exception(exc)

    # ------------------------------------------------------------------ files

    def _path(self, chunk: _Chunk) -> Path:
        key, index = chunk
        digest = hashlib.sha256(f"{key}\0{index}".encode()).hexdigest()
        return self.directory / digest[:2] / digest

    def _open(self, key: str, index: int, expected: int) -> tuple[int, int] | None:
        """(open fd, size) of a cached chunk, now most recently used; None if not cached
        (or cached with another size than ``expected``: read with another object size).
        Lock held."""
        chunk = (key, index)
        size = self._chunks.get(chunk)
        if size is None:
            return None
        if size != expected:
            self._forget(chunk)
            return None
        try:
            fd = os.open(self._path(chunk), os.O_RDONLY)
        except OSError:
            self._forget(chunk)
            return None
        self._chunks.move_to_end(chunk)
        return fd, size

    def _write(self, chunk: _Chunk, data: bytes) -> bool:
        """Write a chunk's file (temporary file + rename). False if the disk refused: a full
        cache disk costs a refetch later, not a failed read. Lock not held: the chunk's
        in-flight future makes this thread its only writer."""
        path = self._path(chunk)
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            return False
        return True

    def _add(self, chunk: _Chunk, size: int) -> None:
        """Index a written chunk as the most recently used. Lock held."""
        old = self._chunks.pop(chunk, None)
        if old is not None:
            self._size -= old
        self._chunks[chunk] = size
        self._size += size

    def _evict(self) -> None:
        """Drop least recently used chunks until under ``max_bytes``. Lock held."""
        while self._size > self.max_bytes and self._chunks:
            self._forget(next(iter(self._chunks)))
            self.evictions += 1

    def _forget(self, chunk: _Chunk) -> None:
        """Drop a chunk from memory, the index and the disk. Lock held."""
        held = self._memory.pop(chunk, None)
        if held is not None:
            self._memory_size -= len(held)
        size = self._chunks.pop(chunk, None)
        if size is None:
            return
        self._size -= size
        with contextlib.suppress(OSError):
            self._path(chunk).unlink()

    # ------------------------------------------------------------------ invalidation

    def invalidate(self, key: str, start: int | None = None, end: int | None = None) -> int:
        """Drop the cached chunks of ``key`` that overlap bytes ``[start, end)`` (all of
        them by default); how many were dropped. A fetch in flight is not affected."""
        lo = 0 if start is None else max(start, 0) // self.chunk_bytes
        if end is not None and end <= (start or 0):
            return 0
        hi = None if end is None else (end - 1) // self.chunk_bytes
        with self._lock:
            doomed = [
                c
                for c in {*self._chunks, *self._memory}
                if c[0] == key and lo <= c[1] and (hi is None or c[1] <= hi)
            ]
            for chunk in doomed:
                self._forget(chunk)
        return len(doomed)

    def clear(self) -> None:
        """Drop every cached chunk."""
        with self._lock:
            for chunk in {*self._chunks, *self._memory}:
                self._forget(chunk)


def _empty_directory(directory: Path) -> None:
    """Create ``directory``, or remove whatever an earlier process left in it."""
    directory.mkdir(parents=True, exist_ok=True)
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()


def _runs(indexes: list[int]) -> list[list[int]]:
    """Sorted chunk indexes as runs of consecutive ones."""
    runs: list[list[int]] = []
    for i in indexes:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _offsets(run: list[int], chunk_bytes: int) -> list[tuple[int, int]]:
    """(chunk index, its offset in the run's data)."""
    return [(i, (i - run[0]) * chunk_bytes) for i in run]
