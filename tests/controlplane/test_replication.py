"""Clusters of brokers that share metadata and replicate: quorum settings, replicas spread over
brokers, each broker advertising itself, scale-out and a scale-in that keeps every record."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Consumer, Producer
from kio.schema.metadata.v12 import request as metadata_v12

from controlplane.kafka import Admin, KafkaConnection, KafkaResponseError, TopicMetadata
from controlplane.process import read_cmdline
from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import topics_pb2 as tpb
from tests.controlplane.harness import ControlPlaneProcess, processes_under, wait_until


def advertised(host: str, port: int) -> tuple[int, dict[int, str]]:
    """What one broker's Metadata says: the controller id and every broker's address."""

    async def ask() -> tuple[int, dict[int, str]]:
        async with await KafkaConnection.open(host, port, 10) as conn:
            response = await conn.request(
                metadata_v12.MetadataRequest(
                    topics=(),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                ),
                10,
            )
        return int(response.controller_id), {
            int(b.node_id): f"{b.host}:{b.port}" for b in response.brokers
        }

    return asyncio.run(ask())


def topic_metadata(broker: cpb.Broker, name: str) -> TopicMetadata | None:
    """The topic as ``broker`` sees it; None while its metadata image has not caught up
    (brokers replay the metadata log independently, as Kafka's do)."""

    async def ask() -> TopicMetadata | None:
        try:
            (meta,) = await Admin(broker.host, broker.port, 10).metadata([name])
        except KafkaResponseError:
            return None
        return meta

    return asyncio.run(ask())


def setting(pid: int, key: str) -> str:
    args = read_cmdline(pid) or []
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"{key}=")]
    assert len(values) == 1, (key, args)
    return values[0]


def test_three_brokers_share_metadata_and_replicate(plane: ControlPlaneProcess) -> None:
    md = plane.metadata
    cluster = plane.create("trio", brokers=3)
    brokers = list(cluster.brokers)

    # the quorum settings: voters 0-2 with their Raft and Kafka ports, each its own address
    raft = {b.id: setting(b.pid, "controller.listener") for b in brokers}
    assert len(set(raft.values()) | {f"{b.host}:{b.port}" for b in brokers}) == 6
    voters = ",".join(f"{b.id}@{raft[b.id]}" for b in brokers)
    listeners = ",".join(f"{b.id}@{b.host}:{b.port}" for b in brokers)
    for b in brokers:
        assert setting(b.pid, "controller.quorum.voters") == voters
        assert setting(b.pid, "controller.quorum.voter.listeners") == listeners
        assert setting(b.pid, "advertised.listeners") == f"{b.host}:{b.port}"
        assert setting(b.pid, "cluster.id") == cluster.cluster_id

    # each broker advertises itself, and every broker knows all three
    everyone = {b.id: f"{b.host}:{b.port}" for b in brokers}
    for b in brokers:
        _, seen = wait_until(
            lambda b=b: (got := advertised(b.host, b.port))[1] == everyone and got,
            30,
            f"broker {b.id} listing every broker",
        )
        assert seen[b.id] == f"{b.host}:{b.port}"

    # a topic with replication factor 3 through the API: replicas and ISR span the brokers
    topic = plane.topics.CreateTopic(
        tpb.CreateTopicRequest(cluster="trio", name="triple", partitions=3, replication_factor=3),
        metadata=md,
        timeout=30,
    )
    assert (topic.partitions, topic.replication_factor) == (3, 3)

    def in_sync() -> tpb.Topic | None:
        got = plane.topics.DescribeTopic(
            tpb.DescribeTopicRequest(cluster="trio", name="triple"), metadata=md, timeout=30
        )
        full = all(sorted(p.isr) == [0, 1, 2] for p in got.partition_details)
        return got if full and len(got.partition_details) == 3 else None

    described = wait_until(in_sync, 30, "every replica in the ISR")
    for p in described.partition_details:
        assert sorted(p.replicas) == [0, 1, 2]
        assert p.leader in (0, 1, 2)
    for b in brokers:  # every broker answers with the same partitions
        meta = wait_until(
            lambda b=b: (
                (m := topic_metadata(b, "triple")) is not None
                and m.partitions
                and all(len(p.isr) == 3 for p in m.partitions)
                and m
            ),
            30,
            f"broker {b.id} metadata of 'triple'",
        )
        assert [sorted(p.replicas) for p in meta.partitions] == [[0, 1, 2]] * 3

    # topics created at once each answer with their partitions: the broker asked to describe
    # one may apply its creation a moment after the controller committed it
    names = [f"many-{i}" for i in range(12)]

    def create(name: str) -> tpb.Topic:
        return plane.topics.CreateTopic(
            tpb.CreateTopicRequest(cluster="trio", name=name, partitions=2, replication_factor=3),
            metadata=md,
            timeout=60,
        )

    with ThreadPoolExecutor(len(names)) as pool:
        created = list(pool.map(create, names))
    assert [(t.name, len(t.partition_details)) for t in created] == [(n, 2) for n in names]

    # RF above the broker count is refused; the voters cannot be scaled away
    with pytest.raises(grpc.RpcError) as info:
        plane.topics.CreateTopic(
            tpb.CreateTopicRequest(cluster="trio", name="x", replication_factor=4), metadata=md
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as info:
        plane.clusters.UpdateBrokerCount(
            cpb.UpdateBrokerCountRequest(name="trio", broker_count=2), metadata=md
        )
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "voters" in info.value.details()

    plane.clusters.DeleteCluster(cpb.DeleteClusterRequest(name="trio"), metadata=md)
    plane.wait_gone("trio")


@pytest.mark.slow
def test_scale_out_then_in_keeps_every_record(plane: ControlPlaneProcess) -> None:
    md = plane.metadata
    plane.create("shrink", brokers=3)
    plane.clusters.UpdateBrokerCount(
        cpb.UpdateBrokerCountRequest(name="shrink", broker_count=4), metadata=md
    )
    cluster = plane.wait_state("shrink")
    assert [b.id for b in cluster.brokers] == [0, 1, 2, 3]
    fourth = cluster.brokers[3]
    assert setting(fourth.pid, "controller.quorum.voters") == setting(
        cluster.brokers[0].pid, "controller.quorum.voters"
    ), "a new broker joins with the same voters"

    # 4 partitions, RF 3 on 4 brokers: broker 3 holds replicas (leads one, by preference)
    plane.topics.CreateTopic(
        tpb.CreateTopicRequest(cluster="shrink", name="kept", partitions=4, replication_factor=3),
        metadata=md,
        timeout=30,
    )
    before = plane.topics.DescribeTopic(
        tpb.DescribeTopicRequest(cluster="shrink", name="kept"), metadata=md, timeout=30
    )
    assert any(3 in p.replicas for p in before.partition_details)

    bootstrap = ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 3})
    failures: list[str] = []
    values = [f"record-{i}" for i in range(2000)]
    for i, value in enumerate(values):
        producer.produce(
            "kept",
            value=value.encode(),
            partition=i % 4,
            on_delivery=lambda err, _msg: failures.append(str(err)) if err else None,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []

    data_dir = Path(fourth.data_dir)
    assert data_dir.exists()
    updating = plane.clusters.UpdateBrokerCount(
        cpb.UpdateBrokerCountRequest(name="shrink", broker_count=3), metadata=md
    )
    assert updating.state == cpb.CLUSTER_STATE_UPDATING
    assert "scale-in" in updating.state_message
    cluster = plane.wait_state("shrink", timeout=180)
    assert [b.id for b in cluster.brokers] == [0, 1, 2]
    assert cluster.broker_count == 3
    assert not data_dir.exists(), "the removed broker's data is deleted"
    assert not [p for p in processes_under(plane.home) if str(data_dir) in p[1]]

    after = plane.topics.DescribeTopic(
        tpb.DescribeTopicRequest(cluster="shrink", name="kept"), metadata=md, timeout=30
    )
    for p in after.partition_details:
        assert sorted(p.replicas) == [0, 1, 2], p
        assert p.leader in (0, 1, 2)
    everyone = {b.id: f"{b.host}:{b.port}" for b in cluster.brokers}
    wait_until(
        lambda: advertised(cluster.brokers[0].host, cluster.brokers[0].port)[1] == everyone,
        30,
        "broker 3 unregistered",
    )

    bootstrap = ",".join(everyone.values())
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "after-scale-in",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    got: list[str] = []
    try:
        consumer.subscribe(["kept"])
        wait_until(
            lambda: _poll_into(consumer, got) and len(got) >= len(values),
            90,
            f"every record consumed (have {len(got)})",
        )
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)

    plane.clusters.DeleteCluster(cpb.DeleteClusterRequest(name="shrink"), metadata=md)
    plane.wait_gone("shrink")


def _poll_into(consumer: object, into: list[str]) -> bool:
    for message in consumer.consume(500, 0.5):  # type: ignore[attr-defined]
        if message.error() is None:
            into.append(message.value().decode())
    return True
