"""Tiered storage against MinIO, a real S3-compatible server (not moto): the object store
layer's operations, and a broker that uploads segments, serves them from offset 0 once they
are gone locally, and deletes a topic's objects.

MinIO is built from the Go module proxy by ``make minio`` (tools/build-minio.sh) into
``.cache/minio/minio`` and run by ``tests.support.minio.MinioServer``. These tests are
marked ``minio`` and run with ``make test-minio``, not with ``make test``: the build fetches
~1 GB of Go modules and takes minutes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from tests.conftest import unique
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tests.support.minio import BINARY, ROOT, MinioServer
from tests.support.tiering import broker_settings
from tests.tiered import test_object_store as ost
from tests.tiered.conftest import settings_for
from tests.tiered.test_broker_tiering import (
    RECORDS,
    consume_all,
    create_topic,
    describe_remote,
    produce,
    wait_tiered,
)
from tiered.object_store import S3ObjectStore

pytestmark = pytest.mark.minio


@pytest.fixture(scope="module")
def minio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A MinIO server on a free loopback port; its endpoint URL."""
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is missing: run `make minio` (or `make test-minio`)")
    with MinioServer(tmp_path_factory.mktemp("minio") / "disk") as server:
        yield server.endpoint


def minio_store(endpoint: str, bucket: str) -> S3ObjectStore:
    return S3ObjectStore(
        settings_for(
            endpoint,
            bucket,
            access_key_id=ROOT.access_key_id,
            secret_access_key=ROOT.secret_access_key,
        )
    )


@pytest.fixture
def store(minio: str) -> S3ObjectStore:
    """A new bucket of the module's MinIO server (the object-store tests ask for ``store``)."""
    bucket = minio_store(minio, unique("bucket").lower().replace("_", "-"))
    bucket.ensure_bucket()
    return bucket


# the object store layer's own tests, against MinIO; not the one with keys that are prefixes of
# each other: MinIO keeps objects as files, so "a" and "a/b" cannot both exist (Sluice never
# needs that: every key it writes ends in a segment file's name)
test_put_get_head_exists = ost.test_put_get_head_exists
test_get_range = ost.test_get_range
test_list_paginates_past_1000_keys = ost.test_list_paginates_past_1000_keys
test_multipart_20_mib_from_bytes_and_file = ost.test_multipart_20_mib_from_bytes_and_file
test_ensure_bucket_is_idempotent = ost.test_ensure_bucket_is_idempotent
test_pickled_store_works = ost.test_pickled_store_works


@pytest.fixture(scope="module")
def broker(minio: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = broker_settings(minio, "tiering")
    settings["tiered.s3.access.key.id"] = ROOT.access_key_id
    settings["tiered.s3.secret.access.key"] = ROOT.secret_access_key
    proc = BrokerProcess(tmp_path_factory.mktemp("minio-broker"), settings)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def test_segments_go_to_minio_read_back_and_are_deleted_with_the_topic(
    broker: BrokerProcess, minio: str
) -> None:
    topic = unique("minio")
    create_topic(broker, topic)
    produce(broker, topic, RECORDS)
    segments = wait_tiered(broker, topic)
    topic_id = describe_remote(broker, topic)["topics"][topic]["topic_id"]
    bucket = minio_store(minio, "tiering")
    keys = [info.key for info in bucket.list("") if topic_id in info.key]
    for segment in segments:
        assert [k for k in keys if segment["segment_id"] in k and k.endswith(".log")]

    got = consume_all(broker, topic, RECORDS)
    assert got == [(i, b"%d" % i) for i in range(RECORDS)]  # (offset, key), once each

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    wait_for(
        lambda: not [i for i in bucket.list("") if topic_id in i.key],
        60,
        "the topic's objects deleted from MinIO",
    )
