"""Every command's output in table, json and yaml (the yaml parsed back equals the json), run
as a user runs them against a real control plane: read-only commands in the three formats one
after the other, commands that change something on three resources at once (one per format).
The last test checks that every command of the tree was covered here."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import wasmtime
import yaml

from billing.catalog import PricingModel
from billing.invoice import UsageRow, compute_invoice
from billing.ratecard import load_default
from cli.main import all_commands
from tests.cli.conftest import SHARED_CLUSTER, Cloud
from tests.conftest import REPO
from tests.controlplane.harness import wait_until
from wire.usage import Dimension

COVERED: dict[str, set[str]] = {}
"""command -> the formats checked."""
FORMATS = ("table", "json", "yaml")
CLUSTER = SHARED_CLUSTER
SMALL = {"table": "fmt-table", "json": "fmt-json", "yaml": "fmt-yaml"}
"""One 1-broker cluster per format, for the cluster commands that change something."""
TOPICS = {"table": "fmt-t-table", "json": "fmt-t-json", "yaml": "fmt-t-yaml"}
CONFIGURATIONS = {"table": "fmt-c-table", "json": "fmt-c-json", "yaml": "fmt-c-yaml"}


def parse(output: str, text: str) -> Any:
    if output == "json":
        return json.loads(text)
    return yaml.safe_load(text)


def parse_stream(output: str, text: str) -> list[Any]:
    if output == "json":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def run_ok(cloud: Cloud, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    done = cloud.run(*args, stdin=stdin)
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return done


def read_only(
    cloud: Cloud,
    *args: str,
    stream: bool = False,
    order: Callable[[Any], Any] | None = None,
    tries: int = 10,
) -> Any:
    """A command that changes nothing: its json and yaml carry the same data; the table is
    printed. (Asked again while something changed between the three answers, e.g. a
    replicator's state while its MirrorMaker starts; a stream's items in ``order`` when the
    command does not fix it.)"""
    name = args[0]
    table = run_ok(cloud, *args)
    assert table.stdout.strip() or stream, f"{name}: empty table"

    def reader(fmt: str, text: str) -> Any:
        if not stream:
            return parse(fmt, text)
        items = parse_stream(fmt, text)
        return sorted(items, key=order) if order else items

    for _ in range(tries):
        first = reader("json", run_ok(cloud, *args, "-o", "json").stdout)
        as_yaml = reader("yaml", run_ok(cloud, *args, "-o", "yaml").stdout)
        again = reader("json", run_ok(cloud, *args, "-o", "json").stdout)
        if first == as_yaml == again:
            break
        time.sleep(1)
    assert as_yaml == first, f"{name}: yaml and json differ"
    COVERED.setdefault(name, set()).update(FORMATS)
    return first


def each_format(
    cloud: Cloud, make_args: Callable[[str], list[str]], stdin: str = ""
) -> dict[str, subprocess.CompletedProcess[str]]:
    """A command that changes something, once per format (on its own resource), at once."""
    with ThreadPoolExecutor(len(FORMATS)) as pool:
        futures = {
            fmt: pool.submit(
                run_ok,
                cloud,
                *make_args(fmt),
                *(() if fmt == "table" else ("-o", fmt)),
                stdin=stdin,
            )
            for fmt in FORMATS
        }
        done = {fmt: f.result() for fmt, f in futures.items()}
    name = make_args("table")[0]
    COVERED.setdefault(name, set()).update(FORMATS)
    return done


def same_shape(done: dict[str, subprocess.CompletedProcess[str]], *, stream: bool = False) -> Any:
    """json and yaml of two runs on two resources: the same keys and value types."""
    reader = parse_stream if stream else parse
    as_json = reader("json", done["json"].stdout)
    as_yaml = reader("yaml", done["yaml"].stdout)
    assert same_fields(shape(as_json), shape(as_yaml)), (shape(as_json), shape(as_yaml))
    assert done["table"].stdout.strip() or done["table"].stderr.strip()
    return as_json, as_yaml


MAPS = {"config", "effective_config", "replica_hot_bytes", "server_properties", "tags"}
"""Fields whose keys are data (settings, broker ids), not field names."""


def shape(value: Any) -> Any:
    """Field names and value types (lists by their items' shape, maps as maps)."""
    if isinstance(value, dict):
        return {k: "map" if k in MAPS else shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return "list" if not value else [shape(value[0])]
    return type(value).__name__


def same_fields(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_fields(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return a == "list" or b == "list" or same_fields(a[0], b[0])
    return bool(a == b or "list" in (a, b))


@pytest.fixture(scope="module")
def small(shared_cloud: Cloud) -> Cloud:
    """Three 1-broker clusters, one per format; created here (create-cluster covered)."""
    done = each_format(
        shared_cloud, lambda fmt: ["create-cluster", SMALL[fmt], "--brokers", "1", "--wait"]
    )
    as_json, as_yaml = same_shape(done)
    assert as_json["state"] == as_yaml["state"] == "ACTIVE"
    assert "ACTIVE" in done["table"].stdout
    return shared_cloud


def test_control_plane_commands(shared_cloud: Cloud, tmp_path: Path) -> None:
    up = read_only(shared_cloud, "up")
    assert up["started"] is False
    assert up["home"] == str(shared_cloud.home)
    status = read_only(shared_cloud, "status")
    assert status["running"] is True
    assert status["pid"] == up["pid"]
    empty = tmp_path / "empty-home"
    down = read_only(shared_cloud, "down", "--home", str(empty))
    assert down == {"home": str(empty), "was_running": False, "pid": 0}


def test_terraform_config(shared_cloud: Cloud, tmp_path: Path) -> None:
    """The CLI configuration as a table (the text alone, for a file) and as fields; the same
    as the provider's own `cli-config` prints: tests/terraform/test_install.py."""
    shown = read_only(shared_cloud, "terraform-config")
    assert shown["provider_dir"] == str(Path(sys.executable).parent)
    assert f'"sluice/sluice" = "{shown["provider_dir"]}"' in shown["cli_config"]
    assert shared_cloud.run("terraform-config").stdout == shown["cli_config"]
    mirror = read_only(shared_cloud, "terraform-config", "--mirror", str(tmp_path))
    assert mirror["provider_dir"] == str(tmp_path.resolve())
    assert "filesystem_mirror" in mirror["cli_config"]


def test_cluster_reads(small: Cloud) -> None:
    described = read_only(small, "describe-cluster", CLUSTER)
    assert described["state"] == "ACTIVE"
    assert described["log_dir"].startswith(str(small.home / "logs" / "clusters"))
    assert all(b["log_path"].startswith(described["log_dir"]) for b in described["brokers"])
    table = small.run("describe-cluster", CLUSTER).stdout
    assert re.search(rf"^logs: +{re.escape(described['log_dir'])} ", table, re.M)
    listed = read_only(small, "list-clusters")
    assert {c["name"] for c in listed["clusters"]} >= {CLUSTER, *SMALL.values()}
    bootstrap = read_only(small, "get-bootstrap-brokers", CLUSTER)
    assert bootstrap["bootstrap_brokers"] == described["bootstrap_brokers"]
    assert bootstrap["addresses"] == [b["address"] for b in described["brokers"]]
    assert (
        small.run("get-bootstrap-brokers", CLUSTER).stdout == described["bootstrap_brokers"] + "\n"
    )
    ca = read_only(small, "get-ca-cert", CLUSTER)
    assert ca["pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert ca["pem"] == (small.home / "ca" / "ca.crt").read_text()
    assert small.run("get-ca-cert", CLUSTER).stdout == ca["pem"], "table: the PEM alone"
    registry = read_only(small, "get-schema-registry-url", CLUSTER)
    url = registry["schema_registry_url"]
    assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/clusters/{CLUSTER}", url), registry
    missing = small.run("get-ca-cert", "no-such-cluster")
    assert missing.returncode == 1
    assert "no-such-cluster" in missing.stderr


def test_use_cluster(small: Cloud) -> None:
    done = each_format(small, lambda fmt: ["use-cluster", CLUSTER])
    as_json, as_yaml = same_shape(done)
    assert (
        as_json
        == as_yaml
        == {
            "cluster": CLUSTER,
            "source": f"`cloudctl use-cluster` ({small.home / 'context.json'})",
        }
    )
    shown = read_only(small, "use-cluster")
    assert shown["cluster"] == CLUSTER
    listed = small.run("list-topics", "-o", "json")  # no --cluster: the chosen one
    assert listed.returncode == 0, listed.stderr
    assert small.run("use-cluster", "--clear").returncode == 0
    assert small.run("list-topics").returncode == 2


def test_cluster_changes(small: Cloud) -> None:
    scaled = same_shape(
        each_format(
            small,
            lambda fmt: [
                "update-broker-count",
                SMALL[fmt],
                "--brokers",
                "1",
                "--config",
                "log.retention.ms=3600000",
                "--wait",
            ],
        )
    )
    assert all(c["config"] == {"log.retention.ms": "3600000"} for c in scaled)
    configured = same_shape(
        each_format(
            small,
            lambda fmt: [
                "update-cluster-config",
                SMALL[fmt],
                "--config",
                "log.retention.ms=7200000",
                "--wait",
            ],
        )
    )
    assert all(c["config"] == {"log.retention.ms": "7200000"} for c in configured)
    rebooted = same_shape(
        each_format(small, lambda fmt: ["reboot-broker", SMALL[fmt], "--broker", "0", "--wait"])
    )
    assert all((c["state"], c["operation"]) == ("ACTIVE", "") for c in rebooted)
    secured = same_shape(
        each_format(
            small,
            lambda fmt: [
                "update-cluster-security",
                SMALL[fmt],
                "--client-auth",
                "none",
                "--client-auth",
                "scram",
                "--wait",
            ],
        )
    )
    assert all(c["client_auth"] == ["NONE", "SCRAM"] for c in secured)

    ops = read_only(small, "list-operations", SMALL["json"])["operations"]
    assert [(o["type"], o["state"]) for o in ops] == [
        ("CREATE", "COMPLETED"),
        ("UPDATE_BROKER_COUNT", "COMPLETED"),
        ("UPDATE_CONFIG", "COMPLETED"),
        ("REBOOT_BROKER", "COMPLETED"),
        ("UPDATE_SECURITY", "COMPLETED"),
    ]
    assert ops[1]["detail"] == "1 -> 1 brokers, log.retention.ms=3600000"
    assert ops[3]["detail"] == "broker 0"
    assert all(o["ended_at"] >= o["started_at"] for o in ops)
    one = read_only(small, "describe-operation", ops[3]["id"])
    assert one == ops[3]
    wrong = small.run("describe-operation", ops[3]["id"], "--cluster", CLUSTER)
    assert wrong.returncode == 1
    assert "not 'shared'" in wrong.stderr


def test_logs(small: Cloud) -> None:
    lines = read_only(small, "logs", SMALL["json"], "--broker", "0", "--tail", "5", stream=True)
    assert len(lines) == 5
    assert set(lines[0]) == {"broker_id", "time", "line"}
    assert all(line["broker_id"] == 0 for line in lines)
    merged = small.run("logs", CLUSTER, "--since", "-1h", "--tail", "6").stdout.splitlines()
    assert len(merged) == 6
    assert all(line.startswith("broker-") for line in merged)
    starts = small.run("logs", SMALL["json"], "--since", "2000-01-01T00:00:00Z", "-o", "json")
    started = [json.loads(x) for x in starts.stdout.splitlines()]
    assert sum("--- starting: " in x["line"] for x in started) >= 3, "create, roll, reboot"
    assert not any("secret" in x["line"] for x in started), "credentials are not logged"
    future = small.run("logs", SMALL["json"], "--since", "2999-01-01T00:00:00Z")
    assert (future.returncode, future.stdout) == (0, "")
    missing = small.run("logs", CLUSTER, "--broker", "7")
    assert missing.returncode == 1
    assert "has no broker 7" in missing.stderr

    with (
        tempfile.TemporaryFile("w+") as errors,
        subprocess.Popen(
            small.command("logs", SMALL["table"], "--broker", "0", "--tail", "0", "--follow"),
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=small.environ,
        ) as follow,
    ):
        try:
            time.sleep(0.5)
            run_ok(small, "reboot-broker", SMALL["table"], "--broker", "0", "--wait")
            assert follow.stdout is not None
            seen = ""
            deadline = time.monotonic() + 30
            while "--- starting: " not in seen and time.monotonic() < deadline:
                seen += follow.stdout.readline()
            assert "--- starting: " in seen, "the reboot's lines come as they are written"
            # SIGQUIT prints every thread's stack (the stream's reader among them) to stderr
            follow.send_signal(signal.SIGQUIT)
            dump = ""
            deadline = time.monotonic() + 30
            while "cli/client.py" not in dump and time.monotonic() < deadline:
                time.sleep(0.2)
                errors.seek(0)
                dump = errors.read()
            assert "Thread" in dump, dump
            assert "cli/client.py" in dump, dump
            assert follow.poll() is None, "cloudctl goes on after SIGQUIT"
        finally:
            follow.terminate()


def test_topic_commands(small: Cloud) -> None:
    created = same_shape(
        each_format(
            small,
            lambda fmt: ["create-topic", "--cluster", CLUSTER, TOPICS[fmt], "--partitions", "1"],
        )
    )
    for topic in created:
        assert topic["replication_factor"] == 3, "MSK's default on 3 brokers"
        assert topic["config"] == {"min.insync.replicas": "2"}, "RF-1 with 3 replicas"
        assert set(topic["partition_details"][0]["replica_hot_bytes"]) == {"0", "1", "2"}
    one = run_ok(small, "create-topic", "--cluster", SMALL["json"], "single", "-o", "json")
    assert (json.loads(one.stdout)["replication_factor"], json.loads(one.stdout)["config"]) == (
        1,
        {},
    )
    refused = small.run("create-topic", "--cluster", CLUSTER, "x", "--replication-factor", "0")
    assert refused.returncode == 1
    assert "each replica of a partition lives on its own broker" in refused.stderr

    described = read_only(small, "describe-topic", "--cluster", CLUSTER, TOPICS["json"])
    assert described["hot_bytes_per_replica"] * 3 == described["hot_bytes"] or (
        described["hot_bytes"] == 0
    )
    listed = read_only(small, "list-topics", "--cluster", CLUSTER)
    assert set(TOPICS.values()) <= {t["name"] for t in listed["topics"]}

    added = same_shape(
        each_format(
            small,
            lambda fmt: ["add-partitions", "--cluster", CLUSTER, TOPICS[fmt], "--total", "2"],
        )
    )
    assert all(t["partitions"] == 2 for t in added)
    fewer = small.run("add-partitions", "--cluster", CLUSTER, TOPICS["json"], "--total", "1")
    assert fewer.returncode == 1
    assert "has 2 partition(s)" in fewer.stderr
    altered = same_shape(
        each_format(
            small,
            lambda fmt: [
                "alter-topic-config",
                "--cluster",
                CLUSTER,
                TOPICS[fmt],
                "--config",
                "retention.ms=3600000",
            ],
        )
    )
    assert all(t["config"]["retention.ms"] == "3600000" for t in altered)
    legacy = small.run(
        "alter-topic-config", "--cluster", CLUSTER, TOPICS["json"], "--set", "retention.ms=60000"
    )
    assert legacy.returncode == 0, legacy.stderr
    assert "--set is deprecated" in legacy.stderr

    orphans = read_only(small, "find-orphans", "--cluster", CLUSTER)
    assert orphans["count"] == 0


def group_consume(fmt: str) -> list[str]:
    return ["consume", "--cluster", CLUSTER, TOPICS["json"], "--group", f"fmt-g-{fmt}", "-n", "20"]


def test_records_and_groups(small: Cloud) -> None:
    lines = "".join(f"record-{i}\n" for i in range(20))
    produced = same_shape(
        each_format(small, lambda fmt: ["produce", "--cluster", CLUSTER, TOPICS[fmt]], stdin=lines)
    )
    assert all(p["produced"] == 20 for p in produced)
    records = read_only(
        small,
        "consume",
        "--cluster",
        CLUSTER,
        TOPICS["json"],
        "--exit",
        "--offset",
        "beginning",
        stream=True,
        order=lambda r: (r["partition"], r["offset"]),
    )
    assert sorted(r["value"] for r in records) == sorted(f"record-{i}" for i in range(20))
    assert set(records[0]) == {"topic", "partition", "offset", "timestamp", "key", "value"}

    with ThreadPoolExecutor(len(FORMATS)) as pool:  # a group per format, offsets committed
        list(pool.map(lambda fmt: run_ok(small, *group_consume(fmt)), FORMATS))

    def listed() -> dict[str, Any] | None:
        found = json.loads(run_ok(small, "list-groups", "--cluster", CLUSTER, "-o", "json").stdout)
        names = {g["group_id"] for g in found["groups"]}
        return found if {f"fmt-g-{f}" for f in FORMATS} <= names else None

    wait_until(listed, 30, "the groups listed")
    read_only(small, "list-groups", "--cluster", CLUSTER)

    def committed() -> dict[str, Any] | None:
        group = json.loads(
            run_ok(small, "describe-group", "--cluster", CLUSTER, "fmt-g-json", "-o", "json").stdout
        )
        done = sum(p["committed_offset"] for p in group["partitions"] if p["committed_offset"] > 0)
        return group if done == 20 and group["state"] == "Empty" else None

    wait_until(committed, 30, "the group's commits")
    group = read_only(small, "describe-group", "--cluster", CLUSTER, "fmt-g-json")
    assert group["total_lag"] == 0
    reset = read_only(
        small,
        "reset-offsets",
        "--cluster",
        CLUSTER,
        "fmt-g-json",
        "--topic",
        TOPICS["json"],
        "--to-earliest",
        "--dry-run",
    )
    assert reset["dry_run"] is True
    assert {o["new_offset"] for o in reset["offsets"]} == {0}
    deleted = same_shape(
        each_format(small, lambda fmt: ["delete-group", "--cluster", CLUSTER, f"fmt-g-{fmt}"])
    )
    assert all(d["deleted"] for d in deleted)


TRANSFORM_IN = "fmt-x-in"
WAT_IDENTITY = REPO / "transforms" / "examples" / "wat" / "identity.wat"


def test_transform_commands(shared_cloud: Cloud, tmp_path: Path) -> None:
    """One transform per format (the WAT identity: compiled here, nothing to build) on one
    input topic, each to its own output."""
    wasm = tmp_path / "identity.wasm"
    wasm.write_bytes(wasmtime.wat2wasm(WAT_IDENTITY.read_text()))
    for topic in (TRANSFORM_IN, *(f"fmt-x-out-{fmt}" for fmt in FORMATS)):
        run_ok(shared_cloud, "create-topic", "--cluster", CLUSTER, topic, "--partitions", "1")
    deployed = same_shape(
        each_format(
            shared_cloud,
            lambda fmt: [
                "deploy-transform", "--cluster", CLUSTER, "--name", f"fmt-x-{fmt}",
                "--file", str(wasm), "--input-topic", TRANSFORM_IN,
                "--output-topic", f"fmt-x-out-{fmt}", "--var", "K=V",
            ],
        )
    )  # fmt: skip
    assert all((t["version"], t["abi"], t["env"]) == (1, "batch", {"K": "V"}) for t in deployed)

    def running() -> bool:
        found = json.loads(
            run_ok(shared_cloud, "list-transforms", "--cluster", CLUSTER, "-o", "json").stdout
        )
        states = {t["name"]: t["state"] for t in found["transforms"]}
        return all(states.get(f"fmt-x-{fmt}") == "RUNNING" for fmt in FORMATS)

    wait_until(running, 120, "the transforms running")
    listed = read_only(shared_cloud, "list-transforms", "--cluster", CLUSTER)
    assert {f"fmt-x-{fmt}" for fmt in FORMATS} <= {t["name"] for t in listed["transforms"]}
    described = read_only(shared_cloud, "describe-transform", "--cluster", CLUSTER, "fmt-x-json")
    assert [p["state"] for p in described["partitions"]] == ["PARTITION_RUNNING"]
    assert (
        read_only(shared_cloud, "transform-logs", "--cluster", CLUSTER, "fmt-x-json", stream=True)
        == []
    ), "the WAT identity logs nothing"
    paused = same_shape(
        each_format(
            shared_cloud,
            lambda fmt: ["pause-transform", "--cluster", CLUSTER, f"fmt-x-{fmt}"],
        )
    )
    assert all(t["state"] == "PAUSED" for t in paused)
    resumed = same_shape(
        each_format(
            shared_cloud,
            lambda fmt: ["resume-transform", "--cluster", CLUSTER, f"fmt-x-{fmt}"],
        )
    )
    assert all(t["state"] != "PAUSED" for t in resumed)
    deleted = same_shape(
        each_format(
            shared_cloud,
            lambda fmt: ["delete-transform", "--cluster", CLUSTER, f"fmt-x-{fmt}"],
        )
    )
    assert all((d["existed"], d["deleted"]) == (True, True) for d in deleted)


def test_private_endpoint_commands(small: Cloud) -> None:
    """One endpoint per format, each on its own 1-broker cluster (an endpoint is an operation
    of its cluster: one at a time); their first mode is none, so PLAINTEXT endpoints."""
    created = same_shape(
        each_format(
            small,
            lambda fmt: ["create-private-endpoint", "--cluster", SMALL[fmt], "pe", "--wait"],
        )
    )
    assert all((e["state"], e["security_protocol"]) == ("ACTIVE", "PLAINTEXT") for e in created)
    assert created[0]["address"] != created[1]["address"], "an address per endpoint"
    described = read_only(small, "describe-private-endpoint", "--cluster", SMALL["json"], "pe")
    assert described["listener_name"] == "ENDPOINT_PE"
    listed = read_only(small, "list-private-endpoints", "--cluster", SMALL["json"])
    assert listed["endpoints"] == [described]
    bootstrap = json.loads(
        run_ok(
            small, "get-bootstrap-brokers", SMALL["json"], "--endpoint", "pe", "-o", "json"
        ).stdout
    )
    assert bootstrap["bootstrap_brokers"] == described["bootstrap_brokers"]
    assert bootstrap["endpoint"] == "pe"
    deleted = same_shape(
        each_format(
            small,
            lambda fmt: ["delete-private-endpoint", "--cluster", SMALL[fmt], "pe", "--wait"],
        )
    )
    assert all((d["existed"], d["deleted"]) == (True, True) for d in deleted)
    assert read_only(small, "list-private-endpoints", "--cluster", SMALL["json"])["endpoints"] == []


def test_replicator_commands(small: Cloud) -> None:
    """One replicator per format, from its 1-broker cluster to the shared cluster (not
    waited for: MirrorMaker's JVMs start in the background and stop when deleted)."""
    created = same_shape(
        each_format(
            small,
            lambda fmt: [
                "create-replicator",
                f"rep-{fmt}",
                "--source",
                SMALL[fmt],
                "--target",
                CLUSTER,
                "--topics",
                "none-yet",
            ],
        )
    )
    assert all(r["target_cluster"] == CLUSTER for r in created)
    described = read_only(small, "describe-replicator", "rep-json")
    assert (described["source_cluster"], described["topics"]) == (SMALL["json"], "none-yet")
    listed = read_only(small, "list-replicators")
    assert {"rep-table", "rep-json", "rep-yaml"} <= {r["name"] for r in listed["replicators"]}
    deleted = same_shape(
        each_format(small, lambda fmt: ["delete-replicator", f"rep-{fmt}", "--yes"])
    )
    assert all(d["deleted"] for d in deleted)


def test_configuration_and_tag_commands(small: Cloud) -> None:
    made = same_shape(
        each_format(
            small,
            lambda fmt: [
                "create-configuration",
                CONFIGURATIONS[fmt],
                "--config",
                "log.retention.ms=5400000",
            ],
        )
    )
    assert all(c["revision"] == 1 for c in made)
    updated = same_shape(
        each_format(
            small,
            lambda fmt: [
                "update-configuration",
                CONFIGURATIONS[fmt],
                "--config",
                "log.retention.ms=5500000",
                "--description",
                "second",
            ],
        )
    )
    assert all(c["server_properties"] == {"log.retention.ms": "5500000"} for c in updated)
    one = read_only(small, "describe-configuration", CONFIGURATIONS["json"], "--revision", "1")
    assert one["server_properties"] == {"log.retention.ms": "5400000"}
    listed = read_only(small, "list-configurations")["configurations"]
    assert {c["name"] for c in listed} >= set(CONFIGURATIONS.values())
    moved = same_shape(
        each_format(
            small,
            lambda fmt: [
                "update-cluster-config",
                SMALL[fmt],
                "--configuration",
                CONFIGURATIONS[fmt],
                "--wait",
            ],
        )
    )
    assert all(c["configuration_info"]["revision"] == 2 for c in moved)
    tagged = same_shape(
        each_format(small, lambda fmt: ["tag-cluster", SMALL[fmt], "--tag", f"format={fmt}"])
    )
    assert [c["tags"] for c in tagged] == [{"format": "json"}, {"format": "yaml"}]


def test_deletes(small: Cloud) -> None:
    topics = same_shape(
        each_format(small, lambda fmt: ["delete-topic", "--cluster", CLUSTER, TOPICS[fmt]])
    )
    assert all((t["existed"], t["deleted"]) == (True, True) for t in topics)
    gone = small.run("delete-topic", "--cluster", CLUSTER, TOPICS["json"], "-o", "json")
    assert gone.returncode == 1
    idempotent = small.run(
        "delete-topic", "--cluster", CLUSTER, TOPICS["json"], "--if-exists", "-o", "json"
    )
    assert idempotent.returncode == 0
    assert json.loads(idempotent.stdout)["existed"] is False
    clusters = same_shape(each_format(small, lambda fmt: ["delete-cluster", SMALL[fmt], "--wait"]))
    assert all(c["deleted"] and c["operation_id"].startswith("op-") for c in clusters)
    ops = json.loads(run_ok(small, "list-operations", SMALL["yaml"], "-o", "json").stdout)
    assert ops["operations"][-1]["type"] == "DELETE"
    assert ops["operations"][-1]["state"] == "COMPLETED"
    assert ops["operations"][-1]["state_message"].startswith("deleting bucket "), (
        "the delete's steps are shown: brokers stopped one by one, data, then the bucket"
    )
    configurations = same_shape(
        each_format(small, lambda fmt: ["delete-configuration", CONFIGURATIONS[fmt], "--yes"])
    )
    assert all(c["deleted"] for c in configurations)


def test_rotate_token(cloud: Cloud) -> None:
    """On a control plane of its own (the shared one's clients keep their token); a grace
    period so that the three formats may run at once."""
    done = each_format(cloud, lambda fmt: ["rotate-token", "--grace", "60"])
    as_json, _ = same_shape(done)
    assert as_json["token_file"] == str(cloud.home / "token")
    assert as_json["previous_valid_until"].endswith("Z")
    token = (cloud.home / "token").read_text().strip()
    assert all(token not in d.stdout + d.stderr for d in done.values()), "the token was printed"


def test_user_and_acl_commands(shared_cloud: Cloud) -> None:
    """On a 1-broker cluster with a scram listener (its brokers enforce ACLs)."""
    cloud, name = shared_cloud, "fmt-secured"
    run_ok(cloud, "create-cluster", name, "--brokers", "1", "--client-auth", "scram", "--wait")
    try:
        users = same_shape(
            each_format(
                cloud,
                lambda fmt: ["create-user", "--cluster", name, f"u-{fmt}", "--password-stdin"],
                stdin="a-Password-123",
            )
        )
        assert all(u["credentials"][0]["mechanism"] == "SCRAM-SHA-512" for u in users)
        listed = read_only(cloud, "list-users", "--cluster", name, order=None)
        assert {"u-json", "u-yaml", "u-table"} <= {u["name"] for u in listed["users"]}
        same_shape(
            each_format(
                cloud,
                lambda fmt: [
                    "create-acl",
                    "--cluster",
                    name,
                    "--principal",
                    f"User:u-{fmt}",
                    "--operation",
                    "read",
                    "--topic",
                    f"t-{fmt}",
                ],
            )
        )
        acls = read_only(cloud, "list-acls", "--cluster", name)
        assert len(acls["acls"]) == 3
        same_shape(
            each_format(
                cloud,
                lambda fmt: [
                    "delete-acl",
                    "--cluster",
                    name,
                    "--principal",
                    f"User:u-{fmt}",
                    "--yes",
                ],
            )
        )
        same_shape(
            each_format(cloud, lambda fmt: ["delete-user", "--cluster", name, f"u-{fmt}", "--yes"])
        )
    finally:
        cloud.run("delete-cluster", name, "--yes", "--if-exists", "--wait")


def test_billing_commands(shared_cloud: Cloud, tmp_path: Path) -> None:
    """Without running the pipeline (tests/cli/test_billing.py does, with exact figures):
    usage of a past day (none), an invoice as the pipeline writes it into the output, the
    runs (none: the tests' control planes have no schedule), a chart. -o csv:
    test_billing.py."""
    cloud, month = shared_cloud, "2025-01"
    rows = [
        UsageRow(
            CLUSTER, PricingModel.PROVISIONED, Dimension.BROKER_MS, "kafka.m5.large", 3 * 3_600_000
        )
    ]
    written = compute_invoice(month, rows, load_default()).to_json()
    invoices = cloud.home / "billing" / "invoices"
    invoices.mkdir(parents=True, exist_ok=True)
    (invoices / f"{month}.json").write_text(json.dumps(written))
    usage = read_only(cloud, "usage", "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-02")
    assert (usage["rows"], usage["from"], usage["by"]) == ([], "2025-01-01T00:00:00Z", "hour")
    found = read_only(cloud, "invoice", "--month", month, "--cluster", CLUSTER)
    assert (found["total"], found["subtotals"]) == (written["total"], written["subtotals"])
    listed = read_only(cloud, "list-invoices")
    assert {"month": month, "total": written["total"], "currency": "USD", "clusters": 1,
            "open": False} in listed["invoices"]  # fmt: skip
    assert read_only(cloud, "billing", "list-runs") == {"runs": []}
    charts = same_shape(
        each_format(
            cloud,
            lambda fmt: ["cost-chart", "--month", month, "--out", str(tmp_path / f"{fmt}.png")],
        )
    )
    assert all(chart["total"] == "0.00" for chart in charts)  # no usage in January 2025
    assert all((tmp_path / f"{fmt}.png").stat().st_size for fmt in FORMATS)


def test_every_command_was_checked_in_every_format() -> None:
    assert {name: set(FORMATS) for name in all_commands()} == COVERED
