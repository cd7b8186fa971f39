"""The embedded S3 server's GETs sent with sendfile (``tiered.s3_fast_get``) answer what
moto answers: two real servers over HTTP, one with the fast path and one without
(``--no-fast-get``), the same objects in both, the same requests (boto3's signed GETs and
presigned URLs with every form of Range, conditional GETs, objects held in memory and in
files, missing keys); status, body and headers must match, but for the Date and the request
id (the fast path's says it sent the body with sendfile, which shows it served the request).
Then: GETs racing overwrites and deletes of the same key see one whole version each, a
read-only key's GETs are metered to the byte, a restart serves the reloaded objects, and
readers that hang up mid-body leave the server serving.
"""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.tiering import TEST_ADMIN, s3_client
from tiered.access_keys import AccessKey, generate
from tiered.embedded_s3 import EmbeddedS3
from tiered.read_meter import load_counts

BUCKET = "fast-get"
BIG = os.urandom(6 * 1024 * 1024 + 123)  # above moto's 5 MiB in-memory buffer: in a file
SMALL = os.urandom(100_000)  # held in memory: moto answers
MOTO_RACE_ERRORS = ("NoSuchKey", "InvalidRange", "500", "InternalError")
RANGES = [
    None,
    "bytes=0-99",
    "bytes=100-",
    "bytes=-500",
    "bytes=0-",
    f"bytes={len(BIG) - 1}-",
    f"bytes=5-{len(BIG) * 2}",  # past the end: clamped
    "bytes=-99999999",  # a suffix longer than the object: all of it
    "bytes=10-4",  # reversed: S3 answers the whole object
    f"bytes={len(BIG)}-",  # unsatisfiable: 416
    "bytes=0-1,5-6",  # several: the whole object
    "bytes=-0",
    "items=0-5",
]


def client(server: EmbeddedS3, key: AccessKey = TEST_ADMIN) -> Any:
    return s3_client(server.endpoint, key)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedS3, EmbeddedS3]]:
    root = tmp_path_factory.mktemp("fast-get")
    fast = EmbeddedS3(root / "fast", admin=TEST_ADMIN).start()
    plain = EmbeddedS3(root / "moto", admin=TEST_ADMIN, fast_get=False).start()
    try:
        for server in (fast, plain):
            s3 = client(server)
            s3.create_bucket(Bucket=BUCKET)
            s3.put_object(
                Bucket=BUCKET, Key="big.log", Body=BIG, Metadata={"segment": "7"},
                ContentType="application/octet-stream",
            )  # fmt: skip
            s3.put_object(Bucket=BUCKET, Key="dir/small.index", Body=SMALL)
            s3.put_object(Bucket=BUCKET, Key="plain.bin", Body=BIG[::-1])
        yield fast, plain
    finally:
        fast.stop()
        plain.stop()


def raw_get(
    server: EmbeddedS3, key: str, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    url = client(server).generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=300
    )
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("GET", f"{parts.path}?{parts.query}", headers=headers)
        reply = conn.getresponse()
        body = reply.read()
        return reply.status, {k.lower(): v for k, v in reply.getheaders()}, body
    finally:
        conn.close()


def comparable(headers: dict[str, str]) -> dict[str, str]:
    """All but the Date, the request id and the Last-Modified (each server stored its copy
    at its own second); the last is there when the other is."""
    skip = ("date", "x-amzn-requestid", "last-modified")
    out = {k: v for k, v in headers.items() if k not in skip}
    out["last-modified"] = "yes" if "last-modified" in headers else "no"
    return out


@pytest.mark.parametrize("key", ["big.log", "dir/small.index", "plain.bin", "missing.log"])
def test_presigned_gets_answer_as_moto_does(
    servers: tuple[EmbeddedS3, EmbeddedS3], key: str
) -> None:
    fast, plain = servers
    served = 0
    for wanted in RANGES:
        headers = {"Range": wanted} if wanted else {}
        got = raw_get(fast, key, headers)
        want = raw_get(plain, key, headers)
        assert got[0] == want[0], (key, wanted)
        if got[0] < 300:
            assert got[2] == want[2], (key, wanted)
        else:  # errors name a request id of their own
            assert got[2].split(b"<RequestId>")[0] == want[2].split(b"<RequestId>")[0]
        assert comparable(got[1]) == comparable(want[1]), (key, wanted)
        served += got[1].get("x-amzn-requestid", "").startswith("sendfile-")
    # the objects in files are sent with sendfile whenever the range is one S3 serves as such
    assert served == (8 if key in ("big.log", "plain.bin") else 0)


def test_boto3_gets_and_conditional_gets_answer_as_moto_does(
    servers: tuple[EmbeddedS3, EmbeddedS3],
) -> None:
    fast, plain = servers
    answers = []
    for server in (fast, plain):
        s3 = client(server)
        etag = s3.head_object(Bucket=BUCKET, Key="big.log")["ETag"]
        whole = s3.get_object(Bucket=BUCKET, Key="big.log")
        part = s3.get_object(Bucket=BUCKET, Key="big.log", Range="bytes=1000-2999")
        matched = s3.get_object(Bucket=BUCKET, Key="big.log", IfMatch=etag)
        with pytest.raises(ClientError) as stale:
            s3.get_object(Bucket=BUCKET, Key="big.log", IfMatch='"0000"')
        answers.append(
            (
                whole["Body"].read(),
                whole["Metadata"],
                whole["ContentType"],
                whole["ContentLength"],
                part["Body"].read(),
                part["ContentRange"],
                matched["Body"].read() == BIG,
                stale.value.response["Error"]["Code"],
            )
        )
    assert answers[0] == answers[1]
    assert answers[0][0] == BIG
    assert answers[0][4] == BIG[1000:3000]
    assert answers[0][1] == {"segment": "7"}


def test_gets_racing_overwrites_and_deletes_see_whole_versions(
    servers: tuple[EmbeddedS3, EmbeddedS3],
) -> None:
    """4 readers (ranged and whole GETs) against a writer that overwrites and deletes the
    key 30 times: every body read is one version, whole. Errors may be a 404, or moto's own
    race when a GET it answers meets the key replaced (a 416 or a 500 after the server's
    retries, ``DurableApp``): S3 clients retry those, and Sluice never overwrites an
    object; what must never happen is a wrong or partial body."""
    fast, _ = servers
    versions = [bytes([i]) * (6 * 1024 * 1024) + os.urandom(16) for i in range(3)]
    writer_s3 = client(fast)
    writer_s3.put_object(Bucket=BUCKET, Key="race.log", Body=versions[0])
    stop = threading.Event()
    problems: list[str] = []
    counts = {"whole": 0, "ranged": 0, "missing": 0}
    lock = threading.Lock()

    def reader(ranged: bool) -> None:
        s3 = client(fast)
        while not stop.is_set():
            try:
                if ranged:
                    got = s3.get_object(Bucket=BUCKET, Key="race.log", Range="bytes=4194304-")
                    body = got["Body"].read()
                    ok = any(body == v[4194304:] for v in versions)
                else:
                    body = s3.get_object(Bucket=BUCKET, Key="race.log")["Body"].read()
                    ok = body in versions
                with lock:
                    counts["ranged" if ranged else "whole"] += 1
                if not ok:
                    problems.append(
                        f"a {'ranged ' if ranged else ''}GET read {len(body)} bytes of no version"
                    )
            except ClientError as exc:
                if exc.response["Error"]["Code"] not in MOTO_RACE_ERRORS:
                    problems.append(repr(exc))
                with lock:
                    counts["missing"] += 1

    threads = [threading.Thread(target=reader, args=(i % 2 == 1,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        for i in range(30):
            if i % 5 == 4:
                writer_s3.delete_object(Bucket=BUCKET, Key="race.log")
            else:
                writer_s3.put_object(Bucket=BUCKET, Key="race.log", Body=versions[i % 3])
            time.sleep(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not problems, problems[:5]
    assert counts["whole"], counts
    assert counts["ranged"], counts


def test_sent_bytes_are_metered_and_a_restart_serves_the_reloaded_objects(
    tmp_path: Path,
) -> None:
    server = EmbeddedS3(tmp_path / "s3", admin=TEST_ADMIN).start()
    try:
        admin = client(server)
        admin.create_bucket(Bucket=BUCKET)
        key = f"cid/orders-{'0' * 8}/0/{0:020d}-abc.log"
        admin.put_object(Bucket=BUCKET, Key=key, Body=BIG)
        readers = generate(f"{BUCKET} readers", buckets=[BUCKET], read_only=True)
        server.keys.put(readers)
        spark = client(server, readers)
        assert spark.get_object(Bucket=BUCKET, Key=key)["Body"].read() == BIG
        part = spark.get_object(Bucket=BUCKET, Key=key, Range="bytes=100-1099")["Body"].read()
        assert part == BIG[100:1100]
        server.stop()  # SIGTERM writes the counts
        assert sum(load_counts(server.data_dir).values()) == len(BIG) + 1000
        server.start()
        status, headers, body = raw_get(server, key, {"Range": "bytes=-1000"})
        assert (status, body) == (206, BIG[-1000:])
        assert headers["x-amzn-requestid"].startswith("sendfile-"), headers
    finally:
        server.stop()


def test_readers_that_hang_up_mid_body_leave_the_server_serving(
    servers: tuple[EmbeddedS3, EmbeddedS3],
) -> None:
    """20 GETs of the file-held object whose clients close after 1,000 bytes of the body
    (a killed executor), 4 at a time: the server stays up and answers the next GET whole."""
    fast, _ = servers
    url = client(fast).generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "big.log"}, ExpiresIn=300
    )
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None

    def hang_up() -> None:
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
            request = f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n"
            sock.sendall(request.encode())
            got = b""
            while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 1000:
                chunk = sock.recv(65536)
                assert chunk, "the server closed before 1,000 bytes of the body"
                got += chunk
            assert got.startswith(b"HTTP/1.1 200"), got[:200]

    for _ in range(5):
        threads = [threading.Thread(target=hang_up) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert fast.proc is not None
    assert fast.proc.poll() is None, "the server exited"
    status, headers, body = raw_get(fast, "big.log", {})
    assert (status, body) == (200, BIG)
    assert headers["x-amzn-requestid"].startswith("sendfile-")
