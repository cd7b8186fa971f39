"""Cluster tags and storage mode (MSK's tags and storage_mode) through `cloudctl`, against
the session's shared control plane: tags set at creation, changed in place without a
restart, refused when they break the rules; a LOCAL cluster has no bucket and its topics
cannot tier, the default (an object store is there) is TIERED."""

from __future__ import annotations

import json
from typing import Any

from tests.cli.conftest import SHARED_CLUSTER, Cloud

CLUSTER = "tagged"


def described(cloud: Cloud, name: str) -> dict[str, Any]:
    done = cloud.invoke("describe-cluster", name, "-o", "json")
    assert done.exit_code == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_tags_and_a_local_cluster(shared_cloud: Cloud) -> None:
    cloud = shared_cloud
    made = cloud.invoke(
        "create-cluster",
        CLUSTER,
        "--brokers",
        "1",
        "--storage-mode",
        "local",
        "--tag",
        "team=payments",
        "--tag",
        "env=ci",
        "--wait",
        "-o",
        "json",
    )
    assert made.exit_code == 0, made.stderr
    cluster = json.loads(made.stdout)
    assert cluster["tags"] == {"env": "ci", "team": "payments"}
    assert cluster["storage_mode"] == "LOCAL"
    assert cluster["object_store"]["bucket"] == ""
    assert described(cloud, SHARED_CLUSTER)["storage_mode"] == "TIERED", "the default"
    table = cloud.invoke("describe-cluster", CLUSTER).stdout
    assert "env=ci, team=payments" in table
    assert "local" in table

    tiered = cloud.invoke(
        "create-topic", "--cluster", CLUSTER, "t", "--config", "remote.storage.enable=true"
    )
    assert tiered.exit_code == 1
    assert "storage mode is LOCAL" in tiered.stderr
    assert "--storage-mode tiered" in tiered.stderr

    started = cluster["brokers"][0]["pid"]
    changed = cloud.invoke(
        "tag-cluster", CLUSTER, "--tag", "env=prod", "--tag", "owner=x", "--remove", "team"
    )
    assert changed.exit_code == 0, changed.stderr
    after = described(cloud, CLUSTER)
    assert after["tags"] == {"env": "prod", "owner": "x"}
    assert after["state"] == "ACTIVE"
    assert after["brokers"][0]["pid"] == started, "tags restart nothing"

    bad = cloud.invoke("tag-cluster", CLUSTER, "--tag", "aws:owner=x")
    assert bad.exit_code == 1
    assert "aws:" in bad.stderr
    many = [f"--tag=k{i}=v" for i in range(51)]
    assert "cluster.max.tags" in cloud.invoke("tag-cluster", CLUSTER, *many).stderr
    long_value = cloud.invoke("create-cluster", "tag-long", "--tag", "k=" + "v" * 257)
    assert long_value.exit_code == 1
    assert "256" in long_value.stderr
    assert cloud.invoke("describe-cluster", "tag-long").exit_code == 1, "nothing created"
    assert described(cloud, CLUSTER)["tags"] == {"env": "prod", "owner": "x"}, "unchanged"
    usage = cloud.invoke("tag-cluster", CLUSTER)
    assert usage.exit_code == 2

    gone = cloud.invoke("delete-cluster", CLUSTER, "--yes", "--wait")
    assert gone.exit_code == 0, gone.stderr
