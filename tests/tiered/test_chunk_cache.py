"""The chunk cache of remote reads against the embedded S3 server; the key layout; remote
segment records."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest

from tiered.chunk_cache import ChunkCache
from tiered.errors import ObjectStoreUnavailable
from tiered.layout import parse_key, segment_keys, topic_prefix
from tiered.object_store import S3ObjectStore
from tiered.remote_segment import COPY_FINISHED, RemoteSegment
from tiered.segment_upload import SegmentFiles, delete_prefix, delete_segment, upload_segment

from .conftest import settings_for

CHUNK = 1000


def cached_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def segment(topic: str = "orders-eu.v2", base: int = 1200) -> RemoteSegment:
    return RemoteSegment(
        topic=topic,
        topic_id="0b6cf6d4-5b8e-4a34-9d6b-5f1a3e0c2d11",
        partition=3,
        segment_id="a" * 32,
        base_offset=base,
        end_offset=base + 99,
        max_timestamp=1_700_000_000_000,
        size_bytes=5000,
        index_bytes=64,
        leader_epoch=2,
        epochs=((1, base), (2, base + 50)),
        broker_id=1,
        created_ms=1,
    )


def test_reads_equal_the_object_slice(store: S3ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(10 * CHUNK + 123)
    store.put("obj", data)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    rng = random.Random(7)
    for _ in range(200):
        start = rng.randrange(len(data))
        end = rng.randrange(start, len(data) + 50)
        assert cache.read(store, "obj", len(data), start, end) == data[start:end]
    assert cache.stats()["requests"] <= 11, "each chunk fetched once"


def test_one_get_per_run_of_missing_chunks(store: S3ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(8 * CHUNK)
    store.put("runs", data)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    cache.read(store, "runs", len(data), 2 * CHUNK, 3 * CHUNK)  # chunk 2
    cache.read(store, "runs", len(data), 5 * CHUNK, 6 * CHUNK)  # chunk 5
    before = cache.stats()["requests"]
    assert cache.read(store, "runs", len(data), 0, len(data)) == data
    # missing: 0-1, 3-4, 6-7: three ranged GETs
    assert cache.stats()["requests"] - before == 3


def test_eviction_bounds_the_disk_and_invalidate_refetches(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    data = os.urandom(20 * CHUNK)
    store.put("big", data)
    directory = tmp_path / "cache"
    cache = ChunkCache(directory, 5 * CHUNK, CHUNK)
    assert cache.read(store, "big", len(data), 0, len(data)) == data
    assert cached_bytes(directory) <= 5 * CHUNK
    assert cache.stats()["evictions"] > 0
    cache.read(store, "big", len(data), 19 * CHUNK, 20 * CHUNK)
    hits = cache.stats()["hits"]
    cache.read(store, "big", len(data), 19 * CHUNK, 20 * CHUNK)
    assert cache.stats()["hits"] == hits + 1
    cache.invalidate("big")
    requests = cache.stats()["requests"]
    cache.read(store, "big", len(data), 19 * CHUNK, 20 * CHUNK)
    assert cache.stats()["requests"] == requests + 1


def test_concurrent_misses_fetch_a_chunk_once(store: S3ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(CHUNK)
    store.put("shared", data)
    cache = ChunkCache(tmp_path / "cache", 100 * CHUNK, CHUNK)
    results: list[bytes] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(cache.read(store, "shared", CHUNK, 0, CHUNK))
        )
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [data] * 8
    assert cache.stats()["requests"] == 1


def test_leftovers_removed_and_a_stopped_store_is_unavailable(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    (directory / "ab").mkdir(parents=True)
    (directory / "ab" / "stale").write_bytes(b"x")
    cache = ChunkCache(directory, 10 * CHUNK, CHUNK)
    assert cached_bytes(directory) == 0
    closed = S3ObjectStore(settings_for("http://127.0.0.1:9", "none", max_attempts=1))
    with pytest.raises(ObjectStoreUnavailable):
        cache.read(closed, "k", 100, 0, 10)


def test_layout_and_records_round_trip() -> None:
    seg = segment()
    assert RemoteSegment.from_dict({**seg.to_dict(), "future": 1}) == seg
    assert seg.with_state(COPY_FINISHED).state == COPY_FINISHED
    keys = segment_keys("cluster-1", seg)
    for key in keys.all():
        parsed = parse_key(key)
        assert parsed is not None
        assert (parsed.topic, parsed.topic_id, parsed.partition) == (
            "orders-eu.v2",
            seg.topic_id,
            3,
        )
        assert (parsed.base_offset, parsed.segment_id) == (1200, "a" * 32)
    assert keys.log.startswith(topic_prefix("cluster-1", seg.topic, seg.topic_id))
    assert parse_key("cluster-1/some/other/key") is None


def test_upload_and_delete(store: S3ObjectStore, tmp_path: Path) -> None:
    log = tmp_path / "seg.log"
    log.write_bytes(os.urandom(5000))
    seg = segment()
    upload_segment(store, "c", seg, SegmentFiles(log, b"index", b"0\n1\n2 1200\n", b"snap"))
    keys = segment_keys("c", seg)
    assert store.get(keys.log) == log.read_bytes()
    assert store.get(keys.index) == b"index"
    assert store.get(keys.snapshot) == b"snap"
    delete_segment(store, "c", seg)
    assert not list(store.list("c/"))
    upload_segment(store, "c", seg, SegmentFiles(log, b"i", b"e", None))
    assert delete_prefix(store, topic_prefix("c", seg.topic, seg.topic_id)) == 3
    assert not list(store.list("c/"))
