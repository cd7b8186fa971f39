"""Uploading and deleting a segment's objects, against the embedded S3 server."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from tests.support.tiering import TEST_ADMIN
from tiered.embedded_s3 import EmbeddedS3
from tiered.errors import ObjectStoreUnavailable
from tiered.layout import parse_key, partition_prefix, segment_keys, topic_prefix
from tiered.object_store import S3ObjectStore
from tiered.remote_segment import RemoteSegment
from tiered.segment_upload import SegmentFiles, delete_prefix, delete_segment, upload_segment

from .conftest import settings_for

MiB = 1024 * 1024
TOPIC_ID = "0b6cf6d4-5b8e-4a34-9d6b-5f1a3e0c2d11"


def make_segment(
    log: Path, index: bytes, base: int = 0, topic: str = "orders-eu.v2"
) -> RemoteSegment:
    return RemoteSegment(
        topic=topic,
        topic_id=TOPIC_ID,
        partition=3,
        segment_id=os.urandom(16).hex(),
        base_offset=base,
        end_offset=base + 99,
        max_timestamp=-1,
        size_bytes=log.stat().st_size,
        index_bytes=len(index),
        leader_epoch=2,
        epochs=((2, base),),
        broker_id=1,
        created_ms=1,
    )


def write_log(path: Path, size: int) -> Path:
    path.write_bytes(os.urandom(size))
    return path


def test_upload_puts_each_object_byte_exact(store: S3ObjectStore, tmp_path: Path) -> None:
    log = write_log(tmp_path / "seg.log", 100_000)
    index = os.urandom(640)
    files = SegmentFiles(log, index, b"2 0\n", os.urandom(300))
    seg = make_segment(log, index)
    upload_segment(store, "c", seg, files)
    keys = segment_keys("c", seg)
    assert store.get(keys.log) == log.read_bytes()
    assert store.get(keys.index) == index
    assert store.get(keys.epochs) == b"2 0\n"
    assert store.get(keys.snapshot) == files.snapshot
    listed = [info.key for info in store.list("c/")]
    assert sorted(listed) == sorted(keys.all())
    assert all(parse_key(key) is not None for key in listed)


def test_a_large_log_goes_multipart_and_comes_back_whole(s3: EmbeddedS3, tmp_path: Path) -> None:
    store = S3ObjectStore(
        settings_for(
            s3.endpoint,
            "multipart",
            multipart_threshold_bytes=6 * MiB,
            multipart_part_bytes=5 * MiB,
        )
    )
    store.ensure_bucket()
    log = write_log(tmp_path / "big.log", 12 * MiB + 17)
    seg = make_segment(log, b"")
    upload_segment(store, "c", seg, SegmentFiles(log, b"", b"", None))
    info = store.head(segment_keys("c", seg).log)
    assert info.size == 12 * MiB + 17
    assert info.etag.endswith("-3"), "uploaded in three parts"
    assert store.get(segment_keys("c", seg).log) == log.read_bytes()


def test_no_snapshot_no_snapshot_object_and_reupload_overwrites(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    log = write_log(tmp_path / "seg.log", 5000)
    seg = make_segment(log, b"i1")
    upload_segment(store, "c", seg, SegmentFiles(log, b"i1", b"e1", None))
    keys = segment_keys("c", seg)
    assert not store.exists(keys.snapshot)
    assert len(list(store.list("c/"))) == 3
    # the same attempt again (a retry), with other contents: the objects are replaced
    write_log(log, 5000)
    upload_segment(store, "c", seg, SegmentFiles(log, b"i2", b"e2", b"s2"))
    assert store.get(keys.log) == log.read_bytes()
    assert (store.get(keys.index), store.get(keys.epochs)) == (b"i2", b"e2")
    assert store.get(keys.snapshot) == b"s2"
    assert len(list(store.list("c/"))) == 4


def test_inconsistent_records_are_refused_before_any_request(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    log = write_log(tmp_path / "seg.log", 5000)
    seg = make_segment(log, b"index")
    files = SegmentFiles(log, b"index", b"", None)
    with pytest.raises(ValueError, match="the record says 4999"):
        upload_segment(store, "c", dataclasses.replace(seg, size_bytes=4999), files)
    with pytest.raises(ValueError, match="index bytes"):
        upload_segment(store, "c", dataclasses.replace(seg, index_bytes=4), files)
    with pytest.raises(ValueError, match="would not parse back"):
        upload_segment(store, "c", dataclasses.replace(seg, topic_id="t1"), files)
    with pytest.raises(ValueError, match="cannot stat"):
        upload_segment(store, "c", seg, dataclasses.replace(files, log=tmp_path / "gone"))
    assert not list(store.list(""))


def test_delete_segment_leaves_nothing_and_may_repeat(store: S3ObjectStore, tmp_path: Path) -> None:
    log = write_log(tmp_path / "seg.log", 5000)
    kept = make_segment(log, b"", base=0)
    doomed = make_segment(log, b"", base=100)
    upload_segment(store, "c", kept, SegmentFiles(log, b"", b"", b"s"))
    upload_segment(store, "c", doomed, SegmentFiles(log, b"", b"", None))  # no snapshot object
    delete_segment(store, "c", doomed)
    delete_segment(store, "c", doomed)
    assert sorted(info.key for info in store.list("c/")) == sorted(segment_keys("c", kept).all())


def test_delete_prefix_pages_through_everything_under_it(s3: EmbeddedS3, tmp_path: Path) -> None:
    # small listing pages and delete batches: deletes happen between pages
    store = S3ObjectStore(
        settings_for(s3.endpoint, "prefixes", list_page_size=4, delete_batch_size=2)
    )
    store.ensure_bucket()
    log = write_log(tmp_path / "seg.log", 10)
    doomed = topic_prefix("c", "orders", TOPIC_ID)
    for base in range(0, 700, 100):
        upload_segment(
            store, "c", make_segment(log, b"", base, "orders"), SegmentFiles(log, b"", b"", b"s")
        )
    other_topic = make_segment(log, b"", 0, "orders-eu")  # its name starts like the doomed one
    upload_segment(store, "c", other_topic, SegmentFiles(log, b"", b"", None))
    store.put("c2/orders-" + TOPIC_ID + "/3/x", b"another cluster")
    assert delete_prefix(store, doomed, batch=3) == 28
    assert not list(store.list(doomed))
    assert len(list(store.list(topic_prefix("c", "orders-eu", TOPIC_ID)))) == 3
    assert store.exists("c2/orders-" + TOPIC_ID + "/3/x")
    assert delete_prefix(store, doomed) == 0
    assert delete_prefix(store, partition_prefix("c", "orders-eu", TOPIC_ID, 3)) == 3
    assert [info.key for info in store.list("")] == ["c2/orders-" + TOPIC_ID + "/3/x"]


def test_delete_prefix_refuses_what_is_not_a_directory(store: S3ObjectStore) -> None:
    store.put("c/x", b"x")
    for prefix in ["", "/", "c", "c/x"]:
        with pytest.raises(ValueError, match="ending in '/'"):
            delete_prefix(store, prefix)
    assert store.exists("c/x")


def test_a_stopped_store_is_unavailable(tmp_path: Path) -> None:
    log = write_log(tmp_path / "seg.log", 5000)
    seg = make_segment(log, b"")
    files = SegmentFiles(log, b"", b"", None)
    with EmbeddedS3(tmp_path / "s3", admin=TEST_ADMIN) as server:
        store = S3ObjectStore(settings_for(server.endpoint, "stopping", max_attempts=1))
        store.ensure_bucket()
        upload_segment(store, "c", seg, files)
    with pytest.raises(ObjectStoreUnavailable):
        upload_segment(store, "c", seg, files)
    with pytest.raises(ObjectStoreUnavailable):
        delete_segment(store, "c", seg)
    with pytest.raises(ObjectStoreUnavailable):
        delete_prefix(store, "c/")
