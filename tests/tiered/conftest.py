"""Fixtures: a bucket of the embedded S3 server (``s3``, tests/conftest.py) per test."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.support.tiering import TEST_ADMIN
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.object_store import S3ObjectStore

_bucket_numbers = itertools.count()


def settings_for(endpoint: str, bucket: str, **overrides: object) -> ObjectStoreSettings:
    values: dict[str, object] = {
        "endpoint": endpoint,
        "bucket": bucket,
        "access_key_id": "test",
        "secret_access_key": "test",
        "connect_timeout_ms": 500,
        "read_timeout_ms": 10_000,
        "max_attempts": 2,
        **overrides,
    }
    return ObjectStoreSettings(**values)  # type: ignore[arg-type]


@pytest.fixture
def store(s3: EmbeddedS3) -> S3ObjectStore:
    """A new bucket of the module's embedded S3 server (``s3``, tests/conftest.py)."""
    bucket = S3ObjectStore(settings_for(s3.endpoint, f"bucket-{next(_bucket_numbers)}"))
    bucket.ensure_bucket()
    return bucket


def new_server(data_dir: Path) -> EmbeddedS3:
    return EmbeddedS3(data_dir, admin=TEST_ADMIN)
