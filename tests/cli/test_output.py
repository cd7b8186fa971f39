"""Output formatting and error lines, without a control plane."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from google.protobuf.timestamp_pb2 import Timestamp

from cli.client import ApiError, Env, explain
from cli.main import cloudctl
from cli.output import (
    CliError,
    cluster_json,
    orphans_json,
    orphans_text,
    table,
    topic_json,
    topic_table,
    topics_table,
)
from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import topics_pb2 as tpb
from tests.conftest import free_port

CLUSTER_KEYS = {
    "name",
    "cluster_id",
    "state",
    "state_message",
    "operation",
    "broker_count",
    "broker_type",
    "bootstrap_brokers",
    "client_auth",
    "brokers",
    "config",
    "object_store",
    "tags",
    "storage_mode",
    "configuration_info",
    "created_at",
    "updated_at",
    "log_dir",
    "operation_id",
}
BROKER_KEYS = {
    "id",
    "host",
    "port",
    "address",
    "state",
    "pid",
    "restarts",
    "data_dir",
    "log_path",
    "listeners",
}


def test_cluster_json_is_stable_even_for_empty_values() -> None:
    cluster = pb.Cluster(
        name="demo",
        state=pb.CLUSTER_STATE_ACTIVE,
        brokers=[pb.Broker(id=0, host="127.0.0.1", port=9092, state=pb.BROKER_STATE_RUNNING)],
    )
    out = cluster_json(cluster)
    assert set(out) == CLUSTER_KEYS
    assert set(out["brokers"][0]) == BROKER_KEYS
    assert (out["state"], out["brokers"][0]["state"]) == ("ACTIVE", "RUNNING")
    assert out["brokers"][0]["address"] == "127.0.0.1:9092"
    assert out["created_at"] == ""
    assert out["object_store"] == {"endpoint": "", "bucket": ""}


def test_table_aligns_columns() -> None:
    assert table(["A", "LONGER"], [("xx", 1), ("y", 22)]).splitlines() == [
        "A   LONGER",
        "xx  1",
        "y   22",
    ]


def test_topic_shows_leader_replicas_and_isr_per_partition() -> None:
    topic = tpb.Topic(
        cluster="c",
        name="t",
        partitions=3,
        replication_factor=3,
        partition_details=[
            tpb.Partition(partition=0, leader=0, replicas=[0, 1, 2], isr=[0, 1, 2]),
            tpb.Partition(partition=1, leader=2, replicas=[1, 2, 0], isr=[2, 0]),
            tpb.Partition(partition=2, leader=-1, replicas=[2, 0, 1], isr=[]),
        ],
    )
    out = topic_json(topic, detail=True)
    assert out["partition_details"][1] == {
        "partition": 1,
        "leader": 2,
        "replicas": [1, 2, 0],
        "isr": [2, 0],
        "under_replicated": True,
        "offline": False,
        "remote_log_start_offset": -1,
        "tiered_bytes": 0,
        "tiered_segments": 0,
        "hot_bytes": 0,
        "replica_hot_bytes": {},
    }
    assert [(p["under_replicated"], p["offline"]) for p in out["partition_details"]] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    lines = topic_table(topic).splitlines()
    assert "under-replicated:" in next(line for line in lines if "under-replicated" in line)
    assert next(line for line in lines if "under-replicated" in line).endswith(
        "partition 1, partition 2"
    )
    assert lines[-4:] == [
        "PARTITION  LEADER  REPLICAS  ISR    HOT PER REPLICA",
        "0          0       0,1,2     0,1,2  0:0 B 1:0 B 2:0 B",
        "1          2       1,2,0     2,0    1:0 B 2:0 B 0:0 B",
        "2          none    2,0,1            2:0 B 0:0 B 1:0 B",
    ]


def test_topic_storage_in_json_and_tables() -> None:
    topic = tpb.Topic(
        cluster="c",
        name="history",
        partitions=2,
        replication_factor=1,
        hot_bytes=3 << 20,
        hot_bytes_per_replica=3 << 20,
        tiered_bytes=40_000,
        tiered_segments=2,
        partition_details=[
            tpb.Partition(
                partition=0,
                leader=0,
                replicas=[0],
                isr=[0],
                remote_log_start_offset=120,
                tiered_bytes=40_000,
                tiered_segments=2,
                hot_bytes=2 << 20,
                replica_hot_bytes={0: 2 << 20},
            ),
            tpb.Partition(
                partition=1,
                leader=0,
                replicas=[0],
                isr=[0],
                hot_bytes=1 << 20,
                replica_hot_bytes={0: 1 << 20},
            ),
        ],
    )
    listed = topic_json(topic, detail=False)
    assert (listed["hot_bytes"], listed["tiered_bytes"], listed["tiered_segments"]) == (
        3 << 20,
        40_000,
        2,
    )
    detail = topic_json(topic, detail=True)
    assert [
        (p["remote_log_start_offset"], p["tiered_bytes"], p["tiered_segments"])
        for p in detail["partition_details"]
    ] == [(120, 40_000, 2), (-1, 0, 0)]
    lines = topic_table(topic).splitlines()
    assert "storage:" in lines[6]
    assert lines[6].endswith(
        "3.0 MiB hot per replica, 3.0 MiB on all 1 replicas (local disk), 39.1 KiB tiered "
        "(2 segments in the object store)"
    )
    assert lines[-3:] == [
        "PARTITION  LEADER  REPLICAS  ISR  HOT PER REPLICA  REMOTE START  TIERED",
        "0          0       0         0    0:2.0 MiB        120           39.1 KiB in 2 segments",
        "1          0       0         0    0:1.0 MiB        -             -",
    ]
    assert detail["partition_details"][0]["replica_hot_bytes"] == {"0": 2 << 20}
    assert topics_table([topic]).splitlines()[1].endswith("3.0 MiB  39.1 KiB")


def test_orphans_report() -> None:
    found = tpb.FindOrphansResponse(
        bucket="sluice-t-1234abcd",
        prefix="cid/",
        orphans=[
            tpb.Orphan(key="cid/notes.txt", size=1, reason="unparseable"),
            tpb.Orphan(
                key="cid/t-x/0/seg.log",
                size=2048,
                reason="unknown segment",
                last_modified=Timestamp(seconds=1_800_000_000),
            ),
        ],
        total_bytes=2049,
        scanned=10,
        too_young=1,
    )
    out = orphans_json(found)
    assert out == {
        "bucket": "sluice-t-1234abcd",
        "prefix": "cid/",
        "orphans": [
            {"key": "cid/notes.txt", "size": 1, "reason": "unparseable", "last_modified": ""},
            {
                "key": "cid/t-x/0/seg.log",
                "size": 2048,
                "reason": "unknown segment",
                "last_modified": "2027-01-15T08:00:00Z",
            },
        ],
        "count": 2,
        "total_bytes": 2049,
        "scanned": 10,
        "too_young": 1,
        "deleted": False,
    }
    lines = orphans_text(found).splitlines()
    assert lines[0].split() == ["KEY", "SIZE", "REASON", "LAST", "MODIFIED"]
    assert lines[-1] == (
        "2 orphaned objects found (2.0 KiB) among 10 objects under s3://sluice-t-1234abcd/cid/; "
        "1 younger object left out (--min-age-seconds: an upload may be in flight)"
    )
    none = orphans_text(tpb.FindOrphansResponse(bucket="b", prefix="p/", scanned=1, deleted=True))
    assert none == "0 orphaned objects found (0 B) among 1 object under s3://b/p/"
    found.deleted = True
    assert orphans_text(found).splitlines()[-1].startswith("2 orphaned objects deleted (2.0 KiB)")


UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    ("code", "reason", "details", "expected"),
    [
        (
            UNAVAILABLE,
            epb.CONTROL_PLANE_UNAVAILABLE,
            "failed to connect",
            "cloudctl: error: cannot reach the control plane at 127.0.0.1:1 (is it running? "
            "start it with `cloudctl up`; `cloudctl status` tells)",
        ),
        (
            UNAVAILABLE,
            epb.BROKER_UNAVAILABLE,
            "broker(s) 0 at x, 1 at y of cluster 'c' did not answer",
            "cloudctl: error: broker(s) 0 at x, 1 at y of cluster 'c' did not answer (the "
            "cluster may be healing: check `cloudctl describe-cluster`)",
        ),
        (
            UNAVAILABLE,
            epb.OBJECT_STORE_UNAVAILABLE,
            "the object store of cluster 'c' (...)",
            "cloudctl: error: the object store of cluster 'c' (...) (`cloudctl status` tells "
            "whether the object store answers)",
        ),
        (
            grpc.StatusCode.UNAUTHENTICATED,
            epb.TOKEN_INVALID,
            "bad token",
            "cloudctl: error: the control plane refused the API token from /h/token (use the "
            "SLUICE_HOME that `cloudctl up` used, or set SLUICE_TOKEN)",
        ),
        (
            grpc.StatusCode.NOT_FOUND,
            epb.CLUSTER_NOT_FOUND,
            "cluster 'x' not found",
            "cloudctl: error: cluster 'x' not found (list clusters with `cloudctl list-clusters`)",
        ),
        (
            grpc.StatusCode.NOT_FOUND,
            epb.TOPIC_NOT_FOUND,
            "topic 't' not found in cluster 'x'",
            "cloudctl: error: topic 't' not found in cluster 'x' (list topics with `cloudctl "
            "list-topics --cluster CLUSTER`)",
        ),
        (
            grpc.StatusCode.ALREADY_EXISTS,
            epb.CLUSTER_ALREADY_EXISTS,
            "cluster 'x' already exists",
            "cloudctl: error: cluster 'x' already exists (choose another name, or delete the "
            "existing one first)",
        ),
        (
            grpc.StatusCode.INVALID_ARGUMENT,
            epb.INVALID_CONFIG,
            "unknown broker config 'k'",
            "cloudctl: error: unknown broker config 'k'",
        ),
        (
            grpc.StatusCode.FAILED_PRECONDITION,
            epb.OPERATION_IN_PROGRESS,
            "cannot scale: cluster 'x' is UPDATING",
            "cloudctl: error: cannot scale: cluster 'x' is UPDATING",
        ),
        (
            grpc.StatusCode.DEADLINE_EXCEEDED,
            epb.ERROR_REASON_UNSPECIFIED,
            "Deadline Exceeded",
            "cloudctl: error: the control plane at 127.0.0.1:1 did not answer in time (see "
            "/h/logs/controlplane.log)",
        ),
        (
            grpc.StatusCode.INTERNAL,
            epb.INTERNAL,
            "boom",
            "cloudctl: error: boom [INTERNAL] (see /h/logs/controlplane.log)",
        ),
    ],
)
def test_every_error_becomes_one_line_with_a_hint(
    code: grpc.StatusCode, reason: epb.ErrorReason, details: str, expected: str
) -> None:
    """The lines are those cloudctl printed when it told errors apart by their text; it now
    goes by the ErrorInfo reason (the message text no longer matters)."""
    error = ApiError(code, reason, details, endpoint="127.0.0.1:1")
    assert explain(error, Env(Path("/h"))).line() == expected


def test_cli_error_line() -> None:
    assert CliError("it broke", "do this").line() == "cloudctl: error: it broke (do this)"


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    env = Env(tmp_path)
    for args in (["frobnicate"], ["create-cluster"], ["create-cluster", "x", "--brokers", "many"]):
        result = runner.invoke(cloudctl, args, obj=env)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("cloudctl: error: ")
        assert "--help" in lines[0]


def test_without_a_control_plane(tmp_path: Path) -> None:
    result = CliRunner().invoke(cloudctl, ["list-clusters"], obj=Env(tmp_path))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip() == (
        f"cloudctl: error: the control plane is not running for SLUICE_HOME={tmp_path} "
        "(start it with `cloudctl up`, or set SLUICE_ENDPOINT)"
    )
    status = CliRunner().invoke(cloudctl, ["status"], obj=Env(tmp_path))
    assert status.exit_code == 0
    assert "not running" in status.stdout


def test_an_unreachable_control_plane(tmp_path: Path) -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cloudctl, ["list-clusters"], obj=Env(tmp_path, endpoint, "t"))
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"cloudctl: error: cannot reach the control plane at {endpoint} (is it running? start "
        "it with `cloudctl up`; `cloudctl status` tells)"
    )


def test_help_lists_the_contract_commands() -> None:
    result = CliRunner().invoke(cloudctl, ["--help"], obj=Env(Path("/nonexistent")))
    assert result.exit_code == 0
    for command in (
        "up",
        "down",
        "status",
        "create-cluster",
        "describe-cluster",
        "list-clusters",
        "get-bootstrap-brokers",
        "update-broker-count",
        "delete-cluster",
        "create-topic",
        "list-topics",
        "describe-topic",
        "delete-topic",
        "find-orphans",
        "produce",
        "consume",
    ):
        assert command in result.stdout
