"""Metadata answers compared with Apache Kafka's."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from tests.compat.conftest import Target, create_topic
from tests.conftest import unique


def _describe(bootstrap: str, topic: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=30)
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(timeout=30)
    listed = admin.list_topics(timeout=30)
    return {
        "cluster_ops": sorted(op.name for op in cluster.authorized_operations or []),
        "nodes": len(cluster.nodes),
        "topic_ops": sorted(op.name for op in described.authorized_operations or []),
        "partitions": [(p.id, p.leader.id, len(p.replicas)) for p in described.partitions],
        "internal": described.is_internal,
        "listed": topic in listed.topics,
        "has_id": described.topic_id is not None,
    }


def test_describe_cluster_and_topic_match_kafka(both: dict[str, str]) -> None:
    answers = {}
    for name, bootstrap in both.items():
        topic = unique("meta")
        create_topic(bootstrap, topic, partitions=3)
        answers[name] = _describe(bootstrap, topic)
    assert answers["sluice"] == answers["kafka"]


def test_list_all_topics(target: Target) -> None:
    topic = unique("all")
    create_topic(target.bootstrap, topic, partitions=2)
    listed = AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=30)
    assert len(listed.topics[topic].partitions) == 2
