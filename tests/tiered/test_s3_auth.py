"""The embedded S3 server enforces credentials (``tiered.s3_auth``): real server over HTTP, boto3.

Anonymous requests, unknown keys and wrong signatures get S3's 403s; a key scoped to one bucket
reads and writes only that bucket (read-only keys only read); keys added to or removed from the
key file take effect at once; secrets are never on the server's command line.
"""

from __future__ import annotations

import stat
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.support.tiering import TEST_ADMIN
from tiered.access_keys import KEYS_FILE, AccessKey, KeyFile, generate
from tiered.embedded_s3 import EmbeddedS3
from tiered.errors import ObjectStoreError, ObjectStoreUnavailable
from tiered.object_store import S3ObjectStore
from tiered.s3_auth import Keys, Refusal, check

from .conftest import settings_for

A, B = "auth-cluster-a", "auth-cluster-b"


def client(server: EmbeddedS3, key: AccessKey | None, **config: Any) -> Any:
    """A boto3 S3 client of ``server`` signing with ``key`` (None: anonymous)."""
    if key is None:
        config["signature_version"] = UNSIGNED
    return boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        region_name="us-east-1",
        aws_access_key_id=key.access_key_id if key else None,
        aws_secret_access_key=key.secret_access_key if key else None,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config),
    )


def status(request: urllib.request.Request) -> int:
    """The HTTP status of a plain request."""
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)


def refused(call: Callable[[], Any]) -> tuple[int, str]:
    """The HTTP status and S3 error code of a call that must fail."""
    with pytest.raises(ClientError) as info:
        call()
    response = info.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


@pytest.fixture(scope="module")
def buckets(s3: EmbeddedS3) -> Iterator[dict[str, AccessKey]]:
    """Buckets A and B with an object each, and keys: read-write for A and B, read-only
    for A (added to the running server's key file)."""
    admin = client(s3, TEST_ADMIN)
    for bucket in (A, B):
        admin.create_bucket(Bucket=bucket)
        admin.put_object(Bucket=bucket, Key="seg/0.log", Body=bucket.encode())
    keys = {
        "a": generate("a brokers", buckets=[A]),
        "b": generate("b brokers", buckets=[B]),
        "a-ro": generate("a readers", buckets=[A], read_only=True),
    }
    for key in keys.values():
        s3.keys.put(key)
    yield keys
    KeyFile(s3.data_dir / KEYS_FILE).remove(lambda k: k not in keys.values())


def test_anonymous_requests_are_refused(s3: EmbeddedS3, buckets: dict[str, AccessKey]) -> None:
    anon = client(s3, None)
    assert refused(lambda: anon.put_object(Bucket=A, Key="x", Body=b"1")) == (403, "AccessDenied")
    assert refused(lambda: anon.list_objects_v2(Bucket=A)) == (403, "AccessDenied")
    assert refused(lambda: anon.get_object(Bucket=A, Key="seg/0.log")) == (403, "AccessDenied")
    assert refused(lambda: anon.list_buckets()) == (403, "AccessDenied")
    assert refused(lambda: anon.create_bucket(Bucket="anon-bucket")) == (403, "AccessDenied")
    # moto's own API (its reset wipes every bucket) is not served, signed or not
    reset = urllib.request.Request(f"{s3.endpoint}/moto-api/reset", method="POST")
    assert status(reset) == 403
    assert (
        client(s3, TEST_ADMIN).get_object(Bucket=A, Key="seg/0.log")["Body"].read()
        == b"auth-cluster-a"
    )


def test_unknown_keys_and_wrong_secrets_are_refused(
    s3: EmbeddedS3, buckets: dict[str, AccessKey]
) -> None:
    unknown = client(s3, AccessKey("SLKNOSUCHKEY00000000", "whatever"))
    assert refused(lambda: unknown.list_objects_v2(Bucket=A)) == (403, "InvalidAccessKeyId")
    assert refused(lambda: unknown.put_object(Bucket=A, Key="x", Body=b"1")) == (
        403,
        "InvalidAccessKeyId",
    )
    wrong = client(s3, AccessKey(buckets["a"].access_key_id, "not-the-secret"))
    assert refused(lambda: wrong.list_objects_v2(Bucket=A)) == (403, "SignatureDoesNotMatch")
    assert refused(lambda: wrong.put_object(Bucket=A, Key="x", Body=b"1")) == (
        403,
        "SignatureDoesNotMatch",
    )
    # through the object store layer: a clear, non-retriable error, at once
    store = S3ObjectStore(
        settings_for(s3.endpoint, A, access_key_id="SLKNOSUCHKEY00000000", secret_access_key="x")
    )
    with pytest.raises(ObjectStoreError) as info:
        store.get("seg/0.log")
    assert not isinstance(info.value, ObjectStoreUnavailable)
    assert "InvalidAccessKeyId" in str(info.value)


def test_a_clusters_key_reaches_its_own_bucket_only(
    s3: EmbeddedS3, buckets: dict[str, AccessKey]
) -> None:
    a = client(s3, buckets["a"])
    a.put_object(Bucket=A, Key="seg/1.log", Body=b"mine")
    assert a.get_object(Bucket=A, Key="seg/1.log")["Body"].read() == b"mine"
    assert {o["Key"] for o in a.list_objects_v2(Bucket=A)["Contents"]} >= {"seg/0.log", "seg/1.log"}
    a.head_bucket(Bucket=A)
    a.delete_object(Bucket=A, Key="seg/1.log")
    a.delete_objects(Bucket=A, Delete={"Objects": [{"Key": "gone"}]})

    denied = (403, "AccessDenied")
    assert refused(lambda: a.list_objects_v2(Bucket=B)) == denied
    assert refused(lambda: a.get_object(Bucket=B, Key="seg/0.log")) == denied
    assert refused(lambda: a.head_object(Bucket=B, Key="seg/0.log"))[0] == 403
    assert refused(lambda: a.put_object(Bucket=B, Key="x", Body=b"1")) == denied
    assert refused(lambda: a.delete_object(Bucket=B, Key="seg/0.log")) == denied
    assert (
        refused(lambda: a.delete_objects(Bucket=B, Delete={"Objects": [{"Key": "seg/0.log"}]}))
        == denied
    )
    copy = {"Bucket": B, "Key": "seg/0.log"}
    assert refused(lambda: a.copy_object(Bucket=A, Key="stolen", CopySource=copy)) == denied
    assert refused(lambda: a.list_buckets()) == denied
    assert refused(lambda: a.create_bucket(Bucket="auth-cluster-c")) == denied
    assert refused(lambda: a.delete_bucket(Bucket=A)) == denied
    versioning = {"Status": "Enabled"}
    assert (
        refused(lambda: a.put_bucket_versioning(Bucket=A, VersioningConfiguration=versioning))
        == denied
    )
    # multipart uploads are object writes
    upload = a.create_multipart_upload(Bucket=A, Key="multi")["UploadId"]
    a.abort_multipart_upload(Bucket=A, Key="multi", UploadId=upload)
    # B's objects are untouched
    admin = client(s3, TEST_ADMIN)
    assert admin.get_object(Bucket=B, Key="seg/0.log")["Body"].read() == B.encode()


def test_a_read_only_key_reads_and_changes_nothing(
    s3: EmbeddedS3, buckets: dict[str, AccessKey]
) -> None:
    ro = client(s3, buckets["a-ro"])
    assert ro.get_object(Bucket=A, Key="seg/0.log", Range="bytes=0-3")["Body"].read() == b"auth"
    assert ro.list_objects_v2(Bucket=A, Prefix="seg/")["KeyCount"] >= 1
    denied = (403, "AccessDenied")
    assert refused(lambda: ro.put_object(Bucket=A, Key="x", Body=b"1")) == denied
    assert refused(lambda: ro.delete_object(Bucket=A, Key="seg/0.log")) == denied
    assert refused(lambda: ro.list_objects_v2(Bucket=B)) == denied


def test_keys_added_and_removed_take_effect_at_once(
    s3: EmbeddedS3, buckets: dict[str, AccessKey]
) -> None:
    key = generate("late", buckets=[A], read_only=True)
    late = client(s3, key)
    assert refused(lambda: late.list_objects_v2(Bucket=A)) == (403, "InvalidAccessKeyId")
    s3.keys.put(key)
    assert late.list_objects_v2(Bucket=A)["KeyCount"] >= 1
    s3.keys.remove(lambda k: k != key)
    assert refused(lambda: late.list_objects_v2(Bucket=A)) == (403, "InvalidAccessKeyId")


def test_presigned_urls_and_tampered_requests(
    s3: EmbeddedS3, buckets: dict[str, AccessKey]
) -> None:
    v4 = client(s3, buckets["a-ro"], signature_version="s3v4")
    url = v4.generate_presigned_url("get_object", Params={"Bucket": A, "Key": "seg/0.log"})
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert answer.read() == A.encode()
    other = v4.generate_presigned_url("get_object", Params={"Bucket": B, "Key": "seg/0.log"})
    assert status(urllib.request.Request(other)) == 403

    # a signed PUT whose body is swapped after signing, or whose key is changed
    key = buckets["a"]
    request = AWSRequest(method="PUT", url=f"{s3.endpoint}/{A}/signed", data=b"the signed body")
    S3SigV4Auth(Credentials(key.access_key_id, key.secret_access_key), "s3", "us-east-1").add_auth(
        request
    )
    headers = dict(request.headers.items())

    def send(url: str, body: bytes) -> int:
        return status(urllib.request.Request(url, data=body, method="PUT", headers=headers))

    assert send(f"{s3.endpoint}/{A}/signed", b"the swapped body") == 400  # sha256 mismatch
    assert send(f"{s3.endpoint}/{A}/other-key", b"the signed body") == 403
    assert send(f"{s3.endpoint}/{A}/signed", b"the signed body") == 200


def test_time_and_host_rules(tmp_path: Path) -> None:
    """``check`` itself: clock skew, virtual-hosted addresses (no server)."""
    key = AccessKey("SLKTESTTESTTESTTEST0", "secret", buckets=(A,))
    key_file = KeyFile(tmp_path / KEYS_FILE)
    key_file.put(key)
    keys = Keys(key_file)
    request = AWSRequest(method="GET", url=f"http://127.0.0.1:9000/{A}/k")
    S3SigV4Auth(Credentials(key.access_key_id, key.secret_access_key), "s3", "us-east-1").add_auth(
        request
    )
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": f"/{A}/k",
        "RAW_URI": f"/{A}/k",
        "QUERY_STRING": "",
        **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in request.headers.items()},
        "HTTP_HOST": "127.0.0.1:9000",
    }
    assert check(environ, keys) == key
    with pytest.raises(Refusal) as info:
        check(environ, keys, now=datetime.now(UTC) + timedelta(minutes=20))
    assert info.value.code == "RequestTimeTooSkewed"
    with pytest.raises(Refusal) as info:
        check({**environ, "HTTP_HOST": f"{B}.localhost.localstack.cloud:9000"}, keys)
    assert info.value.code == "AccessDenied"


def test_a_generated_admin_key_is_in_a_private_file_not_on_the_command_line(
    tmp_path: Path,
) -> None:
    with EmbeddedS3(tmp_path / "s3") as server:
        admin = server.admin
        assert admin is not None
        assert admin.admin
        path = tmp_path / "s3" / KEYS_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert server.proc is not None
        cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
        assert admin.secret_access_key.encode() not in cmdline
        assert admin.secret_access_key not in repr(admin)
        client(server, admin).create_bucket(Bucket="private")
        assert refused(lambda: client(server, TEST_ADMIN).list_buckets())[0] == 403
    log = server.log_path.read_text()
    assert admin.secret_access_key not in log


def test_a_brokers_key_creates_its_own_bucket_only(s3: EmbeddedS3) -> None:
    """A broker's ``ensure_bucket`` works with its cluster's key, whether or not the control
    plane created the bucket first."""
    key = generate("new brokers", buckets=["auth-cluster-new"])
    s3.keys.put(key)
    own = S3ObjectStore(
        settings_for(
            s3.endpoint,
            "auth-cluster-new",
            access_key_id=key.access_key_id,
            secret_access_key=key.secret_access_key,
        )
    )
    own.ensure_bucket()
    own.ensure_bucket()  # exists: HEAD only
    own.put("k", b"v")
    assert own.get("k") == b"v"
    assert refused(lambda: client(s3, key).create_bucket(Bucket="auth-cluster-other")) == (
        403,
        "AccessDenied",
    )
