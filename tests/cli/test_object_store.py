"""`cloudctl up --s3-endpoint URL`: the control plane uses that object store and starts none.

The endpoint is an embedded S3 server this test starts itself (``tiered.embedded_s3``), outside
the control plane's home; the control plane signs with the AWS_* credentials of its environment.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Cloud
from tests.cli.test_commands import one_error_line
from tests.conftest import free_port
from tests.controlplane.harness import kill_everything_under, processes_under, wait_until
from tiered.access_keys import AccessKey
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.errors import ObjectStoreError
from tiered.object_store import S3ObjectStore

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "external", "AWS_SECRET_ACCESS_KEY": "external-secret"}
EXTERNAL_ADMIN = AccessKey(
    CREDENTIALS["AWS_ACCESS_KEY_ID"], CREDENTIALS["AWS_SECRET_ACCESS_KEY"], admin=True
)
"""The "external" store's root key: the one the control plane gets in its environment."""


class ExternalCloud(Cloud):
    @property
    def environ(self) -> dict[str, str]:
        # static credentials: boto3's chain never reaches for instance metadata (no network)
        return {**super().environ, **CREDENTIALS, "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture
def external_s3(tmp_path: Path) -> Iterator[EmbeddedS3]:
    with EmbeddedS3(
        tmp_path / "external-s3", log_path=tmp_path / "external-s3.log", admin=EXTERNAL_ADMIN
    ) as server:
        yield server


def test_up_with_an_s3_endpoint_uses_it_and_starts_nothing(
    tmp_path: Path, external_s3: EmbeddedS3
) -> None:
    home = tmp_path / "home"
    cloud = ExternalCloud(home, f"127.0.0.1:{free_port()}")
    bad = cloud.run("up", "--s3-endpoint", "localhost:9000")
    assert bad.returncode == 1
    assert "--s3-endpoint" in bad.stderr
    up = cloud.run("up", "--s3-endpoint", external_s3.endpoint)
    assert up.returncode == 0, up.stderr
    try:
        info = json.loads(cloud.run("status", "-o", "json").stdout)
        assert info["s3_endpoint"] == external_s3.endpoint
        assert info["object_store"] == {
            "kind": "external",
            "endpoint": external_s3.endpoint,
            "data_dir": "",
            "pid": 0,
            "restarts": 0,
            "answering": True,
            "detail": "",
        }
        assert f"external S3 endpoint {external_s3.endpoint}: answering" in (
            cloud.invoke("status").stdout
        )
        assert not (home / "s3").exists()
        assert [cmd for _, cmd in processes_under(home) if "embedded_s3" in cmd] == []

        created = cloud.run("create-cluster", "ext", "--brokers", "1", "--wait", "-o", "json")
        assert created.returncode == 0, created.stderr
        store = json.loads(created.stdout)["object_store"]
        assert store["endpoint"] == external_s3.endpoint
        bucket = S3ObjectStore(
            ObjectStoreSettings(
                endpoint=external_s3.endpoint,
                bucket=store["bucket"],
                access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                max_attempts=1,
            )
        )
        wait_until(lambda: bucket_exists(bucket), 15, f"bucket {store['bucket']}")
    finally:
        down = cloud.run("down")
        assert down.returncode == 0, down.stderr
        assert kill_everything_under(home) == []
    assert external_s3.proc is not None
    assert external_s3.proc.poll() is None, "`cloudctl down` leaves an external store alone"


def bucket_exists(store: S3ObjectStore) -> bool:
    try:
        list(store.list())
    except ObjectStoreError:
        return False
    return True


def test_down_stops_an_embedded_s3_server_left_by_a_killed_control_plane(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cloud = Cloud(home, f"127.0.0.1:{free_port()}")
    up = cloud.run("up")
    assert up.returncode == 0, up.stderr
    try:

        def s3_pid() -> int:
            store = json.loads(cloud.invoke("status", "-o", "json").stdout)["object_store"]
            return int(store["pid"]) if store["answering"] else 0

        pid = wait_until(s3_pid, 30, "the embedded S3 server answering")
        os.kill(int((home / "controlplane.pid").read_text()), signal.SIGKILL)
        wait_until(lambda: cloud.run("status").returncode == 0, 10, "status")
        status = cloud.run("status")
        assert "not running" in status.stdout
        assert "the embedded S3 server still runs" in status.stdout
        assert Path(f"/proc/{pid}").exists()
        down = cloud.run("down")
        assert down.returncode == 0, down.stderr
        assert "embedded S3 server" in down.stdout
        assert processes_under(home) == []
    finally:
        kill_everything_under(home)


def test_a_dead_object_store_and_a_missing_topic_read_as_before(tmp_path: Path) -> None:
    """cloudctl tells errors apart by their ErrorInfo reason now; its lines are unchanged."""
    home = tmp_path / "home"
    cloud = ExternalCloud(home, f"127.0.0.1:{free_port()}")
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    up = cloud.run("up", "--s3-endpoint", dead)
    assert up.returncode == 0, up.stderr
    try:
        created = cloud.run("create-cluster", "dead", "--brokers", "1", "--wait", "-o", "json")
        assert created.returncode == 0, created.stderr
        bucket = json.loads(created.stdout)["object_store"]["bucket"]
        orphans = cloud.invoke("find-orphans", "--cluster", "dead")
        assert orphans.exit_code == 1
        line = one_error_line(orphans.stderr)
        assert line.startswith(
            f"cloudctl: error: the object store of cluster 'dead' (bucket {bucket} at {dead}): "
        )
        assert line.endswith(" (`cloudctl status` tells whether the object store answers)")
        topic = cloud.invoke("describe-topic", "--cluster", "dead", "nope")
        assert one_error_line(topic.stderr) == (
            "cloudctl: error: topic 'nope' not found in cluster 'dead' (list topics with "
            "`cloudctl list-topics --cluster dead`)"
        )
        cluster = cloud.invoke("describe-cluster", "nope")
        assert one_error_line(cluster.stderr) == (
            "cloudctl: error: cluster 'nope' not found (list clusters with `cloudctl "
            "list-clusters`)"
        )
        config = cloud.invoke("create-cluster", "x", "--config", "log.retention.mz=1")
        assert one_error_line(config.stderr) == (
            "cloudctl: error: unknown broker config 'log.retention.mz'"
        )
    finally:
        down = cloud.run("down")
        assert down.returncode == 0, down.stderr
        assert kill_everything_under(home) == []
