"""The chunk cache of remote reads, against the embedded S3 server."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.tiering import TEST_ADMIN
from tiered.chunk_cache import ChunkCache
from tiered.embedded_s3 import EmbeddedS3
from tiered.errors import ObjectStoreError, ObjectStoreUnavailable
from tiered.object_store import S3ObjectStore

from .conftest import settings_for

CHUNK = 1000


def cached_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def cached_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()]


def put(store: S3ObjectStore, key: str, size: int) -> bytes:
    data = os.urandom(size)
    store.put(key, data)
    return data


def run_threads(count: int, target: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_reads_equal_the_object_slice(store: S3ObjectStore, tmp_path: Path) -> None:
    # one object and one small cache for every example: reads meet cached, missing and
    # evicted chunks in every mix
    data = put(store, "slices", 10 * CHUNK + 123)
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, 4 * CHUNK + 500, CHUNK)

    @settings(max_examples=200, deadline=None)
    @given(start=st.integers(0, len(data) + 10), end=st.integers(0, len(data) + 2 * CHUNK))
    def check(start: int, end: int) -> None:
        assert cache.read(store, "slices", len(data), start, end) == data[start:end]
        assert cached_bytes(directory) <= cache.max_bytes

    check()
    stats = cache.stats()
    assert stats["hits"] > 0
    assert stats["evictions"] > 0


def test_each_chunk_is_fetched_once_while_it_stays(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "once", 10 * CHUNK + 123)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    for start, end in [(0, 1), (999, 1001), (5500, 7777), (0, 10**9), (10_100, 10_123)]:
        assert cache.read(store, "once", len(data), start, end) == data[start:end]
    stats = cache.stats()
    assert stats["fetched_bytes"] == len(data)
    assert stats["misses"] == 11
    assert stats["cached_bytes"] == len(data) == cached_bytes(tmp_path / "cache")
    assert cache.read(store, "once", len(data), 50, 50) == b""
    assert cache.read(store, "once", len(data), 20_000, 30_000) == b""
    with pytest.raises(ValueError, match="negative"):
        cache.read(store, "once", len(data), -1, 10)


def test_one_get_per_run_of_missing_chunks(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "runs", 8 * CHUNK)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    assert cache.read(store, "runs", len(data), 2 * CHUNK, 3 * CHUNK) == data[2 * CHUNK : 3 * CHUNK]
    assert cache.read(store, "runs", len(data), 5 * CHUNK + 1, 5 * CHUNK + 2) == data[5001:5002]
    assert cache.stats()["requests"] == 2
    assert cache.read(store, "runs", len(data), 0, len(data)) == data
    # missing: 0-1, 3-4, 6-7: three ranged GETs, for six chunks
    stats = cache.stats()
    assert (stats["requests"], stats["misses"], stats["hits"]) == (5, 8, 2)
    assert stats["fetched_bytes"] == len(data)


def test_eviction_keeps_the_directory_under_max_bytes(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "big", 20 * CHUNK)
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, 5 * CHUNK + 10, CHUNK)
    for i in range(20):
        assert (
            cache.read(store, "big", len(data), i * CHUNK, i * CHUNK + 10) == data[i * CHUNK :][:10]
        )
        assert cached_bytes(directory) <= cache.max_bytes
    assert cache.stats()["evictions"] == 15
    assert len(cached_files(directory)) == 5
    # least recently used goes first: touch chunk 15, then fetch chunk 0 again
    cache.read(store, "big", len(data), 15 * CHUNK, 15 * CHUNK + 1)
    cache.read(store, "big", len(data), 0, 1)
    hits = cache.stats()["hits"]
    cache.read(store, "big", len(data), 15 * CHUNK, 15 * CHUNK + 1)
    assert cache.stats()["hits"] == hits + 1
    requests = cache.stats()["requests"]
    cache.read(store, "big", len(data), 16 * CHUNK, 16 * CHUNK + 1)
    assert cache.stats()["requests"] == requests + 1, "chunk 16 was evicted for chunk 0"


def test_a_read_larger_than_the_cache_still_works(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "huge", 20 * CHUNK + 1)
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, 3 * CHUNK, CHUNK)
    assert cache.read(store, "huge", len(data), 0, len(data)) == data
    assert cache.stats()["requests"] == 1
    assert cached_bytes(directory) <= 3 * CHUNK
    # what fits is the end of the read: chunk 19 and the one-byte chunk 20 are cached
    requests = cache.stats()["requests"]
    assert cache.read(store, "huge", len(data), 19 * CHUNK, len(data)) == data[19 * CHUNK :]
    assert cache.stats()["requests"] == requests
    # a cache of zero bytes caches nothing, and still reads
    nothing = ChunkCache(tmp_path / "none", 0, CHUNK)
    assert nothing.read(store, "huge", len(data), 10, 5000) == data[10:5000]
    assert nothing.read(store, "huge", len(data), 10, 5000) == data[10:5000]
    assert nothing.stats()["requests"] == 2
    assert cached_files(tmp_path / "none") == []


def test_invalidate_forces_a_refetch(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "inv", 6 * CHUNK)
    other = put(store, "other", 2 * CHUNK)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    cache.read(store, "inv", len(data), 0, len(data))
    cache.read(store, "other", len(other), 0, len(other))
    assert cache.invalidate("inv", 1500, 2001) == 2  # chunks 1 and 2
    requests = cache.stats()["requests"]
    assert cache.read(store, "inv", len(data), 0, len(data)) == data
    assert cache.stats()["requests"] == requests + 1
    assert cache.stats()["fetched_bytes"] == len(data) + len(other) + 2 * CHUNK
    assert cache.invalidate("inv", 4000) == 2
    assert cache.invalidate("inv", 3000, 3000) == 0
    assert cache.invalidate("inv") == 4
    assert cache.stats()["cached_chunks"] == 2, "the other object stays"
    cache.clear()
    assert cache.stats()["cached_bytes"] == 0
    assert cached_files(tmp_path / "cache") == []
    assert cache.read(store, "other", len(other), 0, len(other)) == other


def test_a_damaged_chunk_file_is_refetched(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "damaged", 3 * CHUNK)
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, 100 * CHUNK, CHUNK)
    cache.read(store, "damaged", len(data), 0, len(data))
    for path in cached_files(directory):
        path.write_bytes(b"short")
    # read directly, the damaged files dropped; the next read caches the chunks again
    assert cache.read(store, "damaged", len(data), 0, len(data)) == data
    assert cached_files(directory) == []
    assert cache.read(store, "damaged", len(data), 0, len(data)) == data
    assert len(cached_files(directory)) == 3
    for path in cached_files(directory):
        path.unlink()
    requests = cache.stats()["requests"]
    assert cache.read(store, "damaged", len(data), 0, len(data)) == data
    assert cache.stats()["requests"] == requests + 1


def test_concurrent_readers_of_a_chunk_fetch_it_once(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "shared", CHUNK)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    barrier = threading.Barrier(8)
    results: list[bytes] = []

    def reader() -> None:
        barrier.wait()
        results.append(cache.read(store, "shared", CHUNK, 0, CHUNK))

    run_threads(8, reader)
    assert results == [data] * 8
    stats = cache.stats()
    assert (stats["requests"], stats["misses"], stats["hits"]) == (1, 1, 7)


def test_concurrent_overlapping_reads_fetch_every_chunk_once(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    data = put(store, "overlap", 40 * CHUNK)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    barrier = threading.Barrier(8)
    counter = iter(range(8))
    lock = threading.Lock()

    def reader() -> None:
        with lock:
            n = next(counter)
        barrier.wait()
        for start in range(n * 1700 % len(data), len(data), 2500):  # different strides
            assert (
                cache.read(store, "overlap", len(data), start, start + 3100)
                == (data[start : start + 3100])
            )

    run_threads(8, reader)
    stats = cache.stats()
    assert stats["misses"] == 40
    assert stats["fetched_bytes"] == len(data)


def test_leftovers_of_an_earlier_process_are_removed(store: S3ObjectStore, tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    data = put(store, "left", 3 * CHUNK)
    ChunkCache(directory, 100 * CHUNK, CHUNK).read(store, "left", len(data), 0, len(data))
    (directory / "ab").mkdir(exist_ok=True)
    (directory / "ab" / "stale.tmp").write_bytes(b"x")
    (directory / "stray").write_bytes(b"y")
    assert len(cached_files(directory)) == 5
    cache = ChunkCache(directory, 100 * CHUNK, CHUNK)
    assert list(directory.iterdir()) == []
    assert cache.read(store, "left", len(data), 0, len(data)) == data
    assert cache.stats()["requests"] == 1


def test_a_short_object_is_an_error_not_a_cached_chunk(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    data = put(store, "short", 1500)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    with pytest.raises(ObjectStoreError, match="shorter"):
        cache.read(store, "short", 2000, 0, 2000)
    assert cache.stats()["cached_chunks"] == 0
    assert cache.read(store, "short", 1500, 0, 1500) == data


def test_a_stopped_store_is_unavailable(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, 100 * CHUNK, CHUNK)
    with EmbeddedS3(tmp_path / "s3", admin=TEST_ADMIN) as server:
        store = S3ObjectStore(settings_for(server.endpoint, "stopping", max_attempts=1))
        store.ensure_bucket()
        data = put(store, "obj", 4 * CHUNK)
        assert cache.read(store, "obj", len(data), 0, 2 * CHUNK) == data[: 2 * CHUNK]
    # cached chunks are still served; missing ones fail as retriable
    assert cache.read(store, "obj", len(data), 100, 1900) == data[100:1900]
    with pytest.raises(ObjectStoreUnavailable):
        cache.read(store, "obj", len(data), 0, len(data))
    # the failed fetch left nothing in flight: the next reader fails the same way
    with pytest.raises(ObjectStoreUnavailable):
        cache.read(store, "obj", len(data), 3 * CHUNK, 4 * CHUNK)
    closed = S3ObjectStore(settings_for("http://127.0.0.1:9", "none", max_attempts=1))
    with pytest.raises(ObjectStoreUnavailable):
        cache.read(closed, "k", 100, 0, 10)


def wait_idle(cache: ChunkCache) -> None:
    """Until no fetch is in flight (read-ahead runs in the background)."""
    deadline = time.monotonic() + 30
    while cache._inflight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not cache._inflight


def test_read_ahead_fetches_each_chunk_once_before_it_is_read(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    data = put(store, "ahead", 10 * CHUNK + 123)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK, readahead=2)
    for start in range(0, len(data), 400):  # a consumer reading on, 400 bytes at a time
        got = cache.read(store, "ahead", len(data), start, start + 400)
        assert got == data[start : start + 400]
    wait_idle(cache)
    stats = cache.stats()
    # only the first chunk was missing when read; the others were fetched ahead, once each,
    # and never past the object's end
    assert stats["misses"] == 1
    assert stats["read_ahead"] == 10
    assert (stats["requests"], stats["fetched_bytes"]) == (11, len(data))


def test_no_read_ahead_without_room_for_it(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "roomless", 10 * CHUNK)
    cache = ChunkCache(tmp_path / "cache", 2 * CHUNK, CHUNK, readahead=2)
    assert cache.readahead == 0
    assert cache.read(store, "roomless", len(data), 0, CHUNK) == data[:CHUNK]
    assert cache.stats()["read_ahead"] == 0


def test_a_closed_cache_stops_reading_ahead(store: S3ObjectStore, tmp_path: Path) -> None:
    data = put(store, "closing", 10 * CHUNK)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK, readahead=1)
    assert cache.read(store, "closing", len(data), 0, CHUNK) == data[:CHUNK]
    cache.close()
    wait_idle(cache)
    assert cache.read(store, "closing", len(data), CHUNK, 3 * CHUNK) == data[CHUNK : 3 * CHUNK]
    assert cache.stats()["read_ahead"] == 1


def test_a_failed_read_ahead_fails_its_waiter_once(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK, readahead=1)
    with EmbeddedS3(tmp_path / "s3", admin=TEST_ADMIN) as server:
        store = S3ObjectStore(settings_for(server.endpoint, "ahead-down", max_attempts=1))
        store.ensure_bucket()
        data = put(store, "obj", 4 * CHUNK)
        assert cache.read(store, "obj", len(data), 0, CHUNK) == data[:CHUNK]
        wait_idle(cache)  # chunk 1 fetched ahead while the store was up
    assert cache.read(store, "obj", len(data), CHUNK, 2 * CHUNK) == data[CHUNK : 2 * CHUNK]
    # that read started a read-ahead of chunk 2 against the stopped store: a reader of
    # chunk 2 gets the store's error (waiting for it, or fetching it again), never a hang
    with pytest.raises(ObjectStoreUnavailable):
        cache.read(store, "obj", len(data), 2 * CHUNK, 3 * CHUNK)
    wait_idle(cache)
    assert cache.stats()["cached_chunks"] == 2


def test_memory_holds_the_chunks_fetched_last(store: S3ObjectStore, tmp_path: Path) -> None:
    """The chunks fetched last are also in memory (``memory_bytes``): ``read_resident``
    serves them, and only them, without a request or a file read; every read equals the
    object's bytes; memory never holds more than its bound."""
    data = put(store, "memory", 10 * CHUNK + 123)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK, memory_bytes=3 * CHUNK)
    assert cache.read_resident(store, "memory", len(data), 0, 10) is None  # nothing yet
    assert cache.read(store, "memory", len(data), 0, 5 * CHUNK) == data[: 5 * CHUNK]
    requests = cache.stats()["requests"]
    # chunks 2, 3 and 4 are in memory; 0 and 1 were dropped from it (still on disk)
    assert (
        cache.read_resident(store, "memory", len(data), 2 * CHUNK + 5, 5 * CHUNK)
        == (data[2 * CHUNK + 5 : 5 * CHUNK])
    )
    assert cache.read_resident(store, "memory", len(data), CHUNK - 1, CHUNK + 1) is None
    assert cache.read(store, "memory", len(data), 0, CHUNK) == data[:CHUNK]  # from disk
    assert cache.stats()["requests"] == requests
    assert cache.stats()["memory_bytes"] <= 3 * CHUNK
    assert cache.stats()["memory_hits"] >= 3
    cache.invalidate("memory")
    assert cache.read_resident(store, "memory", len(data), 2 * CHUNK, 3 * CHUNK) is None
    assert cache.stats()["memory_bytes"] == 0


def test_a_chunk_is_written_to_disk_the_second_time_it_is_fetched(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    """With ``admit_fetches=2`` a read of history once writes no file; a chunk fetched
    again is cached on disk, and read from there after."""
    data = put(store, "admit", 6 * CHUNK)
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, 100 * CHUNK, CHUNK, memory_bytes=CHUNK, admit_fetches=2)
    for i in range(6):  # one pass: every chunk fetched once
        assert (
            cache.read(store, "admit", len(data), i * CHUNK, (i + 1) * CHUNK)
            == (data[i * CHUNK : (i + 1) * CHUNK])
        )
    assert cached_files(directory) == []
    assert cache.stats()["requests"] == 6
    assert cache.read(store, "admit", len(data), 0, 2 * CHUNK) == data[: 2 * CHUNK]
    assert cache.stats()["requests"] == 7  # one GET for both chunks, now written
    assert cached_bytes(directory) == 2 * CHUNK
    assert cache.read(store, "admit", len(data), 0, 2 * CHUNK) == data[: 2 * CHUNK]
    assert cache.stats()["requests"] == 7  # from disk


def test_memory_and_admission_refuse_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"remote\.fetch\.memory\.bytes"):
        ChunkCache(tmp_path / "a", 10 * CHUNK, CHUNK, memory_bytes=-1)
    with pytest.raises(ValueError, match=r"remote\.fetch\.cache\.admit\.fetches"):
        ChunkCache(tmp_path / "b", 10 * CHUNK, CHUNK, admit_fetches=0)
