"""The executor's queue of ranged GETs (``spark.chunk_queue``) against the embedded S3
server: objects come back whole and in order at every prefetch depth, across objects; a
reader that leaves an object early loses nothing of the next ones; a missing object fails
only its own read; an object shorter than planned ends where it ends."""

from __future__ import annotations

import itertools
import os

import pytest

from spark.chunk_queue import ChunkQueue
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.errors import ObjectNotFound
from tiered.object_store import S3ObjectStore

_buckets = itertools.count()


@pytest.fixture
def store(s3: EmbeddedS3) -> S3ObjectStore:
    settings = ObjectStoreSettings(
        endpoint=s3.endpoint,
        bucket=f"queue-{next(_buckets)}",
        access_key_id="test",
        secret_access_key="test",
        max_attempts=1,
    )
    bucket = S3ObjectStore(settings)
    bucket.ensure_bucket()
    return bucket


def put(store: S3ObjectStore, key: str, size: int) -> bytes:
    data = os.urandom(size)
    store.put(key, data)
    return data


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_objects_come_back_whole_and_in_order(store: S3ObjectStore, depth: int) -> None:
    objects = {f"o{i}": put(store, f"o{i}", size) for i, size in enumerate([10_000, 1, 4096, 9000])}
    queue = ChunkQueue(store, chunk_bytes=4096, depth=depth)
    numbers = [queue.add(key, 3 if key == "o0" else 0, len(data)) for key, data in objects.items()]
    try:
        for number, data in zip(numbers, objects.values(), strict=True):
            chunks = list(queue.chunks(number))
            assert all(len(c) <= 4096 for c in chunks)
            assert b"".join(chunks) == (data[3:] if number == 0 else data)
    finally:
        queue.close()


@pytest.mark.parametrize("depth", [0, 2])
def test_an_object_left_early_costs_the_next_ones_nothing(store: S3ObjectStore, depth: int) -> None:
    first = put(store, "first", 5 * 4096)
    second = put(store, "second", 3 * 4096 + 7)
    queue = ChunkQueue(store, chunk_bytes=4096, depth=depth)
    a, b = queue.add("first", 0, len(first)), queue.add("second", 0, len(second))
    reading = queue.chunks(a)
    assert next(reading) == first[:4096]
    reading.close()
    assert b"".join(queue.chunks(b)) == second
    assert list(queue.chunks(a)) == [], "an object left is not read again"


def test_a_missing_object_fails_its_own_read_only(store: S3ObjectStore) -> None:
    present = put(store, "present", 6000)
    queue = ChunkQueue(store, chunk_bytes=4096, depth=2)
    a = queue.add("present", 0, len(present))
    b = queue.add("absent", 0, 6000)  # its GETs are queued while "present" is read
    assert b"".join(queue.chunks(a)) == present
    with pytest.raises(ObjectNotFound):
        list(queue.chunks(b))
    queue.close()


def test_an_object_shorter_than_planned_ends_where_it_ends(store: S3ObjectStore) -> None:
    data = put(store, "short", 5000)
    after = put(store, "after", 100)
    queue = ChunkQueue(store, chunk_bytes=4096, depth=3)
    a = queue.add("short", 0, 3 * 4096)  # the plan thought it larger
    b = queue.add("after", 0, len(after))
    assert b"".join(queue.chunks(a)) == data
    assert b"".join(queue.chunks(b)) == after
    queue.close()
