"""The embedded S3 server keeps acknowledged writes across SIGKILL and restart."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.support.tiering import TEST_ADMIN
from tiered.config import MiB
from tiered.embedded_s3 import EmbeddedS3
from tiered.object_store import S3ObjectStore

from .conftest import settings_for


def test_objects_and_deletes_survive_kill_9(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = EmbeddedS3(data_dir, admin=TEST_ADMIN).start()
    try:
        store = S3ObjectStore(settings_for(server.endpoint, "cluster-a"))
        store.ensure_bucket()
        other = S3ObjectStore(settings_for(server.endpoint, "cluster-b"))
        other.ensure_bucket()
        objects = {f"c/topic-x/0/{i:020d}.log": os.urandom(1000 + i) for i in range(50)}
        objects["a"] = b"short key"
        objects["a/b"] = b"key under a key"
        for key, value in objects.items():
            store.put(key, value)
        big = os.urandom(20 * MiB + 7)
        objects["c/topic-x/0/big.log"] = big
        big_etag = store.put("c/topic-x/0/big.log", big).etag
        assert big_etag.endswith("-3")
        store.put("to-delete/1", b"x")
        store.put("to-delete/2", b"y")
        store.put("overwritten", b"old")
        store.put("overwritten", b"new")
        objects["overwritten"] = b"new"
        store.delete_many(["to-delete/1", "to-delete/2"])
        other.put("k", b"other bucket")
        etags = {key: store.head(key).etag for key in objects}
    finally:
        server.kill()  # SIGKILL right after the last acknowledged write

    server = EmbeddedS3(data_dir, port=server.port, admin=TEST_ADMIN).start()
    try:
        store = S3ObjectStore(settings_for(server.endpoint, "cluster-a"))
        listed = {o.key: o for o in store.list()}
        assert set(listed) == set(objects)
        for key, value in objects.items():
            got = store.get(key)
            assert hashlib.sha256(got).digest() == hashlib.sha256(value).digest(), key
            assert listed[key].etag == etags[key]
        assert store.get_range("c/topic-x/0/big.log", 9 * MiB, 10 * MiB) == big[9 * MiB : 10 * MiB]
        other = S3ObjectStore(settings_for(server.endpoint, "cluster-b"))
        assert other.get("k") == b"other bucket"

        # deletes after a restart survive the next one too
        store.delete_many(["a", "c/topic-x/0/big.log"])
        other.delete_many(["k"])
        other.client.delete_bucket(Bucket="cluster-b")
    finally:
        server.kill()

    server = EmbeddedS3(data_dir, port=server.port, admin=TEST_ADMIN).start()
    try:
        store = S3ObjectStore(settings_for(server.endpoint, "cluster-a"))
        assert {o.key for o in store.list()} == set(objects) - {"a", "c/topic-x/0/big.log"}
        assert store.get("a/b") == b"key under a key"
        names = {b["Name"] for b in store.client.list_buckets()["Buckets"]}
        assert names == {"cluster-a"}
    finally:
        server.stop()
    assert server.proc is not None
    assert server.proc.returncode == 0  # SIGTERM: a clean exit


def test_metadata_survives_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with EmbeddedS3(data_dir, admin=TEST_ADMIN) as server:
        store = S3ObjectStore(settings_for(server.endpoint, "meta"))
        store.ensure_bucket()
        store.client.put_object(
            Bucket="meta", Key="k", Body=b"v", ContentType="text/plain", Metadata={"base": "42"}
        )
        before = store.client.head_object(Bucket="meta", Key="k")
        port = server.port
    with EmbeddedS3(data_dir, port=port, admin=TEST_ADMIN) as server:
        after = S3ObjectStore(settings_for(server.endpoint, "meta")).client.head_object(
            Bucket="meta", Key="k"
        )
    assert after["ContentType"] == "text/plain"
    assert after["Metadata"] == {"base": "42"}
    assert after["ETag"] == before["ETag"]
    assert after["LastModified"] == before["LastModified"]


ETAG_RACE = """
import threading, time
from moto.s3.models import FakeKey
from tiered.embedded_s3 import install_hooks
install_hooks()
value = bytes(range(256)) * (24 * 1024)  # 6 MiB: held in a file, as segments are
key = FakeKey("k", value, account_id="123456789012", region_name="us-east-1")
stop = threading.Event()
reads, short = [0], [0]
def reader():
    while not stop.is_set():
        reads[0] += 1
        short[0] += key.value != value
def etag():
    while not stop.is_set():
        key._etag = None  # as a new key's: computed when first asked for
        key.etag
threads = [threading.Thread(target=reader), threading.Thread(target=etag)]
for t in threads:
    t.start()
time.sleep(1.0)
stop.set()
for t in threads:
    t.join()
print(reads[0], short[0])
"""


def test_a_key_read_while_its_etag_is_computed_is_read_whole() -> None:
    """moto computes a new key's etag by reading its buffer without the key's lock, while a
    GET's body is read from the same buffer under it: unhooked, a GET could get the object
    from its end (here 14 of 2,022 reads in a second were short). The server's hooks
    (``install_hooks``) compute it under the lock. In a child process: the hooks patch moto."""
    done = subprocess.run(
        [sys.executable, "-c", ETAG_RACE], capture_output=True, text=True, timeout=60, check=True
    )
    reads, short = map(int, done.stdout.split())
    assert reads > 0
    assert short == 0, f"{short} of {reads} reads of the key were not the whole object"
