"""Error mapping: botocore failures become ObjectNotFound / ObjectStoreUnavailable / Error."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from tests.support.tiering import TEST_ADMIN
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3, free_port
from tiered.errors import (
    ObjectNotFound,
    ObjectStoreError,
    ObjectStoreUnavailable,
    map_error,
)
from tiered.object_store import S3ObjectStore

from .conftest import settings_for


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "GetObject",
    )


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (client_error("NoSuchKey", 404), ObjectNotFound),
        (client_error("404", 404), ObjectNotFound),
        (client_error("NoSuchBucket", 404), ObjectNotFound),
        (client_error("SlowDown", 503), ObjectStoreUnavailable),
        (client_error("InternalError", 500), ObjectStoreUnavailable),
        (client_error("Whatever", 502), ObjectStoreUnavailable),
        (client_error("AccessDenied", 403), ObjectStoreError),
        (client_error("InvalidRange", 416), ObjectStoreError),
        (EndpointConnectionError(endpoint_url="http://x"), ObjectStoreUnavailable),
        (ReadTimeoutError(endpoint_url="http://x"), ObjectStoreUnavailable),
        (RuntimeError("boom"), ObjectStoreError),
    ],
)
def test_map_error(exc: Exception, kind: type[ObjectStoreError]) -> None:
    mapped = map_error(exc, op="get", key="k")
    assert type(mapped) is kind
    assert mapped.retriable == (kind is ObjectStoreUnavailable)
    assert (mapped.op, mapped.key) == ("get", "k")


def test_unknown_key_and_bucket(store: S3ObjectStore) -> None:
    with pytest.raises(ObjectNotFound):
        store.get("no/such/key")
    with pytest.raises(ObjectNotFound):
        store.head("no/such/key")
    other = S3ObjectStore(settings_for(store.settings.endpoint or "", "no-such-bucket"))
    with pytest.raises(ObjectNotFound):
        other.get("k")


def test_stopped_server_is_unavailable(tmp_path: Path) -> None:
    server = EmbeddedS3(tmp_path / "data", admin=TEST_ADMIN).start()
    try:
        store = S3ObjectStore(settings_for(server.endpoint, "bkt"))
        store.ensure_bucket()
        store.put("k", b"v")
    finally:
        server.kill()
    for call in (lambda: store.get("k"), lambda: store.put("k2", b"v"), lambda: list(store.list())):
        with pytest.raises(ObjectStoreUnavailable) as info:
            call()
        assert info.value.retriable
        assert "Could not connect" in str(info.value)
    with pytest.raises(ObjectStoreUnavailable) as info:  # the ranged-GET path
        store.get_range("k", 0, 1)
    assert info.value.retriable
    assert "Connection refused" in str(info.value)
    assert f"({store.settings.max_attempts} attempts)" in str(info.value)


def test_ranged_get_errors_are_s3s(tmp_path: Path) -> None:
    """A ranged GET answered with an error is mapped as boto3's are: a wrong secret is
    SignatureDoesNotMatch (not retriable), an unknown key id InvalidAccessKeyId."""
    server = EmbeddedS3(tmp_path / "data", admin=TEST_ADMIN).start()
    try:
        store = S3ObjectStore(settings_for(server.endpoint, "bkt"))
        store.ensure_bucket()
        store.put("k", b"v" * 100)
        assert store.get_range("k", 10, 20) == b"v" * 10
        wrong = S3ObjectStore(
            ObjectStoreSettings(
                endpoint=server.endpoint,
                bucket="bkt",
                access_key_id=TEST_ADMIN.access_key_id,
                secret_access_key="not-the-secret",
            )
        )
        with pytest.raises(ObjectStoreError, match="SignatureDoesNotMatch") as info:
            wrong.get_range("k", 0, 10)
        assert not info.value.retriable
        unknown = S3ObjectStore(
            ObjectStoreSettings(
                endpoint=server.endpoint,
                bucket="bkt",
                access_key_id="nobody",
                secret_access_key="x",
            )
        )
        with pytest.raises(ObjectStoreError, match="InvalidAccessKeyId"):
            unknown.get_range("k", 0, 10)
    finally:
        server.stop()


SILENT_FOR_S = 20.0


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server that accepts and never answers (a hung store), and closes each
    connection SILENT_FOR_S after accepting it: a client without a read timeout of its own
    (botocore's default is 60 s) sees the close, not a timeout."""
    port = free_port()
    sock = socket.create_server(("127.0.0.1", port))
    stop = threading.Event()
    accepted: list[tuple[float, socket.socket]] = []

    def run() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append((time.monotonic(), sock.accept()[0]))
            for at, conn in accepted:
                if time.monotonic() - at > SILENT_FOR_S:
                    conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join()
        for _, conn in accepted:
            conn.close()
        sock.close()


def test_read_timeout_is_unavailable(silent_server: int) -> None:
    store = S3ObjectStore(
        settings_for(f"http://127.0.0.1:{silent_server}", "b", read_timeout_ms=300, max_attempts=1)
    )
    with pytest.raises(ObjectStoreUnavailable) as info:
        store.get("k")
    assert "Read timeout" in str(info.value)  # the store's bound, not the server's close
    with pytest.raises(ObjectStoreUnavailable) as info:  # the ranged-GET path
        store.get_range("k", 0, 10)
    assert "timed out" in str(info.value)  # the socket's read timeout, not the close
