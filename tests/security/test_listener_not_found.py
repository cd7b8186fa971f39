"""A client of a listener that not every broker has yet (mid-way through a rolling restart
that adds a private endpoint) only learns the addresses of that listener, as from Kafka:
Metadata through it leaves out the brokers without it, a partition they lead is
LISTENER_NOT_FOUND (LEADER_NOT_AVAILABLE before v6), and DescribeCluster lists only the
brokers that have it. Never the internal address of a broker without the listener."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v5.request import MetadataRequest as MetadataRequestV5
from kio.schema.metadata.v5.request import MetadataRequestTopic as MetadataRequestTopicV5
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from tests.support.cluster_workload import wait_for
from tests.support.processes import free_port
from tests.support.raw_client import RawClient
from tests.support.sluice_cluster import SluiceCluster

TOPIC = "spread"


@pytest.fixture(scope="module")
def half(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SluiceCluster, str]]:
    """Two brokers; only broker 0 has the EXTRA listener."""
    cluster = SluiceCluster(tmp_path_factory.mktemp("half") / "c", 2)
    extra = free_port()
    cluster.brokers[0].settings.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{cluster.kafka_ports[0]},"
            f"EXTRA://127.0.0.1:{extra}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
        }
    )
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
        # CreateTopics answers once the controller has the topic; broker 0 learns its
        # partitions from the metadata log a moment later (as a Kafka broker does)
        wait_for_partitions(f"127.0.0.1:{extra}", 4)
        yield cluster, f"127.0.0.1:{extra}"
    finally:
        cluster.stop()


def metadata(client: RawClient) -> Any:
    return client.request(
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(TOPIC)),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )


def wait_for_partitions(address: str, count: int, timeout: float = 30) -> None:
    """Until Metadata through ``address`` names a leader for each of the topic's
    ``count`` partitions."""

    def named() -> bool:
        with RawClient(address) as client:
            topics = metadata(client).topics
        return bool(topics) and sum(p.leader_id >= 0 for p in topics[0].partitions) == count

    wait_for(named, timeout, f"{TOPIC}'s {count} partitions in Metadata", interval=0.1)


def test_metadata_leaves_out_brokers_without_the_listener(
    half: tuple[SluiceCluster, str],
) -> None:
    _, extra = half
    with RawClient(extra) as client:
        answer = metadata(client)
        assert [(b.node_id, b.port) for b in answer.brokers] == [(0, int(extra.split(":")[1]))]
        (topic,) = answer.topics
        codes = {p.partition_index: (p.leader_id, p.error_code) for p in topic.partitions}
        assert {leader for leader, _ in codes.values()} == {0, 1}, "spread over both brokers"
        for leader, code in codes.values():
            expected = ErrorCode.none if leader == 0 else ErrorCode.listener_not_found
            assert code == expected
        old = client.request(
            MetadataRequestV5(
                topics=(MetadataRequestTopicV5(name=TopicName(TOPIC)),),
                allow_auto_topic_creation=False,
            )
        )
        old_codes = {p.error_code for p in old.topics[0].partitions if p.leader_id == 1}
        assert old_codes == {ErrorCode.leader_not_available}
        described = client.request(
            DescribeClusterRequest(include_cluster_authorized_operations=False)
        )
        assert [b.broker_id for b in described.brokers] == [0]
