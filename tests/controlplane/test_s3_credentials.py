"""Credentials of the embedded S3 server, as the control plane hands them out.

One control plane, two clusters: each gets its own keys scoped to its bucket (read-write for
its brokers, through their environment; read-only for clients, through GetCluster only); the
control plane keeps an admin key. Tiered storage works end to end with them; cluster A's key
cannot list or read cluster B's bucket; no secret is on a command line or in a log; a deleted
cluster's keys stop working.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from controlplane.process import port_free
from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import topics_pb2 as tpb
from tests.controlplane.harness import (
    ControlPlaneProcess,
    processes_under,
    running_control_plane,
    wait_until,
)
from tests.controlplane.test_object_store import answering
from tests.controlplane.test_tiered_restart import (
    FAST,
    RECORDS,
    first_local_offset,
    produce,
    read_all,
)
from tiered.access_keys import KEYS_FILE, KeyFile

TOPIC = "history"


def s3(endpoint: str, key_id: str | None, secret: str | None) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            signature_version=UNSIGNED if key_id is None else None,
        ),
    )


def code(call: Any) -> str:
    with pytest.raises(ClientError) as info:
        call()
    return str(info.value.response["Error"]["Code"])


def test_scoped_keys_end_to_end(plane: ControlPlaneProcess) -> None:
    a = plane.create("keys-a", brokers=1, **FAST)
    created = plane.clusters.CreateCluster(
        cpb.CreateClusterRequest(name="keys-b", broker_count=1, config=FAST),
        metadata=plane.metadata,
        timeout=10,
    )
    assert created.object_store.bucket
    assert not created.object_store.secret_access_key  # only GetCluster hands out keys
    plane.wait_state("keys-b")
    plane.topics.CreateTopic(
        tpb.CreateTopicRequest(
            cluster="keys-a",
            name=TOPIC,
            partitions=1,
            replication_factor=1,
            config={
                "remote.storage.enable": "true",
                "segment.bytes": "40000",
                "local.retention.bytes": "80000",
            },
        ),
        metadata=plane.metadata,
        timeout=30,
    )
    produce(a.bootstrap_brokers, TOPIC)

    # only GetCluster hands out credentials: the cluster's read-only key
    got_a, got_b = plane.get("keys-a").object_store, plane.get("keys-b").object_store
    assert got_a.embedded
    assert got_a.access_key_id
    assert got_a.secret_access_key
    assert got_a.access_key_id != got_b.access_key_id
    listed = plane.clusters.ListClusters(
        cpb.ListClustersRequest(), metadata=plane.metadata, timeout=10
    )
    assert [c.object_store.secret_access_key for c in listed.clusters] == ["", ""]
    assert [c.object_store.access_key_id for c in listed.clusters] == ["", ""]

    reader_a = s3(got_a.endpoint, got_a.access_key_id, got_a.secret_access_key)

    def uploaded() -> list[str]:
        listing = reader_a.list_objects_v2(Bucket=got_a.bucket)
        return [o["Key"] for o in listing.get("Contents", []) if o["Key"].endswith(".log")]

    logs = wait_until(uploaded, 60, "segments of keys-a in its bucket")
    assert reader_a.get_object(Bucket=got_a.bucket, Key=logs[0])["Body"].read(61)
    broker_dir = Path(plane.get("keys-a").brokers[0].data_dir)
    wait_until(lambda: first_local_offset(broker_dir, TOPIC) > 0, 60, "local retention")
    got = read_all(a.bootstrap_brokers, TOPIC)  # the start from the object store
    assert [o for o, _ in got] == list(range(RECORDS))

    # least privilege
    assert code(lambda: reader_a.list_objects_v2(Bucket=got_b.bucket)) == "AccessDenied"
    assert code(lambda: reader_a.put_object(Bucket=got_a.bucket, Key="x", Body=b"1")) == (
        "AccessDenied"
    )
    assert code(lambda: reader_a.delete_object(Bucket=got_a.bucket, Key=logs[0])) == (
        "AccessDenied"
    )
    anonymous = s3(got_a.endpoint, None, None)
    assert code(lambda: anonymous.list_objects_v2(Bucket=got_a.bucket)) == "AccessDenied"
    assert code(lambda: anonymous.put_object(Bucket=got_a.bucket, Key="x", Body=b"1")) == (
        "AccessDenied"
    )
    wrong = s3(got_a.endpoint, got_a.access_key_id, "not-" + got_a.secret_access_key)
    assert code(lambda: wrong.list_objects_v2(Bucket=got_a.bucket)) == "SignatureDoesNotMatch"

    # the key file: private, the control plane's admin key and two keys per cluster
    key_file = plane.home / "s3" / KEYS_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    keys = KeyFile(key_file).load()
    assert [k.name for k in keys if k.admin] == ["controlplane"]
    for store in (got_a, got_b):
        scoped = sorted(
            (k.read_only, k.access_key_id) for k in keys if k.buckets == (store.bucket,)
        )
        assert [ro for ro, _ in scoped] == [False, True]
        assert scoped[1][1] == store.access_key_id
    # brokers sign with their cluster's read-write key, from their environment
    broker_key = next(k for k in keys if k.buckets == (got_a.bucket,) and not k.read_only)
    pid = plane.get("keys-a").brokers[0].pid
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert f"AWS_ACCESS_KEY_ID={broker_key.access_key_id}".encode() in environ

    # no secret on any command line (the control plane, the S3 server, brokers) nor in a log
    secrets = [k.secret_access_key for k in keys]
    assert plane.proc is not None
    pids = [plane.proc.pid, *(p for p, _ in processes_under(plane.home))]
    assert len(pids) >= 4, pids  # control plane, embedded S3, two brokers
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert not [s for s in secrets if s in cmdline], f"a secret on pid {pid}'s command line"
    logs_found = [p for p in plane.home.rglob("*.log") if p.is_file()]
    assert any(p.name == "controlplane.log" for p in logs_found)
    assert any(p.name == "embedded-s3.log" for p in logs_found)
    assert any(p.name.startswith("broker-") for p in logs_found)
    for path in logs_found:
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            continue  # a log segment that retention or roll-up deleted since the listing
        assert not [s for s in secrets if s in text], f"a secret in {path}"

    # a deleted cluster's keys stop working
    plane.clusters.DeleteCluster(
        cpb.DeleteClusterRequest(name="keys-b"), metadata=plane.metadata, timeout=10
    )
    plane.wait_gone("keys-b", 30)
    reader_b = s3(got_b.endpoint, got_b.access_key_id, got_b.secret_access_key)
    assert code(lambda: reader_b.list_objects_v2(Bucket=got_b.bucket)) == "InvalidAccessKeyId"
    assert not [k for k in KeyFile(key_file).load() if k.buckets == (got_b.bucket,)]


FAKE_OLD_SERVER = """
import http.server, sys

class Anything(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[-1])), Anything).serve_forever()
"""


def broker_key_id(pid: int) -> str:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    found = [e for e in environ if e.startswith(b"AWS_ACCESS_KEY_ID=")]
    return found[0].split(b"=", 1)[1].decode() if found else ""


def test_an_upgrade_restarts_what_ran_without_credentials(tmp_path: Path) -> None:
    """What a version before credentials left running is replaced when the control plane
    starts: an embedded S3 server that accepts unsigned requests (here a stand-in answering
    200 to anything, with the server's command line), and a broker without its key."""
    home = tmp_path / "home"
    with running_control_plane(home) as plane:
        broker = plane.create("old", brokers=1).brokers[0]
        server = answering(plane)
        plane.kill9()
        keys = KeyFile(home / "s3" / KEYS_FILE)
        keys.remove(lambda k: k.admin)  # the broker's key is not the one it would get now
        os.kill(server["pid"], signal.SIGKILL)
        port = server["endpoint"].rsplit(":", 1)[1]
        wait_until(lambda: port_free("127.0.0.1", int(port)), 10, "the port free")
        args = ["-m", "tiered.embedded_s3", "--data-dir", str(home / "s3"), "--port", port]
        stand_in = subprocess.Popen(
            [sys.executable, "-c", FAKE_OLD_SERVER, *args], start_new_session=True
        )
        try:
            wait_until(lambda: not port_free("127.0.0.1", int(port)), 10, "the stand-in")
            plane = ControlPlaneProcess(home).start()
            again = answering(plane, other_than=stand_in.pid)
            assert stand_in.wait(10) is not None, "the unguarded server is stopped"
            assert again["endpoint"] == server["endpoint"]
            anonymous = s3(again["endpoint"], None, None)
            assert code(lambda: anonymous.list_buckets()) == "AccessDenied"

            def restarted() -> int:
                pid = plane.get("old").brokers[0].pid
                return pid if pid not in (0, broker.pid) else 0

            pid = wait_until(restarted, 60, "the broker restarted with its key")
            (wanted,) = [k for k in keys.load() if not k.admin and not k.read_only]
            assert broker_key_id(pid) == wanted.access_key_id
            plane.wait_state("old")
        finally:
            stand_in.kill()
            stand_in.wait()
            plane.stop()
