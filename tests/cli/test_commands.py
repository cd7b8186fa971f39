"""cloudctl against a control plane it started itself (`cloudctl up`), per the CLI contract."""

from __future__ import annotations

import json
import re

from tests.cli.conftest import Cloud
from tests.cli.test_output import BROKER_KEYS, CLUSTER_KEYS
from tests.controlplane.harness import wait_until


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("cloudctl: error: ")
    return lines[0]


def table_line(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"{label}:"))


def test_up_is_idempotent_and_status_says_what_runs(cloud: Cloud) -> None:
    again = cloud.run("up")
    assert again.returncode == 0
    assert "already running" in again.stdout
    status = cloud.run("status", "-o", "json")
    assert status.returncode == 0
    info = json.loads(status.stdout)
    assert info["running"] is True
    assert info["endpoint"] == cloud.endpoint
    assert info["home"] == str(cloud.home)
    assert info["object_store"]["kind"] == "embedded"
    assert info["object_store"]["data_dir"] == str(cloud.home / "s3")
    assert info["s3_note"].startswith(f"embedded S3 at {info['object_store']['endpoint']}")
    assert (cloud.home / "token").stat().st_mode & 0o777 == 0o600
    assert (cloud.home / "logs" / "controlplane.log").exists()
    table = cloud.run("status")
    assert "running" in table.stdout
    assert cloud.endpoint in table.stdout
    assert "object store:     embedded S3 at http://127.0.0.1:" in table.stdout

    def s3_answers() -> bool:
        now = json.loads(cloud.invoke("status", "-o", "json").stdout)["object_store"]
        return bool(now["answering"]) and now["pid"] > 0

    wait_until(s3_answers, 30, "the embedded S3 server answering")
    assert table_line(cloud.invoke("status").stdout, "object store").endswith(": answering")


def test_cluster_commands(cloud: Cloud) -> None:
    created = cloud.run("create-cluster", "clidemo", "--brokers", "2", "--wait", "-o", "json")
    assert created.returncode == 0, created.stderr
    cluster = json.loads(created.stdout)
    assert set(cluster) == CLUSTER_KEYS
    assert set(cluster["brokers"][0]) == BROKER_KEYS
    assert cluster["state"] == "ACTIVE"
    assert [b["state"] for b in cluster["brokers"]] == ["RUNNING", "RUNNING"]
    assert "CREATING" in created.stderr, "--wait shows progress on stderr"
    assert "ACTIVE" in created.stderr

    bootstrap = cloud.run("get-bootstrap-brokers", "clidemo")
    assert bootstrap.returncode == 0
    assert bootstrap.stdout == cluster["bootstrap_brokers"] + "\n"
    assert bootstrap.stdout.strip() == ",".join(b["address"] for b in cluster["brokers"])
    assert bootstrap.stderr == ""

    described = cloud.invoke("describe-cluster", "clidemo")
    assert described.exit_code == 0
    assert "ACTIVE" in described.stdout
    assert cluster["bootstrap_brokers"] in described.stdout
    bucket = cluster["object_store"]["bucket"]
    assert bucket.startswith("sluice-clidemo-")
    assert cluster["object_store"]["endpoint"].startswith("http://127.0.0.1:")
    store = f"bucket {bucket} at {cluster['object_store']['endpoint']}"
    assert re.search(rf"^object store: +{re.escape(store)}$", described.stdout, re.M)

    listed = json.loads(cloud.invoke("list-clusters", "-o", "json").stdout)
    assert [c["name"] for c in listed["clusters"]] == ["clidemo"]
    assert listed["clusters"][0]["object_store"] == cluster["object_store"]
    assert "clidemo" in cloud.invoke("list-clusters").stdout

    duplicate = cloud.invoke("create-cluster", "clidemo")
    assert duplicate.exit_code == 1
    assert "already exists" in one_error_line(duplicate.stderr)
    bad = cloud.invoke("create-cluster", "no_underscores")
    assert bad.exit_code == 1
    assert "1-64" in one_error_line(bad.stderr)
    bad_config = cloud.invoke("create-cluster", "x", "--config", "log.retention.ms=soon")
    assert "log.retention.ms" in one_error_line(bad_config.stderr)
    missing = cloud.invoke("describe-cluster", "nope")
    assert missing.exit_code == 1
    assert "cloudctl list-clusters" in one_error_line(missing.stderr)

    scaled = cloud.invoke(
        "update-broker-count", "clidemo", "--brokers", "3", "--wait", "-o", "json"
    )
    assert scaled.exit_code == 0, scaled.stderr
    assert len(json.loads(scaled.stdout)["brokers"]) == 3
    scale_in = cloud.invoke(
        "update-broker-count", "clidemo", "--brokers", "2", "--wait", "-o", "json"
    )
    assert scale_in.exit_code == 0, scale_in.stderr
    assert [b["id"] for b in json.loads(scale_in.stdout)["brokers"]] == [0, 1]
    assert "scale-in to 2 broker(s)" in scale_in.stderr, "--wait shows the scale-in's progress"

    configured = cloud.invoke(
        "update-cluster-config",
        "clidemo",
        "--set",
        "log.retention.ms=3600000",
        "--wait",
        "-o",
        "json",
    )
    assert configured.exit_code == 0, configured.stderr
    assert json.loads(configured.stdout)["config"] == {"log.retention.ms": "3600000"}
    assert "rolling restart" in configured.stderr


def test_topic_and_data_commands(cloud: Cloud) -> None:
    created = cloud.invoke(
        "create-topic", "--cluster", "clidemo", "orders", "--partitions", "2",
        "--config", "retention.ms=86400000", "-o", "json",
    )  # fmt: skip
    assert created.exit_code == 0, created.stderr
    topic = json.loads(created.stdout)
    assert (topic["name"], topic["partitions"]) == ("orders", 2)
    assert topic["config"] == {"retention.ms": "86400000"}

    listed = json.loads(cloud.invoke("list-topics", "--cluster", "clidemo", "-o", "json").stdout)
    assert [t["name"] for t in listed["topics"]] == ["orders"]
    described = cloud.invoke("describe-topic", "--cluster", "clidemo", "orders")
    assert "PARTITION" in described.stdout
    assert "LEADER" in described.stdout
    assert "ISR" in described.stdout
    replicated = cloud.invoke(
        "create-topic", "--cluster", "clidemo", "pairs", "--replication-factor", "2", "-o", "json"
    )
    assert replicated.exit_code == 0, replicated.stderr

    def in_sync() -> dict | None:  # type: ignore[type-arg]
        out = cloud.invoke("describe-topic", "--cluster", "clidemo", "pairs", "-o", "json")
        topic = json.loads(out.stdout)
        parts = topic["partition_details"]
        return topic if parts and all(len(p["isr"]) == 2 for p in parts) else None

    pairs = wait_until(in_sync, 30, "both replicas of 'pairs' in sync")
    assert pairs["replication_factor"] == 2
    for part in pairs["partition_details"]:
        assert sorted(part["replicas"]) == [0, 1]
        assert part["leader"] in part["replicas"]
        assert (part["under_replicated"], part["offline"]) == (False, False)
    table = cloud.invoke("describe-topic", "--cluster", "clidemo", "pairs").stdout
    assert table_line(table, "under-replicated").endswith("none")
    assert cloud.invoke("delete-topic", "--cluster", "clidemo", "pairs").exit_code == 0

    produced = cloud.run("produce", "--cluster", "clidemo", "orders", stdin="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    assert "produced 3" in produced.stderr
    consumed = cloud.run("consume", "--cluster", "clidemo", "orders", "--exit")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == ["one", "three", "two"]

    altered = cloud.invoke(
        "alter-topic-config",
        "--cluster",
        "clidemo",
        "orders",
        "--set",
        "retention.ms=1000",
        "-o",
        "json",
    )
    assert altered.exit_code == 0, altered.stderr
    assert json.loads(altered.stdout)["config"]["retention.ms"] == "1000"

    no_topic = cloud.run("produce", "--cluster", "clidemo", "nope", stdin="x\n")
    assert no_topic.returncode == 1
    assert "cloudctl list-topics" in one_error_line(no_topic.stderr)

    deleted = cloud.invoke("delete-topic", "--cluster", "clidemo", "orders")
    assert deleted.exit_code == 0, deleted.stderr
    listed = json.loads(cloud.invoke("list-topics", "--cluster", "clidemo", "-o", "json").stdout)
    assert listed["topics"] == []


def test_delete_cluster_twice(cloud: Cloud) -> None:
    first = cloud.run("delete-cluster", "clidemo", "--wait")
    assert first.returncode == 0, first.stderr
    assert "deleted" in first.stdout
    again = cloud.run("delete-cluster", "clidemo")
    assert again.returncode == 1, "a missing resource is an error"
    assert "not found" in one_error_line(again.stderr)
    idempotent = cloud.run("delete-cluster", "clidemo", "--if-exists")
    assert idempotent.returncode == 0
    assert "nothing to delete" in idempotent.stderr
    assert json.loads(cloud.invoke("list-clusters", "-o", "json").stdout) == {"clusters": []}
