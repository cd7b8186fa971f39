"""Structured errors, read from real calls to a real control plane: every failed call carries
a google.rpc.Status in the grpc-status-details-bin trailer with an ErrorInfo (reason, domain
"sluice.dev", the resource in its metadata), and the shared client turns it into ApiError.

The control plane runs with an external object store where nothing listens (the store is
down), and one cluster of one broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import controlplane_pb2 as spb
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import topics_pb2 as tpb
from sluice_client.client import ERROR_DOMAIN, ApiError, Client
from tests.conftest import free_port
from tests.controlplane.harness import ControlPlaneProcess, processes_under, running_control_plane

CLUSTER = "errs"
# static credentials: boto3's chain never reaches for instance metadata (no network)
AWS = {
    "AWS_ACCESS_KEY_ID": "k",
    "AWS_SECRET_ACCESS_KEY": "s",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlaneProcess]:
    dead_store = f"http://127.0.0.1:{free_port()}"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in AWS.items():
            patch.setenv(key, value)  # inherited by the control plane and its brokers
        home = tmp_path_factory.mktemp("errors-home")
        with running_control_plane(home, s3_endpoint=dead_store) as running:
            running.create(CLUSTER, brokers=1)
            yield running


def failed(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def error_info(exc: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The ErrorInfo of the google.rpc.Status in the call's trailer (grpcio-status)."""
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    assert status is not None, "no grpc-status-details-bin trailer"
    assert status.code == exc.code().value[0]  # type: ignore[attr-defined]
    assert status.message == exc.details()  # type: ignore[attr-defined]
    (detail,) = status.details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    assert info.domain == ERROR_DOMAIN
    return info


def test_an_unknown_cluster(plane: ControlPlaneProcess) -> None:
    exc = failed(
        lambda: plane.clusters.GetCluster(
            cpb.GetClusterRequest(name="nope"), metadata=plane.metadata, timeout=10
        )
    )
    assert exc.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    info = error_info(exc)
    assert info.reason == "CLUSTER_NOT_FOUND"
    assert dict(info.metadata) == {"cluster": "nope"}


def test_an_unknown_topic(plane: ControlPlaneProcess) -> None:
    exc = failed(
        lambda: plane.topics.DescribeTopic(
            tpb.DescribeTopicRequest(cluster=CLUSTER, name="nope"),
            metadata=plane.metadata,
            timeout=30,
        )
    )
    assert exc.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    info = error_info(exc)
    assert info.reason == "TOPIC_NOT_FOUND"
    assert dict(info.metadata) == {"cluster": CLUSTER, "topic": "nope"}


@pytest.mark.parametrize(
    ("call", "metadata"),
    [
        (
            lambda p: p.clusters.CreateCluster(
                cpb.CreateClusterRequest(name="cfg", config={"log.retention.mz": "1"}),
                metadata=p.metadata,
                timeout=10,
            ),
            {"cluster": "cfg", "key": "log.retention.mz"},
        ),
        (
            lambda p: p.clusters.CreateCluster(
                cpb.CreateClusterRequest(name="cfg", config={"log.retention.ms": "later"}),
                metadata=p.metadata,
                timeout=10,
            ),
            {"cluster": "cfg", "key": "log.retention.ms"},
        ),
        (
            lambda p: p.topics.CreateTopic(
                tpb.CreateTopicRequest(cluster=CLUSTER, name="t", config={"retention.mz": "1"}),
                metadata=p.metadata,
                timeout=10,
            ),
            {"cluster": CLUSTER, "topic": "t", "key": "retention.mz"},
        ),
    ],
)
def test_an_invalid_config(plane: ControlPlaneProcess, call: Any, metadata: dict[str, str]) -> None:
    exc = failed(lambda: call(plane))
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    info = error_info(exc)
    assert info.reason == "INVALID_CONFIG"
    assert dict(info.metadata) == metadata
    assert metadata["key"] in exc.details()  # type: ignore[attr-defined]


def test_the_object_store_down(plane: ControlPlaneProcess) -> None:
    exc = failed(
        lambda: plane.topics.FindOrphans(
            tpb.FindOrphansRequest(cluster=CLUSTER), metadata=plane.metadata, timeout=60
        )
    )
    assert exc.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    info = error_info(exc)
    assert info.reason == "OBJECT_STORE_UNAVAILABLE"
    bucket = plane.get(CLUSTER).object_store
    assert dict(info.metadata) == {
        "cluster": CLUSTER,
        "bucket": bucket.bucket,
        "endpoint": bucket.endpoint,
    }


def test_a_duplicate_cluster_and_a_missing_token(plane: ControlPlaneProcess) -> None:
    exc = failed(
        lambda: plane.clusters.CreateCluster(
            cpb.CreateClusterRequest(name=CLUSTER), metadata=plane.metadata, timeout=10
        )
    )
    assert error_info(exc).reason == "CLUSTER_ALREADY_EXISTS"
    exc = failed(lambda: plane.clusters.ListClusters(cpb.ListClustersRequest(), timeout=10))
    assert exc.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
    assert error_info(exc).reason == "TOKEN_INVALID"


def test_the_shared_client_reads_the_reason(plane: ControlPlaneProcess) -> None:
    with Client(plane.endpoint, plane.token) as client:
        with pytest.raises(ApiError) as info:
            client.call(client.topics.DescribeTopic, tpb.DescribeTopicRequest(cluster=CLUSTER))
        error = info.value
        assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, epb.TOPIC_NOT_FOUND)
        assert error.reason_name == "TOPIC_NOT_FOUND"
        assert error.message == f"topic '' not found in cluster {CLUSTER!r}"
        assert error.metadata == {"cluster": CLUSTER}
        assert error.endpoint == plane.endpoint
        with pytest.raises(ApiError) as info:
            client.call(client.topics.FindOrphans, tpb.FindOrphansRequest(cluster=CLUSTER), 60)
        assert info.value.reason == epb.OBJECT_STORE_UNAVAILABLE
        assert info.value.message.startswith(f"the object store of cluster {CLUSTER!r}")
    with Client(plane.endpoint, "wrong") as client, pytest.raises(ApiError) as info:
        client.call(client.clusters.ListClusters, cpb.ListClustersRequest())
    assert info.value.reason == epb.TOKEN_INVALID


def test_nothing_listening_is_control_plane_unavailable() -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    with Client(endpoint, "t") as client, pytest.raises(ApiError) as info:
        client.call(client.clusters.ListClusters, cpb.ListClustersRequest(), 5)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert info.value.reason == epb.CONTROL_PLANE_UNAVAILABLE
    assert info.value.endpoint == endpoint


def test_status_lists_the_processes_it_runs(plane: ControlPlaneProcess) -> None:
    reply = plane.status.GetStatus(spb.GetStatusRequest(), metadata=plane.metadata, timeout=10)
    broker = plane.get(CLUSTER).brokers[0]
    assert plane.proc is not None
    assert [(p.kind, p.pid, p.cluster, p.broker_id) for p in reply.processes] == [
        (spb.PROCESS_KIND_CONTROL_PLANE, plane.proc.pid, "", 0),
        (spb.PROCESS_KIND_BROKER, broker.pid, CLUSTER, 0),
    ]
    assert reply.processes[1].HasField("broker_id")
    assert not reply.processes[0].HasField("broker_id")
    assert {p.pid for p in reply.processes} == {pid for pid, _ in processes_under(plane.home)}


def test_shutdown_of_another_pid_stops_nothing(plane: ControlPlaneProcess) -> None:
    assert plane.proc is not None
    exc = failed(
        lambda: plane.status.Shutdown(
            spb.ShutdownRequest(pid=plane.proc.pid + 100_000),  # type: ignore[union-attr]
            metadata=plane.metadata,
            timeout=10,
        )
    )
    assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
    assert error_info(exc).reason == "FAILED_PRECONDITION"
    assert plane.get(CLUSTER).state == cpb.CLUSTER_STATE_ACTIVE
