"""What the embedded S3 server counts of the reads clients make with a bucket's read-only
key (``tiered.read_meter``): real server over HTTP, boto3 as Spark's executors use it.

Exact bytes by bucket and topic: whole GETs and ranged GETs count their body; HEADs,
listings, errors, the brokers' read-write key and the admin key count nothing; the counts
are written while the server runs, survive a restart, and add up across it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.tiering import TEST_ADMIN, s3_client
from tiered.access_keys import AccessKey, generate
from tiered.embedded_s3 import EmbeddedS3
from tiered.read_meter import MINUTE_MS, READS_FILE, ReadCounts, load_counts

BUCKET = "reads-cluster"
OTHER = "reads-other"
TOPIC = "orders.v1-eu"
LOG_KEY = f"cid/{TOPIC}-{uuid.uuid4()}/0/{0:020d}-{uuid.uuid4().hex}.log"
LOG = bytes(range(256)) * 400  # 102,400 bytes


def client(server: EmbeddedS3, key: AccessKey) -> Any:
    return s3_client(server.endpoint, key)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedS3]:
    s3 = EmbeddedS3(tmp_path / "s3", admin=TEST_ADMIN).start()
    try:
        yield s3
    finally:
        s3.stop()


def totals(data_dir: Path) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for (bucket, _minute, topic), count in load_counts(data_dir).items():
        out[bucket, topic] = out.get((bucket, topic), 0) + count
    return out


def test_reads_with_a_read_only_key_are_counted_to_the_byte(server: EmbeddedS3) -> None:
    admin = client(server, TEST_ADMIN)
    for bucket in (BUCKET, OTHER):
        admin.create_bucket(Bucket=bucket)
    admin.put_object(Bucket=BUCKET, Key=LOG_KEY, Body=LOG)
    admin.put_object(Bucket=BUCKET, Key="notes/readme.txt", Body=b"x" * 1000)
    admin.put_object(Bucket=OTHER, Key=LOG_KEY, Body=LOG[:5000])
    readers = generate(f"{BUCKET} readers", buckets=[BUCKET], read_only=True)
    brokers = generate(f"{BUCKET} brokers", buckets=[BUCKET])
    other = generate(f"{OTHER} readers", buckets=[OTHER], read_only=True)
    for key in (readers, brokers, other):
        server.keys.put(key)
    spark, broker = client(server, readers), client(server, brokers)

    assert spark.get_object(Bucket=BUCKET, Key=LOG_KEY)["Body"].read() == LOG
    part = spark.get_object(Bucket=BUCKET, Key=LOG_KEY, Range="bytes=1000-4999")
    assert len(part["Body"].read()) == 4000
    assert len(spark.get_object(Bucket=BUCKET, Key="notes/readme.txt")["Body"].read()) == 1000
    assert len(client(server, other).get_object(Bucket=OTHER, Key=LOG_KEY)["Body"].read()) == 5000
    # none of these count
    spark.head_object(Bucket=BUCKET, Key=LOG_KEY)
    spark.list_objects_v2(Bucket=BUCKET)
    with pytest.raises(ClientError):
        spark.get_object(Bucket=BUCKET, Key="missing.log")
    with pytest.raises(ClientError):
        spark.get_object(Bucket=BUCKET, Key=LOG_KEY, Range="bytes=999999-")
    broker.get_object(Bucket=BUCKET, Key=LOG_KEY)["Body"].read()
    admin.get_object(Bucket=BUCKET, Key=LOG_KEY)["Body"].read()

    expected = {(BUCKET, TOPIC): len(LOG) + 4000, (BUCKET, ""): 1000, (OTHER, TOPIC): 5000}
    deadline = time.monotonic() + 30
    while totals(server.data_dir) != expected and time.monotonic() < deadline:
        time.sleep(0.2)  # written every second while the server runs
    assert totals(server.data_dir) == expected
    minute = int(time.time() * 1000) // MINUTE_MS * MINUTE_MS
    assert all(m % MINUTE_MS == 0 and m <= minute for _, m, _ in load_counts(server.data_dir))

    # a restart keeps the counts, and later reads add to them
    server.stop()
    server.start()
    spark = client(server, readers)
    spark.get_object(Bucket=BUCKET, Key=LOG_KEY, Range="bytes=0-99")["Body"].read()
    server.stop()  # SIGTERM writes what is left
    expected[BUCKET, TOPIC] += 100
    assert totals(server.data_dir) == expected


def test_old_minutes_are_dropped_and_nothing_is_written_when_nothing_changed(
    tmp_path: Path,
) -> None:
    now = [1_764_104_400.0]
    counts = ReadCounts(tmp_path, retention_ms=10 * MINUTE_MS, clock=lambda: now[0])
    counts.flush()
    assert not (tmp_path / READS_FILE).exists(), "nothing read: nothing written"
    counts.add("b", "t", 10)
    counts.add("b", "t", 5)
    counts.add("b", "t", 0)
    counts.flush()
    start = int(now[0] * 1000)
    assert load_counts(tmp_path) == {("b", start, "t"): 15}
    now[0] += 11 * 60
    counts.add("b", "u", 7)
    counts.flush()
    assert load_counts(tmp_path) == {("b", start + 11 * MINUTE_MS, "u"): 7}
    assert ReadCounts(tmp_path).snapshot() == load_counts(tmp_path), "loaded at start"
