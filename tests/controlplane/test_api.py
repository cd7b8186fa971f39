"""The gRPC API against a real control plane and real brokers on loopback."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from controlplane.kafka import Admin, TopicMetadata
from controlplane.process import read_cmdline
from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import controlplane_pb2 as spb
from proto.sluice.v1 import topics_pb2 as tpb
from tests.controlplane.harness import ControlPlaneProcess, processes_under, wait_until


def code_of(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()  # type: ignore[operator]
    return info.value.code(), info.value.details()


# ---------------------------------------------------------------------- auth, health, reflection


def test_health_needs_no_token(plane: ControlPlaneProcess) -> None:
    reply = health_pb2_grpc.HealthStub(plane.channel).Check(
        health_pb2.HealthCheckRequest(service="sluice.v1.Clusters"), timeout=5
    )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_token_file_is_private(plane: ControlPlaneProcess) -> None:
    assert (plane.home / "token").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("metadata", [(), (("authorization", "Bearer wrong"),), (("x", "y"),)])
def test_missing_or_wrong_token_is_unauthenticated(
    plane: ControlPlaneProcess, metadata: tuple[tuple[str, str], ...]
) -> None:
    for call in (
        lambda: plane.clusters.ListClusters(cpb.ListClustersRequest(), metadata=metadata),
        lambda: plane.topics.ListTopics(tpb.ListTopicsRequest(cluster="x"), metadata=metadata),
        lambda: plane.status.GetStatus(spb.GetStatusRequest(), metadata=metadata),
    ):
        code, details = code_of(call)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        assert "token" in details


def test_reflection_lists_the_services(plane: ControlPlaneProcess) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(plane.channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    replies = list(stub.ServerReflectionInfo(iter([request]), metadata=plane.metadata, timeout=5))
    names = {s.name for s in replies[0].list_services_response.service}
    assert {"sluice.v1.Clusters", "sluice.v1.Topics", "grpc.health.v1.Health"} <= names
    with pytest.raises(grpc.RpcError) as info:
        list(stub.ServerReflectionInfo(iter([request]), timeout=5))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_status(plane: ControlPlaneProcess) -> None:
    reply = plane.status.GetStatus(spb.GetStatusRequest(), metadata=plane.metadata, timeout=5)
    assert reply.endpoint == plane.endpoint
    assert reply.home == str(plane.home)
    assert reply.s3_note.startswith(f"embedded S3 at {reply.s3_endpoint} (data in {plane.home}")


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("request_", "code", "needle"),
    [
        (cpb.CreateClusterRequest(name="bad_name"), grpc.StatusCode.INVALID_ARGUMENT, "bad_name"),
        (cpb.CreateClusterRequest(name=""), grpc.StatusCode.INVALID_ARGUMENT, "1-64"),
        (cpb.CreateClusterRequest(name="a" * 65), grpc.StatusCode.INVALID_ARGUMENT, "1-64"),
        (
            cpb.CreateClusterRequest(name="zero", broker_count=0),
            grpc.StatusCode.INVALID_ARGUMENT,
            "broker count 0",
        ),
        (
            cpb.CreateClusterRequest(name="many", broker_count=16),
            grpc.StatusCode.INVALID_ARGUMENT,
            "cluster.max.brokers",
        ),
        (
            cpb.CreateClusterRequest(name="cfg", config={"log.retention.mz": "1"}),
            grpc.StatusCode.INVALID_ARGUMENT,
            "log.retention.mz",
        ),
        (
            cpb.CreateClusterRequest(name="cfg", config={"log.retention.ms": "later"}),
            grpc.StatusCode.INVALID_ARGUMENT,
            "log.retention.ms",
        ),
    ],
)
def test_create_is_validated(
    plane: ControlPlaneProcess,
    request_: cpb.CreateClusterRequest,
    code: grpc.StatusCode,
    needle: str,
) -> None:
    got, details = code_of(
        lambda: plane.clusters.CreateCluster(request_, metadata=plane.metadata, timeout=5)
    )
    assert got == code
    assert needle in details


def test_unknown_cluster_is_not_found(plane: ControlPlaneProcess) -> None:
    md = plane.metadata
    for call in (
        lambda: plane.clusters.GetCluster(cpb.GetClusterRequest(name="nope"), metadata=md),
        lambda: plane.clusters.DeleteCluster(cpb.DeleteClusterRequest(name="nope"), metadata=md),
        lambda: plane.clusters.GetBootstrapBrokers(
            cpb.GetBootstrapBrokersRequest(name="nope"), metadata=md
        ),
        lambda: plane.clusters.UpdateBrokerCount(
            cpb.UpdateBrokerCountRequest(name="nope", broker_count=2), metadata=md
        ),
        lambda: plane.topics.ListTopics(tpb.ListTopicsRequest(cluster="nope"), metadata=md),
    ):
        code, details = code_of(call)
        assert code == grpc.StatusCode.NOT_FOUND
        assert "'nope'" in details


# ---------------------------------------------------------------------- lifecycle


def broker_topics(plane: ControlPlaneProcess, name: str) -> list[list[str]]:
    """The topic names each broker of the cluster has (asked directly over Kafka)."""

    async def ask() -> list[list[str]]:
        cluster = plane.get(name)
        metas = await asyncio.gather(
            *(Admin(b.host, b.port, 10).metadata() for b in cluster.brokers)
        )
        return [
            sorted(t.name for t in meta if not t.internal and not t.name.startswith("__"))
            for meta in metas
        ]

    return asyncio.run(ask())


def broker_meta(plane: ControlPlaneProcess, name: str, topic: str) -> TopicMetadata:
    """One topic as broker 0 of the cluster describes it."""
    broker = plane.get(name).brokers[0]

    async def ask() -> TopicMetadata:
        (meta,) = await Admin(broker.host, broker.port, 10).metadata([topic])
        return meta

    return asyncio.run(ask())


def committed_offset(bootstrap: str, group: str, topic: str, offset: int | None) -> int | None:
    """Commit ``offset`` of ``topic``-0 for ``group`` (None: only read it); the group's
    committed offset, or None while the coordinator is not ready (asked again)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        if offset is not None:
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return int(tp.offset) if tp.offset >= 0 else None
    except KafkaException:
        return None
    finally:
        consumer.close()


def test_cluster_lifecycle(plane: ControlPlaneProcess) -> None:
    md = plane.metadata
    created = plane.clusters.CreateCluster(
        cpb.CreateClusterRequest(name="life", broker_count=1), metadata=md, timeout=10
    )
    assert created.state == cpb.CLUSTER_STATE_CREATING
    code, details = code_of(
        lambda: plane.clusters.CreateCluster(cpb.CreateClusterRequest(name="life"), metadata=md)
    )
    assert code == grpc.StatusCode.ALREADY_EXISTS
    cluster = plane.wait_state("life")
    assert [b.state for b in cluster.brokers] == [cpb.BROKER_STATE_RUNNING]
    assert cluster.bootstrap_brokers == f"127.0.0.1:{cluster.brokers[0].port}"
    listed = plane.clusters.ListClusters(cpb.ListClustersRequest(), metadata=md)
    assert "life" in [c.name for c in listed.clusters]

    # scale out; a second operation meanwhile is refused
    updating = plane.clusters.UpdateBrokerCount(
        cpb.UpdateBrokerCountRequest(name="life", broker_count=2), metadata=md
    )
    assert updating.state == cpb.CLUSTER_STATE_UPDATING
    code, details = code_of(
        lambda: plane.clusters.UpdateClusterConfig(
            cpb.UpdateClusterConfigRequest(name="life", config={"log.retention.ms": "1000"}),
            metadata=md,
        )
    )
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "UPDATING" in details
    cluster = plane.wait_state("life")
    assert len(cluster.brokers) == 2
    bootstrap = plane.clusters.GetBootstrapBrokers(
        cpb.GetBootstrapBrokersRequest(name="life"), metadata=md
    )
    assert bootstrap.bootstrap_brokers == ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
    assert len(set(bootstrap.addresses)) == 2

    # brokers share metadata: a topic created through one broker is known to every broker
    topic = plane.topics.CreateTopic(
        tpb.CreateTopicRequest(
            cluster="life", name="events", partitions=3, config={"retention.ms": "3600000"}
        ),
        metadata=md,
        timeout=30,
    )
    assert (topic.partitions, topic.config["retention.ms"]) == (3, "3600000")
    wait_until(lambda: broker_topics(plane, "life") == [["events"], ["events"]], 30, "shared")
    code, _ = code_of(
        lambda: plane.topics.CreateTopic(
            tpb.CreateTopicRequest(cluster="life", name="events"), metadata=md
        )
    )
    assert code == grpc.StatusCode.ALREADY_EXISTS
    code, details = code_of(
        lambda: plane.topics.CreateTopic(
            tpb.CreateTopicRequest(cluster="life", name="t2", config={"retention.mz": "1"}),
            metadata=md,
        )
    )
    assert (code, "retention.mz" in details) == (grpc.StatusCode.INVALID_ARGUMENT, True)
    altered = plane.topics.AlterTopicConfig(
        tpb.AlterTopicConfigRequest(
            cluster="life", name="events", config={"retention.ms": "7200000"}
        ),
        metadata=md,
        timeout=30,
    )
    assert altered.config["retention.ms"] == "7200000"
    listed_topics = plane.topics.ListTopics(tpb.ListTopicsRequest(cluster="life"), metadata=md)
    assert [t.name for t in listed_topics.topics] == ["events"]
    plane.topics.DeleteTopic(tpb.DeleteTopicRequest(cluster="life", name="events"), metadata=md)
    wait_until(lambda: broker_topics(plane, "life") == [[], []], 30, "deleted everywhere")
    code, _ = code_of(
        lambda: plane.topics.DescribeTopic(
            tpb.DescribeTopicRequest(cluster="life", name="events"), metadata=md
        )
    )
    assert code == grpc.StatusCode.NOT_FOUND

    # config change: rolling restart, every broker restarted with the setting
    before = {b.id: b.pid for b in cluster.brokers}
    code, details = code_of(
        lambda: plane.clusters.UpdateClusterConfig(
            cpb.UpdateClusterConfigRequest(name="life", config={"node.id": "5"}), metadata=md
        )
    )
    assert (code, "node.id" in details) == (grpc.StatusCode.INVALID_ARGUMENT, True)
    plane.clusters.UpdateClusterConfig(
        cpb.UpdateClusterConfigRequest(name="life", config={"log.retention.ms": "3600000"}),
        metadata=md,
    )
    cluster = plane.wait_state("life")
    assert dict(cluster.config) == {"log.retention.ms": "3600000"}
    for broker in cluster.brokers:
        assert broker.pid != before[broker.id]
        assert "log.retention.ms=3600000" in (read_cmdline(broker.pid) or [])

    # scale-in: a partition with more replicas than brokers would remain cannot move (FAILED,
    # the cluster keeps its brokers); without it, broker 1's partitions move to broker 0
    plane.topics.CreateTopic(
        tpb.CreateTopicRequest(cluster="life", name="pair", partitions=1, replication_factor=2),
        metadata=md,
        timeout=30,
    )
    plane.clusters.UpdateBrokerCount(
        cpb.UpdateBrokerCountRequest(name="life", broker_count=1), metadata=md
    )
    failed = plane.wait_state("life", cpb.CLUSTER_STATE_FAILED)
    assert "partition pair-0 has 2 replicas but only 1 broker(s) would remain" in (
        failed.state_message
    )
    assert (failed.broker_count, len(failed.brokers), failed.operation) == (2, 2, "")
    # a failed scale-in is final: no operation runs, topics can be changed meanwhile
    plane.topics.DeleteTopic(tpb.DeleteTopicRequest(cluster="life", name="pair"), metadata=md)
    plane.topics.CreateTopic(
        tpb.CreateTopicRequest(cluster="life", name="solo", partitions=4, replication_factor=1),
        metadata=md,
        timeout=30,
    )
    assert plane.get("life").state == cpb.CLUSTER_STATE_FAILED
    wait_until(lambda: broker_topics(plane, "life") == [["solo"], ["solo"]], 30, "pair deleted")
    spread = wait_until(
        lambda: [p.replicas for p in broker_meta(plane, "life", "solo").partitions], 30, "solo"
    )
    assert (1,) in spread, "broker 1 holds partitions of 'solo'"
    # the service's own topics shrink instead: offsets committed now, with two brokers, make
    # __consumer_offsets with two replicas, and the scale-in takes it to broker 0 alone
    bootstrap = plane.get("life").bootstrap_brokers
    wait_until(lambda: committed_offset(bootstrap, "g", "solo", 7) == 7, 60, "offsets")
    offsets = broker_meta(plane, "life", "__consumer_offsets").partitions
    assert {len(p.replicas) for p in offsets} == {2}
    removed_dir = Path(cluster.brokers[1].data_dir)
    scaling = plane.clusters.UpdateBrokerCount(
        cpb.UpdateBrokerCountRequest(name="life", broker_count=1), metadata=md
    )
    assert (scaling.state, "scale-in" in scaling.state_message) == (
        cpb.CLUSTER_STATE_UPDATING,
        True,
    )
    cluster = plane.wait_state("life")
    assert [b.id for b in cluster.brokers] == [0]
    assert not removed_dir.exists()
    moved = plane.topics.DescribeTopic(
        tpb.DescribeTopicRequest(cluster="life", name="solo"), metadata=md, timeout=30
    )
    assert [list(p.replicas) for p in moved.partition_details] == [[0]] * 4
    offsets = broker_meta(plane, "life", "__consumer_offsets").partitions
    assert {p.replicas for p in offsets} == {(0,)}
    bootstrap = plane.get("life").bootstrap_brokers
    assert wait_until(lambda: committed_offset(bootstrap, "g", "solo", None), 60, "read") == 7

    # delete: brokers stop, data goes, repeating is harmless
    data_dirs = [Path(b.data_dir) for b in cluster.brokers]
    deleting = plane.clusters.DeleteCluster(cpb.DeleteClusterRequest(name="life"), metadata=md)
    assert deleting.state == cpb.CLUSTER_STATE_DELETING
    plane.clusters.DeleteCluster(cpb.DeleteClusterRequest(name="life"), metadata=md)
    plane.wait_gone("life")
    assert not any(d.exists() for d in data_dirs)
    assert not [p for p in processes_under(plane.home) if "/clusters/" in p[1]]


def test_a_killed_broker_heals_with_its_data(plane: ControlPlaneProcess) -> None:
    md = plane.metadata
    cluster = plane.create("heal", brokers=2)
    plane.topics.CreateTopic(
        tpb.CreateTopicRequest(cluster="heal", name="kept", partitions=2), metadata=md, timeout=30
    )
    victim = cluster.brokers[1]
    os.kill(victim.pid, signal.SIGKILL)

    def healed() -> cpb.Cluster | None:
        now = plane.get("heal")
        fresh = now.brokers[1]
        ok = now.state == cpb.CLUSTER_STATE_ACTIVE and fresh.restarts == 1
        running = fresh.state == cpb.BROKER_STATE_RUNNING
        return now if ok and running and fresh.pid not in (0, victim.pid) else None

    cluster = wait_until(healed, 30, "broker 1 restarted")
    assert (cluster.brokers[1].port, cluster.brokers[1].data_dir) == (victim.port, victim.data_dir)
    assert broker_topics(plane, "heal") == [["kept"], ["kept"]], (
        "the restarted broker kept its data"
    )
    plane.clusters.DeleteCluster(cpb.DeleteClusterRequest(name="heal"), metadata=md)
    plane.wait_gone("heal")


def test_delete_interrupts_creation(plane: ControlPlaneProcess) -> None:
    md = plane.metadata
    plane.clusters.CreateCluster(
        cpb.CreateClusterRequest(name="brief", broker_count=2), metadata=md
    )
    plane.clusters.DeleteCluster(cpb.DeleteClusterRequest(name="brief"), metadata=md)
    plane.wait_gone("brief")
    wait_until(
        lambda: not [p for p in processes_under(plane.home) if "brief-" in p[1]],
        20,
        "brokers of the deleted cluster gone",
    )
