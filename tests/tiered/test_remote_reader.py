"""The broker's reader of the remote tier (``dataplane.remote.reader``) over segments a real
partition log wrote and ``upload_segment`` put in the embedded S3 server."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from dataplane.remote.reader import RemoteReader
from tests.dataplane.test_log_partition import open_log, produce
from tests.tiered.test_chunk_cache import wait_idle
from tiered.chunk_cache import ChunkCache
from tiered.layout import segment_keys
from tiered.object_store import S3ObjectStore
from tiered.remote_segment import COPY_FINISHED, RemoteSegment
from tiered.segment_upload import SegmentFiles, upload_segment
from wire.errors import RemoteStorageError
from wire.record_batch import Record, decode_records, iter_headers

CLUSTER = "reader-test"
CHUNK = 32 * 1024


def uploaded(store: S3ObjectStore, tmp_path: Path) -> tuple[list[RemoteSegment], list[bytes]]:
    """Closed segments of ~100 KB (4 chunks each) of 300-byte records, uploaded; and each
    one's bytes as the local log holds them."""
    plog = open_log(tmp_path, segment_bytes=100_000, index_interval_bytes=4000)
    for i in range(1200):
        produce(plog, [(b"k%d" % i, bytes([i % 251]) * 300)], timestamp_ms=1_000 + i)
    segments, contents = [], []
    for local in plog.segments[:-1]:
        index = local.index_bytes()
        meta = RemoteSegment(
            topic="t",
            topic_id="00000000-0000-4000-8000-000000000001",
            partition=0,
            segment_id=uuid.uuid4().hex,
            base_offset=local.base_offset,
            end_offset=local.next_offset - 1,
            max_timestamp=local.max_timestamp,
            size_bytes=local.size,
            index_bytes=len(index),
            leader_epoch=0,
            epochs=(),
            broker_id=1,
            created_ms=0,
            state=COPY_FINISHED,
        )
        upload_segment(store, CLUSTER, meta, SegmentFiles(local.path, index, b"", None))
        segments.append(meta)
        contents.append(local.path.read_bytes())
    return segments, contents


def records_of(data: bytes) -> list[Record]:
    view = memoryview(data)
    return [
        r
        for h in iter_headers(data)
        for r in decode_records(view[h.position : h.position + h.size])
    ]


def test_a_consumer_reading_on_waits_for_no_fetch_after_its_first(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    """Reading every segment in turn, 64 KiB (2 chunks) at a time, with the next segment
    named: the read-ahead window (2 chunks) runs on into the next segment (its index and
    first chunks), so only the first segment's index and first chunks are fetched by a
    read; every byte is served as uploaded, and each chunk is fetched once."""
    segments, contents = uploaded(store, tmp_path / "log")
    assert len(segments) >= 4
    cache = ChunkCache(tmp_path / "cache", 1 << 20, CHUNK, readahead=2)
    reader = RemoteReader(store, cache, CLUSTER)
    offsets = []
    for n, segment in enumerate(segments):
        following = segments[n + 1] if n + 1 < len(segments) else None
        offset = segment.base_offset
        got = b""
        while offset <= segment.end_offset:
            data = reader.read(segment, offset, 2 * CHUNK, following)
            assert data
            records = records_of(data)
            offsets += [r.offset for r in records]
            offset = records[-1].offset + 1
            got += data
            wait_idle(cache)  # the consumer handles what it got; the read-ahead goes on
        assert got == contents[n]
    assert offsets == list(range(segments[-1].end_offset + 1))
    stats = cache.stats()
    chunks = sum(-(-s.size_bytes // CHUNK) + 1 for s in segments)  # + 1: the index
    assert stats["misses"] == 3  # the first segment's index and first window (2 chunks)
    assert stats["requests"] == chunks - 1  # the first window's 2 chunks: one GET
    assert stats["fetched_bytes"] == sum(s.size_bytes + s.index_bytes for s in segments)


def test_without_a_following_segment_no_read_ahead_crosses_over(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    segments, contents = uploaded(store, tmp_path / "log")
    cache = ChunkCache(tmp_path / "cache", 1 << 20, CHUNK, readahead=2)
    reader = RemoteReader(store, cache, CLUSTER)
    last = segments[0]
    data = reader.read(last, last.end_offset, 1)
    assert data == contents[0][len(contents[0]) - len(data) :]
    wait_idle(cache)
    # the index and the last chunk fetched by the read; nothing past the object's end
    assert cache.stats()["requests"] == 2


def test_offset_for_timestamp_finds_the_first_record_at_or_after_it(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    """Every record's timestamp (and one between two) finds that record, also when it is
    not in the first batch of the bytes a lookup reads (1 MiB from the time index's entry);
    a start offset past it finds the next one; a time past the segment finds nothing."""
    segments, _ = uploaded(store, tmp_path / "log")
    cache = ChunkCache(tmp_path / "cache", 1 << 20, CHUNK, readahead=0)
    reader = RemoteReader(store, cache, CLUSTER)
    for segment in segments:
        for offset in range(segment.base_offset, segment.end_offset + 1):
            stamp = 1_000 + offset
            assert reader.offset_for_timestamp(segment, stamp, 0) == (offset, stamp)
        first = segment.base_offset
        assert reader.offset_for_timestamp(segment, 0, first + 2) == (first + 2, 1_002 + first)
        assert reader.offset_for_timestamp(segment, segment.max_timestamp + 1, 0) is None


def test_reads_from_memory_are_the_reads_from_the_store(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    """A consumer reading every segment in turn where each read is tried from memory first
    (as the broker's event loop does) and read through the cache only when that gives up:
    every byte served as uploaded, all but the first read answered from memory (the next
    segment's index is read ahead, and parsed from memory), and a damaged batch is never
    served (the blocking read finds and reports it)."""
    segments, contents = uploaded(store, tmp_path / "log")
    cache = ChunkCache(tmp_path / "cache", 1 << 20, CHUNK, readahead=2, memory_bytes=8 * CHUNK)
    reader = RemoteReader(store, cache, CLUSTER)
    from_memory = blocking = 0
    for n, segment in enumerate(segments):
        following = segments[n + 1] if n + 1 < len(segments) else None
        offset, got = segment.base_offset, b""
        while offset <= segment.end_offset:
            data = reader.read_resident(segment, offset, 16 * 1024, following)
            if data is None:
                blocking += 1
                data = reader.read(segment, offset, 16 * 1024, following)
            else:
                from_memory += 1
            offset = records_of(bytes(data))[-1].offset + 1
            got += data
            wait_idle(cache)
        assert got == contents[n]
    assert blocking == 1  # the first: later indexes and chunks were read ahead into memory
    assert from_memory > 20
    # the CRCs of the chunks fetched were checked as they came, in the fetching thread
    assert any(reader._checked.values())
    # an object damaged in the store: the fetch's check does not pass the damaged batch,
    # so the read from memory checks it, finds it and gives up; the blocking read reads
    # the object twice and reports it
    segment = segments[0]
    log_key = segment_keys(CLUSTER, segment).log
    damaged = bytearray(contents[0])
    damaged[200] ^= 0xFF
    store.put(log_key, bytes(damaged))
    cache.clear()
    with pytest.raises(RemoteStorageError, match="CRC"):
        reader.read(segment, segment.base_offset, 1000)
    assert reader.read_resident(segment, segment.base_offset, 1000) is None
