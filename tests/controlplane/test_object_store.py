"""The object store of the control plane: the embedded S3 server it runs, and each cluster's bucket.

Real processes on loopback: the control plane, its embedded S3 server (``tiered.embedded_s3``),
brokers; the buckets are checked with ``S3ObjectStore`` against the server itself.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from cli.output import status_object_store_json
from controlplane.process import read_cmdline
from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import controlplane_pb2 as spb
from tests.controlplane.harness import (
    ControlPlaneProcess,
    kill_everything_under,
    processes_under,
    wait_until,
)
from tiered.access_keys import KEYS_FILE, KeyFile
from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectNotFound, ObjectStoreError
from tiered.object_store import S3ObjectStore


def status(plane: ControlPlaneProcess) -> tuple[spb.Status, dict[str, Any]]:
    """GetStatus, and its object store as a dict (every field, defaults included)."""
    reply = plane.status.GetStatus(spb.GetStatusRequest(), metadata=plane.metadata, timeout=10)
    assert reply.HasField("object_store"), "GetStatus did not name the object store"
    store = status_object_store_json(reply)  # cloudctl status -o json's view
    return reply, store


def answering(plane: ControlPlaneProcess, other_than: int = 0) -> dict[str, Any]:
    """The status of the embedded server once it answers (with a pid other than ``other_than``)."""

    def check() -> dict[str, Any] | None:
        _, store = status(plane)
        return store if store["answering"] and store["pid"] not in (0, other_than) else None

    found: dict[str, Any] = wait_until(check, 30, "the embedded S3 server answering")
    return found


def s3(home: Path, endpoint: str, bucket: str) -> S3ObjectStore:
    """``bucket`` with the control plane's admin key (from the server's key file)."""
    admin = KeyFile(home / "s3" / KEYS_FILE).admin()
    assert admin is not None, "the control plane made no admin key"
    return S3ObjectStore(
        ObjectStoreSettings(
            endpoint=endpoint,
            bucket=bucket,
            access_key_id=admin.access_key_id,
            secret_access_key=admin.secret_access_key,
            connect_timeout_ms=1000,
            read_timeout_ms=5000,
            max_attempts=1,
        )
    )


def bucket_exists(store: S3ObjectStore) -> bool:
    try:
        list(store.list())
    except ObjectStoreError:
        return False
    return True


def test_embedded_s3_runs_restarts_and_keeps_each_clusters_bucket(
    plane: ControlPlaneProcess,
) -> None:
    found = answering(plane)
    reply, _ = status(plane)
    data_dir = plane.home / "s3"
    assert found["kind"] == "embedded"
    assert found["endpoint"].startswith("http://127.0.0.1:")
    assert found["data_dir"] == str(data_dir)
    assert reply.s3_endpoint == found["endpoint"]
    assert reply.s3_note.startswith(f"embedded S3 at {found['endpoint']} (data in {data_dir}")
    assert reply.s3_note.endswith(": answering")
    cmdline = read_cmdline(found["pid"])
    assert cmdline is not None
    assert "tiered.embedded_s3" in cmdline
    assert str(data_dir) in cmdline

    # a cluster gets its own bucket, recorded with the cluster
    plane.create("tiered", brokers=1)
    recorded = plane.get("tiered").object_store
    assert recorded.endpoint == found["endpoint"]
    assert recorded.bucket.startswith("sluice-tiered-")
    assert recorded.embedded
    store = s3(plane.home, recorded.endpoint, recorded.bucket)
    wait_until(lambda: bucket_exists(store), 15, f"bucket {recorded.bucket}")
    segment = os.urandom(200_000)
    store.put("tiered/t-0/0/00000000000000000000.log", segment)

    # the server killed with -9: restarted on its port, with what it had acknowledged
    os.kill(found["pid"], signal.SIGKILL)
    again = answering(plane, other_than=found["pid"])
    assert again["endpoint"] == found["endpoint"]
    assert again["restarts"] == 1
    assert store.get("tiered/t-0/0/00000000000000000000.log") == segment
    assert [cpb.BrokerState.Name(b.state) for b in plane.get("tiered").brokers] == [
        "BROKER_STATE_RUNNING"
    ]

    # deleting the cluster deletes its objects and its bucket
    plane.clusters.DeleteCluster(
        cpb.DeleteClusterRequest(name="tiered"), metadata=plane.metadata, timeout=10
    )
    plane.wait_gone("tiered", 30)
    with pytest.raises(ObjectNotFound):
        list(store.list())


def test_control_plane_kill9_readopts_the_server_and_a_stop_ends_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plane = ControlPlaneProcess(home).start()
    try:
        first = answering(plane)
        store = s3(home, first["endpoint"], "kept")
        store.ensure_bucket()
        store.put("k", b"v")
        plane.kill9()
        assert read_cmdline(first["pid"]) is not None, "the server outlives the control plane"

        plane = ControlPlaneProcess(home).start()
        adopted = answering(plane)
        assert (adopted["pid"], adopted["endpoint"]) == (first["pid"], first["endpoint"])
        assert adopted["restarts"] == 0
        assert plane.stop() == 0
        assert processes_under(home) == [], "stopping the control plane stops the server"

        # the next start reuses the recorded port; the data is still there
        plane = ControlPlaneProcess(home).start()
        third = answering(plane)
        assert third["endpoint"] == first["endpoint"]
        assert third["pid"] != first["pid"]
        assert store.get("k") == b"v"
    finally:
        plane.stop()
        assert kill_everything_under(home) == []
