"""ObjectStore conformance of S3ObjectStore against the embedded moto server over HTTP."""

from __future__ import annotations

import os
import pickle
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tiered.config import MiB, ObjectStoreSettings
from tiered.errors import ObjectNotFound, ObjectStoreError
from tiered.object_store import ObjectStore, S3ObjectStore


def test_is_an_object_store(store: S3ObjectStore) -> None:
    assert isinstance(store, ObjectStore)


def test_put_get_head_exists(store: S3ObjectStore) -> None:
    info = store.put("c/t-1/0/00000000000000000000.log", b"hello")
    assert info.size == 5
    assert store.get("c/t-1/0/00000000000000000000.log") == b"hello"
    head = store.head("c/t-1/0/00000000000000000000.log")
    assert (head.size, head.etag) == (5, info.etag)
    assert head.last_modified is not None
    assert store.exists("c/t-1/0/00000000000000000000.log")
    assert not store.exists("c/t-1/0/missing")
    store.put("c/t-1/0/00000000000000000000.log", b"replaced")
    assert store.get("c/t-1/0/00000000000000000000.log") == b"replaced"
    store.put("empty", b"")
    assert store.get("empty") == b""


def test_keys_that_are_prefixes_of_each_other(store: S3ObjectStore) -> None:
    store.put("a", b"1")
    store.put("a/b", b"2")
    store.put("a b+c%d/é", b"3")
    assert [o.key for o in store.list("a")] == ["a", "a b+c%d/é", "a/b"]
    assert store.get("a b+c%d/é") == b"3"


def test_get_range(store: S3ObjectStore) -> None:
    data = bytes(range(256)) * 40
    store.put("r", data)
    assert store.get_range("r", 0, 1) == data[:1]
    assert store.get_range("r", 100, 5000) == data[100:5000]
    assert store.get_range("r", 10_000, 20_000) == data[10_000:]  # past the end: shorter
    with pytest.raises(ValueError):
        store.get_range("r", 5, 5)
    with pytest.raises(ObjectNotFound):
        store.get_range("nope", 0, 10)


def test_list_paginates_past_1000_keys(store: S3ObjectStore) -> None:
    keys = [f"p/{i:05d}" for i in range(1_050)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: store.put(k, k.encode()), keys))
    store.put("q/other", b"x")
    listed = list(store.list("p/"))
    assert [o.key for o in listed] == keys
    assert all(o.size == 7 for o in listed)
    small_pages = S3ObjectStore(
        ObjectStoreSettings(**{**store.settings.__dict__, "list_page_size": 100})
    )
    assert [o.key for o in small_pages.list("p/000")] == keys[:100]
    assert len(list(store.list(""))) == 1_051

    store.delete_many(iter([*keys, "p/never-existed"]))  # 2 batches, absent key is fine
    assert list(store.list("p/")) == []
    assert store.exists("q/other")


def test_multipart_20_mib_from_bytes_and_file(store: S3ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(20 * MiB + 12_345)
    info = store.put("big-bytes", data)
    assert info.etag.endswith("-3")  # 16 MiB threshold, 8 MiB parts
    assert store.get("big-bytes") == data
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    info = store.put("big-file", path)
    assert info.size == len(data)
    assert store.head("big-file").etag.endswith("-3")
    assert (
        store.get_range("big-file", 8 * MiB - 10, 8 * MiB + 10) == data[8 * MiB - 10 : 8 * MiB + 10]
    )
    assert store.get("big-file") == data


def test_small_file_put(store: S3ObjectStore, tmp_path: Path) -> None:
    path = tmp_path / "index"
    path.write_bytes(b"i" * 1000)
    assert store.put("idx", path).size == 1000
    assert store.get("idx") == b"i" * 1000
    with pytest.raises(ObjectStoreError):
        store.put("nope", tmp_path / "missing")


def test_ensure_bucket_is_idempotent(store: S3ObjectStore) -> None:
    store.ensure_bucket()
    store.ensure_bucket()


def test_pickled_store_works(store: S3ObjectStore) -> None:
    store.put("k", b"before pickling")  # the original has a client now
    copy = pickle.loads(pickle.dumps(store))
    assert copy.settings == store.settings
    assert copy._client is None
    assert copy.get("k") == b"before pickling"
    copy.put("k2", b"from the copy")
    assert store.get("k2") == b"from the copy"


def test_get_range_into_a_buffer(store: S3ObjectStore) -> None:
    data = os.urandom(3 * MiB + 17)
    store.put("into", data)
    out = memoryview(bytearray(4 * MiB))
    assert store.get_range_into("into", 5, 2 * MiB, out) == 2 * MiB - 5
    assert out[: 2 * MiB - 5] == data[5 : 2 * MiB]
    assert store.get_range_into("into", 3 * MiB, 4 * MiB, out) == 17  # the object ends first
    assert out[:17] == data[3 * MiB :]
    with pytest.raises(ValueError, match="short buffer"):
        store.get_range_into("into", 0, 5 * MiB, out)
    with pytest.raises(ObjectNotFound):
        store.get_range_into("nope", 0, 10, out)


def test_ranged_gets_go_through_boto3_behind_a_proxy(
    store: S3ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a proxy for the endpoint in the environment, boto3 (which honours it) makes
    the GETs. The proxy here is unreachable, so a GET through it fails: proof it was used."""
    store.put("proxied", b"0123456789")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # discard: nothing listens
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    proxied = S3ObjectStore(store.settings)
    with pytest.raises(ObjectStoreError, match="proxy"):
        proxied.get_range("proxied", 2, 5)
    assert proxied._gets is None  # which path was chosen
