"""Fixtures: the embedded S3 server (moto + disk mirror) as a real process on loopback."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedS3]:
    server = EmbeddedS3(tmp_path_factory.mktemp("s3") / "data").start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def store(s3_server: EmbeddedS3) -> S3ObjectStore:
    s3 = S3ObjectStore(settings_for(s3_server.endpoint, f"bucket-{next(_bucket_numbers)}"))
    s3.ensure_bucket()
    return s3


def new_server(data_dir: Path) -> EmbeddedS3:
    return EmbeddedS3(data_dir)
