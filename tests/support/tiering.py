"""Settings of a broker and a topic with tiered storage that tiers within seconds, shared by
the tests of the remote tier, the Spark data source and their benchmarks."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from tiered.access_keys import AccessKey

TEST_ADMIN = AccessKey("test", "test", name="tests", admin=True)
"""The admin key the tests give the embedded S3 servers they start (``EmbeddedS3(...,
admin=TEST_ADMIN)``): the server refuses unsigned requests and unknown keys."""


def s3_client(endpoint: str, key: AccessKey = TEST_ADMIN) -> Any:
    """A boto3 S3 client of ``endpoint`` signing (SigV4, presigned URLs too) with ``key``:
    path-style addressing, as the embedded server serves buckets, and no retries, so a test
    sees every error the server answers."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key.access_key_id,
        aws_secret_access_key=key.secret_access_key,
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
        ),
    )


TOPIC_CONFIG = {
    "remote.storage.enable": "true",
    "segment.bytes": "40000",
    "local.retention.bytes": "80000",
}
"""Small segments and a small local retention: a few thousand records fill several
segments, most of which leave the broker's disk once uploaded."""


def broker_settings(endpoint: str, bucket: str) -> dict[str, str]:
    """A broker of the embedded S3 server at ``endpoint`` (started with ``admin=TEST_ADMIN``),
    uploading every 200 ms and failing fast when the store is down."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "200",
        "remote.log.manager.task.retry.backoff.ms": "200",
        "remote.log.manager.task.retry.backoff.max.ms": "1000",
        "log.retention.check.interval.ms": "200",
        "remote.fetch.chunk.bytes": "65536",
        "remote.fetch.cache.bytes": "1048576",
        "remote.fetch.max.wait.ms": "5000",
        "tiered.s3.endpoint": endpoint,
        "tiered.s3.bucket": bucket,
        "tiered.s3.access.key.id": "test",
        "tiered.s3.secret.access.key": "test",
        "tiered.s3.connect.timeout.ms": "300",
        "tiered.s3.read.timeout.ms": "3000",
        "tiered.s3.max.attempts": "1",
    }


def data_source_options(endpoint: str, bucket: str, key: AccessKey = TEST_ADMIN) -> dict[str, str]:
    """``format("sluice")``'s options for the object store of such a broker."""
    return {
        "sluice.s3.endpoint": endpoint,
        "sluice.s3.bucket": bucket,
        "sluice.s3.access.key.id": key.access_key_id,
        "sluice.s3.secret.access.key": key.secret_access_key,
    }
