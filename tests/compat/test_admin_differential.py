"""The same admin requests to Sluice and to Apache Kafka: the same codes and messages.

Each case sends one raw request (kio, newest version) to both systems and compares the
answers item by item, after replacing the run's unique topic prefix. Only the documented
deviations are left out (see the handler modules): Sluice's own limits
(max.partitions.per.topic, segment.bytes >= 14), internal topics it refuses to delete or
grow, resource types it does not keep (BROKER_LOGGER, CLIENT_METRICS), broker keys
Kafka accepts without knowing them, and Kafka's UNKNOWN_SERVER_ERROR for an unknown
alter operation on a topic. Kafka's own state is left as found: config changes are
``validate_only`` and every topic has a fresh name.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.conftest import unique
from tests.support.raw_client import RawClient
from wire.framing import build

pytestmark = pytest.mark.oracle

SECONDS = datetime.timedelta(seconds=30)
ZERO_UUID = uuid.UUID(int=0)
TOPIC, BROKER = 2, 4


class Req:
    def __init__(self, api_key: int, version: int) -> None:
        self.module = load_payload_module(api_key, version, EntityType.request)

    def __getattr__(self, entity: str) -> Any:
        cls = getattr(self.module, entity)
        return lambda **values: build(cls, **values)


def call(bootstrap: str, request: Any) -> Any:
    with RawClient(bootstrap) as client:
        return client.request(request)


def on_both(both: dict[str, str], request: Any) -> tuple[Any, Any]:
    return call(both["sluice"], request), call(both["kafka"], request)


def norm(value: Any, prefix: str) -> Any:
    if isinstance(value, str):
        return value.replace(prefix, "P")
    if isinstance(value, tuple | list):
        return tuple(norm(v, prefix) for v in value)
    return value


C = Req(19, 7)


def creatable(name: str, partitions: int = 1, rf: int = 1, **kw: Any) -> Any:
    configs = tuple(C.CreatableTopicConfig(name=k, value=v) for k, v in kw.pop("configs", {}))
    return C.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=kw.pop("assignments", ()),
        configs=configs,
    )


def until_known(both: dict[str, str], request: Any, timeout: float = 15) -> tuple[Any, Any]:
    """``on_both`` once neither answers UNKNOWN_TOPIC_OR_PARTITION for the first resource."""
    deadline = time.monotonic() + timeout
    while True:
        answers = on_both(both, request)
        codes = {a.results[0].error_code.name for a in answers}
        if "unknown_topic_or_partition" not in codes or time.monotonic() > deadline:
            return answers
        time.sleep(0.1)


def setup_topics(both: dict[str, str], *topics: Any) -> None:
    for response in on_both(both, C.CreateTopicsRequest(topics=topics, timeout=SECONDS)):
        assert {t.error_code.name for t in response.topics} == {"none"}, response


def test_create_topics_errors_match(both: dict[str, str]) -> None:
    p = unique("diff-ct").replace("-", "")
    setup_topics(both, creatable(f"{p}.exists"), creatable(f"{p}.dot.name"))
    a = C.CreatableReplicaAssignment
    topics = (
        creatable(f"{p}.exists"),
        creatable(f"{p}_dot_name"),
        creatable(f"{p}.dup"),
        creatable(f"{p}.dup"),
        creatable(f"{p} bad"),
        creatable(""),
        creatable(".."),
        creatable(p * 20),
        creatable(f"{p}.zero", 0),
        creatable(f"{p}.neg", -4),
        creatable(f"{p}.rf0", 1, 0),
        creatable(f"{p}.rf2", 1, 2),
        creatable(f"{p}.unknowncfg", configs=[("no.such", "1")]),
        creatable(f"{p}.long", configs=[("retention.ms", "x")]),
        creatable(f"{p}.int", configs=[("max.message.bytes", "3000000000")]),
        creatable(f"{p}.min", configs=[("segment.ms", "0")]),
        creatable(f"{p}.ratio", configs=[("min.cleanable.dirty.ratio", "1.5")]),
        creatable(f"{p}.bool", configs=[("unclean.leader.election.enable", "maybe")]),
        creatable(f"{p}.choice", configs=[("cleanup.policy", "delete,shred")]),
        creatable(f"{p}.null", configs=[("retention.ms", None)]),
        creatable(f"{p}.m1", -1, 1, assignments=(a(partition_index=0, broker_ids=(1,)),)),
        creatable(f"{p}.m2", 2, -1, assignments=(a(partition_index=0, broker_ids=(1,)),)),
        creatable(f"{p}.m3", -1, -1, assignments=(a(partition_index=0, broker_ids=(7,)),)),
        creatable(f"{p}.m4", -1, -1, assignments=(a(partition_index=0, broker_ids=(1, 1)),)),
        creatable(f"{p}.m5", -1, -1, assignments=(a(partition_index=1, broker_ids=(1,)),)),
        creatable(f"{p}.m6", -1, -1, assignments=(a(partition_index=0, broker_ids=()),)),
        creatable(f"{p}.ok", 3, -1, configs=[("retention.ms", "1000")]),
        creatable(f"{p}.defaults", -1, -1),
    )
    request = C.CreateTopicsRequest(topics=topics, timeout=SECONDS, validate_only=True)
    sluice, kafka = on_both(both, request)

    def answers(response: Any) -> list[Any]:
        return sorted(
            norm(
                (
                    t.name,
                    t.error_code.name,
                    t.error_message,
                    t.num_partitions,
                    t.replication_factor,
                ),
                p,
            )
            for t in response.topics
        )

    assert answers(sluice) == answers(kafka)


def test_topic_config_defaults_match(both: dict[str, str]) -> None:
    p = unique("diff-cfg").replace("-", "")
    name = f"{p}.t"
    setup_topics(
        both,
        creatable(name, configs=[("retention.ms", "5000"), ("cleanup.policy", "compact,delete")]),
    )
    d = Req(32, 4)
    request = d.DescribeConfigsRequest(
        resources=(
            d.DescribeConfigsResource(
                resource_type=TOPIC, resource_name=name, configuration_keys=None
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    # a just-created topic reaches a KRaft broker's metadata a moment after CreateTopics
    sluice, kafka = until_known(both, request)
    ours = {c.name: c for c in sluice.results[0].configs}
    theirs = {c.name: c for c in kafka.results[0].configs}
    assert set(ours) <= set(theirs)
    # KRaft formats the cluster with a dynamic default for min.insync.replicas
    for key in sorted(set(ours) - {"min.insync.replicas"}):
        mine, kafkas = ours[key], theirs[key]
        assert (key, mine.value, mine.config_source, mine.read_only, mine.config_type) == (
            key,
            kafkas.value,
            kafkas.config_source,
            kafkas.read_only,
            kafkas.config_type,
        )


def test_describe_and_alter_config_errors_match(both: dict[str, str]) -> None:
    p = unique("diff-alter").replace("-", "")
    name = f"{p}.t"
    setup_topics(both, creatable(name))
    d = Req(32, 4)
    resources = (
        (TOPIC, f"{p}.none"),
        (TOPIC, f"{p} bad"),
        (TOPIC, ""),
        (BROKER, "2"),
        (BROKER, "x"),
    )
    request = d.DescribeConfigsRequest(
        resources=tuple(
            d.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=None)
            for t, n in resources
        ),
        include_synonyms=False,
        include_documentation=False,
    )

    def described(response: Any) -> list[Any]:
        return [
            norm((r.resource_type, r.resource_name, r.error_code.name, r.error_message or ""), p)
            for r in response.results
        ]

    sluice, kafka = on_both(both, request)
    assert described(sluice) == described(kafka)

    i = Req(44, 1)
    resource_cases = [
        (TOPIC, name, [("retention.ms", 0, "10"), ("cleanup.policy", 2, "compact")]),
        (TOPIC, f"{p}.none", [("retention.ms", 0, "10")]),
        (TOPIC, f"{p}.none2", [("retention.ms", 0, "ten")]),
        (TOPIC, f"{p}.none3", [("retention.ms", 2, "5")]),
        (TOPIC, f"{p}.none4", [("no.such", 0, "5")]),
        (TOPIC, f"{p}.none5", [("retention.ms", 0, None)]),
        (TOPIC, f"{p}.none6", [("retention.ms", 0, "1"), ("retention.ms", 1, None)]),
        (TOPIC, "", [("retention.ms", 0, "1")]),
        (TOPIC, f"{p} bad", [("retention.ms", 0, "1")]),
        (TOPIC, f"{p}.dup", [("retention.ms", 0, "1")]),
        (TOPIC, f"{p}.dup", [("retention.ms", 0, "1")]),
        (BROKER, "1", [("num.partitions", 0, "3")]),
        (BROKER, "", [("log.retention.ms", 0, "abc")]),
        (BROKER, "", [("log.retention.ms", 0, "5000")]),
        (BROKER, "2", [("log.retention.ms", 0, "5")]),
        (BROKER, "x", [("log.retention.ms", 0, "5")]),
        (99, "y", [("a", 0, "b")]),
    ]
    request = i.IncrementalAlterConfigsRequest(
        resources=tuple(
            i.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=tuple(
                    i.AlterableConfig(name=k, config_operation=o, value=v) for k, o, v in cs
                ),
            )
            for t, n, cs in resource_cases
        ),
        validate_only=True,
    )

    def altered(response: Any) -> list[Any]:
        return sorted(
            norm((r.resource_type, r.resource_name, r.error_code.name, r.error_message), p)
            for r in response.responses
        )

    sluice, kafka = on_both(both, request)
    assert altered(sluice) == altered(kafka)

    a = Req(33, 2)
    legacy_cases = [
        (TOPIC, name, [("segment.ms", "100000")]),
        (TOPIC, f"{p}.none", [("retention.ms", "1")]),
        (TOPIC, f"{p}.none2", [("retention.ms", None)]),
        (TOPIC, f"{p}.none3", [("x.y", "1")]),
        (TOPIC, f"{p}.none4", [("retention.ms", "1"), ("retention.ms", "2")]),
        (BROKER, "1", [("num.partitions", "2")]),
    ]
    request = a.AlterConfigsRequest(
        resources=tuple(
            a.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=tuple(a.AlterableConfig(name=k, value=v) for k, v in cs),
            )
            for t, n, cs in legacy_cases
        ),
        validate_only=True,
    )
    sluice, kafka = on_both(both, request)
    assert altered(sluice) == altered(kafka)


def test_partitions_and_deletion_errors_match(both: dict[str, str]) -> None:
    p = unique("diff-cp").replace("-", "")
    setup_topics(both, creatable(f"{p}.a", 2), creatable(f"{p}.b"), creatable(f"{p}.gone"))
    r = Req(37, 3)
    t, asg = r.CreatePartitionsTopic, r.CreatePartitionsAssignment
    request = r.CreatePartitionsRequest(
        topics=(
            t(name=f"{p}.a", count=2, assignments=None),
            t(name=f"{p}.a", count=1, assignments=None),
            t(name=f"{p}.b", count=1, assignments=None),
            t(name=f"{p}.gone", count=3, assignments=(asg(broker_ids=(1,)),)),
            t(name=f"{p}.none", count=3, assignments=None),
        ),
        timeout=SECONDS,
        validate_only=True,
    )

    def results(response: Any) -> list[Any]:
        return sorted(
            norm((x.name, x.error_code.name, x.error_message), p) for x in response.results
        )

    sluice, kafka = on_both(both, request)
    assert results(sluice) == results(kafka)
    request = r.CreatePartitionsRequest(
        topics=(
            t(name=f"{p}.b", count=0, assignments=None),
            t(name=f"{p}.gone", count=2, assignments=(asg(broker_ids=(9,)),)),
            t(name=f"{p}.b", count=4, assignments=None),
        ),
        timeout=SECONDS,
        validate_only=True,
    )
    sluice, kafka = on_both(both, request)
    assert results(sluice) == results(kafka)

    d = Req(20, 6)
    s = d.DeleteTopicState
    request = d.DeleteTopicsRequest(
        topics=(
            s(name=f"{p}.gone", topic_id=ZERO_UUID),
            s(name=f"{p}.none", topic_id=ZERO_UUID),
            s(name=None, topic_id=uuid.uuid4()),
            s(name=None, topic_id=ZERO_UUID),
            s(name=f"{p}.b", topic_id=uuid.uuid4()),
            s(name=f"{p}.a", topic_id=ZERO_UUID),
            s(name=f"{p}.a", topic_id=ZERO_UUID),
        ),
        timeout=SECONDS,
    )

    def deleted(response: Any) -> list[Any]:
        return sorted(
            norm((x.name or "", x.error_code.name, x.error_message or ""), p)
            for x in response.responses
        )

    sluice, kafka = on_both(both, request)
    assert deleted(sluice) == deleted(kafka)


def test_delete_records_and_describe_cluster_match(both: dict[str, str]) -> None:
    p = unique("diff-dr").replace("-", "")
    setup_topics(
        both, creatable(f"{p}.r", 2), creatable(f"{p}.c", configs=[("cleanup.policy", "compact")])
    )
    for bootstrap in both.values():
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(6):
            producer.produce(f"{p}.r", b"v%d" % i, key=b"k", partition=0)
        producer.produce(f"{p}.c", b"v", key=b"k")
        assert producer.flush(30) == 0
    r = Req(21, 2)
    part = r.DeleteRecordsPartition

    def request(*topics: tuple[str, list[tuple[int, int]]]) -> Any:
        return r.DeleteRecordsRequest(
            topics=tuple(
                r.DeleteRecordsTopic(
                    name=n, partitions=tuple(part(partition_index=i, offset=o) for i, o in ps)
                )
                for n, ps in topics
            ),
            timeout=SECONDS,
        )

    def results(response: Any) -> list[Any]:
        return sorted(
            norm((t.name, x.partition_index, x.low_watermark, x.error_code.name), p)
            for t in response.topics
            for x in t.partitions
        )

    for req in (
        request(
            (f"{p}.r", [(0, 2), (1, 0), (5, 1)]), (f"{p}.c", [(0, 1)]), (f"{p}.none", [(0, 1)])
        ),
        request((f"{p}.r", [(0, 1)])),
        request((f"{p}.r", [(0, 7)])),
        request((f"{p}.r", [(0, -3)])),
        request((f"{p}.r", [(0, -1)])),
    ):
        sluice, kafka = on_both(both, req)
        assert results(sluice) == results(kafka)

    c = Req(60, 2)
    for endpoint, ops in ((1, True), (1, False), (2, False), (7, False)):
        sluice, kafka = on_both(
            both,
            c.DescribeClusterRequest(
                include_cluster_authorized_operations=ops,
                endpoint_type=endpoint,
                include_fenced_brokers=True,
            ),
        )
        assert (sluice.error_code, sluice.error_message, sluice.cluster_authorized_operations) == (
            kafka.error_code,
            kafka.error_message,
            kafka.cluster_authorized_operations,
        )
        assert len(sluice.brokers) == len(kafka.brokers)
