"""Configurations (MSK's named, revisioned broker settings) through `cloudctl`, against the
session's shared control plane: a cluster created with one runs its settings (read back
from a broker with the Kafka protocol), moves to a new revision by a rolling restart keeping
the settings given apart, and a configuration in use cannot be deleted."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.cli.conftest import Cloud

CONFIGURATION = "retention-policy"
CLUSTER = "configured"


def ok(cloud: Cloud, *args: str) -> dict[str, Any]:
    done = cloud.invoke(*args, "-o", "json")
    assert done.exit_code == 0, f"{args}: {done.stderr}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def broker_setting(bootstrap: str, key: str) -> str:
    """The value broker 0 reports for ``key`` (DescribeConfigs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return str(entries[key].value)


def test_a_cluster_runs_a_configuration_and_moves_to_its_next_revision(
    shared_cloud: Cloud,
) -> None:
    cloud = shared_cloud
    made = ok(
        cloud,
        "create-configuration",
        CONFIGURATION,
        "--config",
        "log.retention.ms=3600000",
        "--config",
        "message.max.bytes=2000000",
        "--description",
        "one hour",
    )
    assert (made["revision"], made["latest_revision"]) == (1, 1)
    assert made["arn"].startswith(f"arn:sluice:kafka:local:configuration/{CONFIGURATION}/")
    bad = cloud.invoke("create-configuration", "broken", "--config", "log.retention.ms=soon")
    assert bad.exit_code == 1
    assert "log.retention.ms" in bad.stderr
    assert cloud.invoke("describe-configuration", "broken").exit_code == 1, "nothing made"
    again = cloud.invoke("create-configuration", CONFIGURATION, "--config", "log.retention.ms=1")
    assert again.exit_code == 1
    assert "already exists" in again.stderr

    cluster = ok(
        cloud,
        "create-cluster",
        CLUSTER,
        "--brokers",
        "1",
        "--configuration",
        CONFIGURATION,
        "--config",
        "message.max.bytes=3000000",
        "--wait",
    )
    assert cluster["configuration_info"] == {"name": CONFIGURATION, "revision": 1}
    assert cluster["config"] == {"log.retention.ms": "3600000", "message.max.bytes": "3000000"}
    bootstrap = cluster["bootstrap_brokers"]
    assert broker_setting(bootstrap, "log.retention.ms") == "3600000"
    in_use = cloud.invoke("delete-configuration", CONFIGURATION, "--yes")
    assert in_use.exit_code == 1
    assert CLUSTER in in_use.stderr

    second = ok(
        cloud,
        "update-configuration",
        CONFIGURATION,
        "--config",
        "log.retention.ms=7200000",
        "--description",
        "two hours",
    )
    assert (second["revision"], second["server_properties"]) == (
        2,
        {"log.retention.ms": "7200000"},
    )
    first = ok(cloud, "describe-configuration", CONFIGURATION, "--revision", "1")
    assert first["server_properties"]["log.retention.ms"] == "3600000", "revisions never change"
    assert [r["description"] for r in first["revisions"]] == ["one hour", "two hours"]
    assert first["clusters"] == [CLUSTER]

    moved = ok(
        cloud, "update-cluster-config", CLUSTER, "--configuration", f"{CONFIGURATION}:2", "--wait"
    )
    assert moved["configuration_info"] == {"name": CONFIGURATION, "revision": 2}
    # revision 1's setting replaced; the one given at creation kept
    assert moved["config"] == {"log.retention.ms": "7200000", "message.max.bytes": "3000000"}
    assert broker_setting(bootstrap, "log.retention.ms") == "7200000"
    both = cloud.invoke(
        "update-cluster-config", CLUSTER, "--configuration", CONFIGURATION, "--config", "a=b"
    )
    assert both.exit_code == 2
    missing = cloud.invoke("update-cluster-config", CLUSTER, "--configuration", "nope:1")
    assert missing.exit_code == 1
    assert "nope" in missing.stderr
    listed = ok(cloud, "list-configurations")
    assert [c["name"] for c in listed["configurations"]] == [CONFIGURATION]

    assert cloud.invoke("delete-cluster", CLUSTER, "--yes", "--wait").exit_code == 0
    assert ok(cloud, "delete-configuration", CONFIGURATION, "--yes")["deleted"] is True
    gone = ok(cloud, "delete-configuration", CONFIGURATION, "--yes", "--if-exists")
    assert gone["existed"] is False
