"""Replicators: the control plane runs MirrorMaker 2 as a supervised process (MSK
Replicator's analogue), driven with cloudctl: create-replicator --wait, describe-replicator
(state, lag per partition), list-replicators, delete-replicator; a MirrorMaker killed with -9
is restarted, a control plane killed with -9 adopts it again, a deleted source cluster fails
the replicator with a message.

One control plane with two 1-broker clusters (east, west) and one replicator per module.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controlplane.replicator_process import ClusterAccess, Flow, mm2_properties, scan, write_files
from tests.controlplane.harness import ControlPlaneProcess, running_control_plane, wait_until
from tests.support.connect import connect_available
from tests.support.mirror import commit, committed, count, produce, records, seed
from wire.sasl import Mechanism, SaslCredentials

CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")
SETTINGS = {
    "replicator.check.interval.ms": "500",
    "replicator.refresh.interval.ms": "3000",
    "replicator.sync.interval.ms": "1000",
    "replicator.offset.flush.interval.ms": "1000",
}
NAME = "east-to-west"


def cloudctl(
    plane: ControlPlaneProcess, *args: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [CLOUDCTL, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "SLUICE_HOME": str(plane.home), "SLUICE_ENDPOINT": plane.endpoint},
        timeout=300,
        check=False,
    )
    if ok:
        assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return done


def describe(plane: ControlPlaneProcess) -> dict[str, Any]:
    return dict(json.loads(cloudctl(plane, "describe-replicator", NAME, "-o", "json").stdout))


def bootstrap(plane: ControlPlaneProcess, cluster: str) -> str:
    return cloudctl(plane, "get-bootstrap-brokers", cluster).stdout.strip()


@dataclass
class Setup:
    plane: ControlPlaneProcess
    east: str
    west: str
    created: dict[str, Any]
    group: dict[tuple[str, int], int]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    reason = connect_available()
    if reason:
        pytest.skip(reason)
    home = tmp_path_factory.mktemp("sluice-home")
    with running_control_plane(home, SETTINGS) as plane:
        for name in ("east", "west"):
            plane.create(name, brokers=1)
        east, west = bootstrap(plane, "east"), bootstrap(plane, "west")
        seed(east, "orders", 3, 300, replicas=1)
        group = {("orders", 0): 100, ("orders", 1): 100, ("orders", 2): 100}
        commit(east, "billing", group)
        created = cloudctl(
            plane,
            "create-replicator",
            NAME,
            "--source",
            "east",
            "--target",
            "west",
            "--topics",
            "orders.*",
            "--sync-group-offsets",
            "--wait",
            "--timeout",
            "180",
            "-o",
            "json",
        )
        yield Setup(plane, east, west, json.loads(created.stdout), group)


def test_create_waits_until_running_and_copies(setup: Setup) -> None:
    assert setup.created["state"] == "RUNNING"
    assert setup.created["source_cluster"] == "east"
    assert setup.created["source_alias"] == "east"
    assert setup.created["topic_name_policy"] == "PREFIXED"
    wait_until(lambda: count(setup.west, "east.orders") == 300, 60, "300 records copied")
    assert records(setup.west, "east.orders") == records(setup.east, "orders")
    wait_until(
        lambda: committed(setup.west, "billing", "east.orders", 3) == {0: 100, 1: 100, 2: 100},
        60,
        "the group's offsets on the target",
    )
    listed = json.loads(cloudctl(setup.plane, "list-replicators", "-o", "json").stdout)
    assert [(r["name"], r["state"]) for r in listed["replicators"]] == [(NAME, "RUNNING")]
    home = setup.plane.home
    properties = home / "replicators" / NAME / "mm2.properties"
    assert stat.S_IMODE(properties.stat().st_mode) == 0o600
    assert stat.S_IMODE(properties.parent.stat().st_mode) == 0o700
    assert (home / "logs" / "replicators" / f"{NAME}.log").is_file()


def test_describe_shows_the_lag_of_each_partition(setup: Setup) -> None:
    def caught_up() -> dict[str, Any] | None:
        found = describe(setup.plane)
        lags = [p["lag"] for p in found["partitions"]]
        return found if len(lags) == 3 and lags == [0, 0, 0] else None

    found = wait_until(caught_up, 60, "lag 0 on every partition")
    assert found["total_lag"] == 0
    assert [
        (p["source_topic"], p["partition"], p["target_topic"]) for p in found["partitions"]
    ] == [("orders", p, "east.orders") for p in range(3)]
    produce(setup.east, "orders", 3, 300, 90)
    wait_until(lambda: count(setup.west, "east.orders") == 390, 60, "new records copied")
    wait_until(caught_up, 60, "lag 0 again")
    text = cloudctl(setup.plane, "describe-replicator", NAME).stdout
    assert "SOURCE TOPIC" in text
    assert "east.orders" in text
    assert "state:        RUNNING" in text


def mirror_maker_pid(setup: Setup) -> int:
    found = scan(setup.plane.home).get(NAME, [])
    assert len(found) == 1, found
    return found[0]


def test_a_killed_mirror_maker_is_restarted_and_a_restarted_control_plane_adopts_it(
    setup: Setup,
) -> None:
    before = describe(setup.plane)["restarts"]
    old = mirror_maker_pid(setup)
    os.kill(old, 9)
    wait_until(
        lambda: (d := describe(setup.plane))["restarts"] == before + 1 and d["state"] == "RUNNING",
        120,
        "MirrorMaker restarted and RUNNING",
    )
    new = mirror_maker_pid(setup)
    assert new != old
    produce(setup.east, "orders", 3, 390, 30)
    wait_until(lambda: count(setup.west, "east.orders") == 420, 60, "copying goes on")
    setup.plane.kill9()  # MirrorMaker runs on, in its own session
    assert mirror_maker_pid(setup) == new
    setup.plane.start()
    found = wait_until(
        lambda: (d := describe(setup.plane))["state"] == "RUNNING" and d, 60, "RUNNING"
    )
    assert found["restarts"] == before + 1, "adopted, not restarted"
    assert mirror_maker_pid(setup) == new


def test_bad_requests_are_refused_with_what_to_do(setup: Setup) -> None:
    def refused(*args: str) -> str:
        done = cloudctl(setup.plane, "create-replicator", "bad", *args, ok=False)
        assert done.returncode == 1, done
        return done.stderr

    assert "same cluster" in refused("--source", "west", "--target", "west")
    assert "not a regular expression" in refused(
        "--source", "east", "--target", "west", "--topics", "("
    )
    assert "cluster 'nowhere' not found" in refused("--source", "nowhere", "--target", "west")
    assert "already copies source alias 'east'" in refused("--source", "east", "--target", "west")
    again = cloudctl(
        setup.plane, "create-replicator", NAME, "--source", "east", "--target", "west", ok=False
    )
    assert again.returncode == 1
    assert "already exists" in again.stderr
    usage = cloudctl(setup.plane, "create-replicator", "x", "--target", "west", ok=False)
    assert usage.returncode == 2
    missing = cloudctl(setup.plane, "describe-replicator", "nope", ok=False)
    assert missing.returncode == 1
    assert "cloudctl list-replicators" in missing.stderr


def test_credentials_of_a_secured_cluster_stay_in_a_private_file(tmp_path: Path) -> None:
    secret = "s3cr3t-pa55word"
    login = SaslCredentials("sluice-internal", secret, Mechanism.SCRAM_SHA_512)
    flow = Flow(
        source_alias="east",
        target_alias="west",
        source=ClusterAccess("127.0.0.1:9092", login),
        target=ClusterAccess("127.0.0.1:9093"),
        topics=".*",
        groups=".*",
        sync_group_offsets=False,
        identical_names=True,
        replication_factor=3,
        source_replication_factor=3,
        refresh_s=10,
        sync_s=5,
        offset_flush_ms=5000,
    )
    properties = write_files(tmp_path, "secured", flow)
    credentials = properties.parent / "credentials.properties"
    assert secret not in properties.read_text()
    assert secret in credentials.read_text()
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    props, _ = mm2_properties(flow, credentials)
    assert props["east.sasl.jaas.config"] == f"${{file:{credentials}:east.jaas}}"
    assert props["east.security.protocol"] == "SASL_PLAINTEXT"
    assert props["config.providers"] == "file"
    assert "west.sasl.jaas.config" not in props
    assert props["replication.policy.class"].endswith("IdentityReplicationPolicy")


def test_a_deleted_source_fails_the_replicator_then_it_is_deleted(setup: Setup) -> None:
    cloudctl(setup.plane, "delete-cluster", "east", "--yes", "--wait")
    failed = wait_until(
        lambda: (d := describe(setup.plane))["state"] == "FAILED" and d, 60, "FAILED"
    )
    assert "source cluster 'east' was deleted" in failed["state_message"]
    assert scan(setup.plane.home).get(NAME, []) == [], "its MirrorMaker was stopped"
    deleted = json.loads(
        cloudctl(setup.plane, "delete-replicator", NAME, "--yes", "-o", "json").stdout
    )
    assert deleted == {"name": NAME, "existed": True, "deleted": True}
    listed = json.loads(cloudctl(setup.plane, "list-replicators", "-o", "json").stdout)
    assert listed == {"replicators": []}
    assert not (setup.plane.home / "replicators" / NAME).exists()
    assert count(setup.west, "east.orders") == 420, "the copy stays on the target"
    gone = cloudctl(setup.plane, "delete-replicator", NAME, "--yes", "--if-exists", "-o", "json")
    assert json.loads(gone.stdout)["existed"] is False
