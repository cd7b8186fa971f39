"""Controller decisions under concurrency: many clients at once, the same answers as Kafka.

Every metadata change is decided by the active controller, one decision at a time, each
reading the state it decides on in the same step as it commits (``QuorumController.
decide``). These tests send the same or conflicting requests from many connections at the
same instant (a barrier) and check the outcome Kafka gives: exactly one creation of a topic
wins, one partition increase wins, no config change is lost, producer ids stay unique
over a restart (30 InitProducerId at once: tests/cluster/test_many_producers.py). They
run against a single Sluice broker, a 3-broker Sluice cluster (requests spread over every
broker, so most are forwarded to the controller) and Apache Kafka.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.conftest import unique
from tests.support.kafka_oracle import KafkaOracle
from tests.support.raw_client import RawClient
from tests.support.sluice_cluster import SluiceCluster
from wire.framing import build

pytestmark = pytest.mark.oracle

CLIENTS = 20
SECONDS = datetime.timedelta(seconds=30)
TOPIC = 2
SET = 0


class Req:
    def __init__(self, api_key: int, version: int) -> None:
        self.module = load_payload_module(api_key, version, EntityType.request)

    def __getattr__(self, entity: str) -> Any:
        cls = getattr(self.module, entity)
        return lambda **values: build(cls, **values)


CT = Req(19, 7)
CP = Req(37, 3)
IAC = Req(44, 1)
DC = Req(32, 4)
IPI = Req(22, 4)


@pytest.fixture(scope="module")
def sluice3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SluiceCluster]:
    with SluiceCluster(tmp_path_factory.mktemp("concurrency"), brokers=3) as cluster:
        yield cluster


@pytest.fixture(params=["sluice", "sluice3", "kafka"])
def servers(request: pytest.FixtureRequest) -> list[str]:
    """Bootstrap addresses to spread the clients over."""
    if request.param == "kafka":
        oracle: KafkaOracle = request.getfixturevalue("kafka_oracle")
        return [oracle.bootstrap]
    if request.param == "sluice3":
        cluster: SluiceCluster = request.getfixturevalue("sluice3")
        return cluster.bootstrap.split(",")
    return [request.getfixturevalue("sluice").bootstrap]


def at_once(servers: list[str], requests: list[Any]) -> list[Any]:
    """Send request i on its own connection to servers[i % n], all released together."""
    clients = [RawClient(servers[i % len(servers)], timeout=60) for i in range(len(requests))]
    barrier = threading.Barrier(len(requests))
    answers: list[Any] = [None] * len(requests)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            answers[i] = clients[i].request(requests[i])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        for c in clients:
            c.close()
    assert not errors, errors
    return answers


RETRIABLE = {"coordinator_load_in_progress", "coordinator_not_available", "not_controller"}


def granted(servers: list[str], requests: list[Any]) -> list[Any]:
    """``at_once``, then the requests answered with a retriable error again (all at once),
    as clients retry them (a just-started Kafka answers COORDINATOR_LOAD_IN_PROGRESS)."""
    answers = at_once(servers, requests)
    deadline = time.monotonic() + 30
    while retry := [i for i, a in enumerate(answers) if a.error_code.name in RETRIABLE]:
        assert time.monotonic() < deadline, answers
        time.sleep(0.2)
        for i, answer in zip(retry, at_once(servers, [requests[i] for i in retry]), strict=True):
            answers[i] = answer
    assert {a.error_code.name for a in answers} == {"none"}, answers
    return answers


def create(servers: list[str], name: str, partitions: int = 1) -> None:
    request = CT.CreateTopicsRequest(
        topics=(
            CT.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=SECONDS,
    )
    with RawClient(servers[0]) as client:
        answer = client.request(request)
    assert answer.topics[0].error_code.name == "none", answer


def until(check: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_same_topic_created_by_many_clients_at_once(servers: list[str]) -> None:
    name = unique("race-create")
    request = CT.CreateTopicsRequest(
        topics=(
            CT.CreatableTopic(
                name=name, num_partitions=3, replication_factor=1, assignments=(), configs=()
            ),
        ),
        timeout=SECONDS,
    )
    answers = at_once(servers, [request] * CLIENTS)
    codes = Counter(a.topics[0].error_code.name for a in answers)
    assert codes == {"none": 1, "topic_already_exists": CLIENTS - 1}, codes
    ids = {a.topics[0].topic_id for a in answers if a.topics[0].error_code.name == "none"}
    assert len(ids) == 1
    meta_mod = load_payload_module(3, 12, EntityType.request)
    request_meta = build(
        meta_mod.MetadataRequest,
        topics=(build(meta_mod.MetadataRequestTopic, name=name, topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    for server in servers:  # every broker's metadata comes to name the winner's id
        with RawClient(server) as client:

            def seen(c: RawClient = client) -> Any:
                (topic,) = c.request(request_meta).topics
                return topic if topic.error_code.name == "none" else None

            until(lambda s=seen: s() is not None, f"{name} in the metadata of {server}")
            topic = seen()
        assert topic.topic_id in ids, (server, topic)
        assert len(topic.partitions) == 3


def test_concurrent_partition_increases(servers: list[str]) -> None:
    """Every client asks for 6 partitions of a 3-partition topic: one wins, the others are
    told the topic already has 6, and the topic ends with exactly 6."""
    name = unique("race-grow")
    create(servers, name, 3)
    request = CP.CreatePartitionsRequest(
        topics=(CP.CreatePartitionsTopic(name=name, count=6, assignments=None),),
        timeout=SECONDS,
        validate_only=False,
    )
    answers = at_once(servers, [request] * CLIENTS)
    results = Counter((a.results[0].error_code.name, a.results[0].error_message) for a in answers)
    assert results == {
        ("none", None): 1,
        ("invalid_partitions", "Topic already has 6 partition(s)."): CLIENTS - 1,
    }, results


def test_concurrent_growth_to_different_counts(servers: list[str]) -> None:
    """Clients ask for 4..4+n-1 partitions at once: the final count is the largest that
    any client was told succeeded, and no success is for a count below an earlier one."""
    name = unique("race-grow2")
    create(servers, name, 2)
    targets = list(range(4, 4 + 10))
    requests = [
        CP.CreatePartitionsRequest(
            topics=(CP.CreatePartitionsTopic(name=name, count=n, assignments=None),),
            timeout=SECONDS,
            validate_only=False,
        )
        for n in targets
    ]
    answers = at_once(servers, requests)
    won = [
        n for n, a in zip(targets, answers, strict=True) if a.results[0].error_code.name == "none"
    ]
    assert won, answers
    for n, a in zip(targets, answers, strict=True):
        if n not in won:
            assert a.results[0].error_code.name == "invalid_partitions", a
    meta_mod = load_payload_module(3, 12, EntityType.request)
    with RawClient(servers[-1]) as client:

        def count() -> int:
            meta = client.request(
                build(
                    meta_mod.MetadataRequest,
                    topics=(build(meta_mod.MetadataRequestTopic, name=name, topic_id=None),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
            return len(meta.topics[0].partitions)

        until(lambda: count() == max(won), f"{name} has {max(won)} partitions")


TOPIC_KEYS = [
    ("retention.ms", "86400001"),
    ("retention.bytes", "1073741825"),
    ("segment.ms", "3600001"),
    ("segment.bytes", "1048577"),
    ("max.message.bytes", "1000001"),
    ("min.insync.replicas", "1"),
    ("cleanup.policy", "delete"),
    ("delete.retention.ms", "86400002"),
    ("file.delete.delay.ms", "60001"),
    ("flush.messages", "1000001"),
    ("flush.ms", "1000002"),
    ("index.interval.bytes", "4097"),
    ("max.compaction.lag.ms", "86400003"),
    ("min.compaction.lag.ms", "1"),
    ("min.cleanable.dirty.ratio", "0.4"),
    ("message.timestamp.type", "CreateTime"),
    ("segment.index.bytes", "10485761"),
    ("segment.jitter.ms", "1"),
    ("unclean.leader.election.enable", "false"),
    ("preallocate", "false"),
]


def test_concurrent_config_changes_are_all_kept(servers: list[str]) -> None:
    """Each client sets a different key of the same topic at once (incremental): every
    change is kept; none overwrites another."""
    name = unique("race-config")
    create(servers, name)
    requests = [
        IAC.IncrementalAlterConfigsRequest(
            resources=(
                IAC.AlterConfigsResource(
                    resource_type=TOPIC,
                    resource_name=name,
                    configs=(IAC.AlterableConfig(name=key, config_operation=SET, value=value),),
                ),
            ),
            validate_only=False,
        )
        for key, value in TOPIC_KEYS
    ]
    answers = at_once(servers, requests)
    assert {a.responses[0].error_code.name for a in answers} == {"none"}, answers
    describe = DC.DescribeConfigsRequest(
        resources=(
            DC.DescribeConfigsResource(
                resource_type=TOPIC, resource_name=name, configuration_keys=None
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    for server in servers:
        with RawClient(server) as client:

            def dynamic(c: RawClient = client) -> dict[str, str]:
                configs = c.request(describe).results[0].configs
                return {x.name: x.value for x in configs if x.config_source == 1}

            until(lambda d=dynamic: d() == dict(TOPIC_KEYS), f"every key set, seen by {server}")


def test_producer_ids_stay_unique_across_broker_restart(tmp_path: Path) -> None:
    """A restarted broker asks for a new block: no id handed out before the restart is
    handed out again (3 brokers, the restarted one is the controller)."""
    request = IPI.InitProducerIdRequest(
        transactional_id=None,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
    seen: Counter[int] = Counter()
    with SluiceCluster(tmp_path, brokers=3) as cluster:
        servers = cluster.bootstrap.split(",")
        for answer in granted(servers, [request] * 15):
            seen[int(answer.producer_id)] += 1
        cluster.kill(0)
        cluster.start(0)
        for answer in granted(cluster.bootstrap.split(","), [request] * 15):
            seen[int(answer.producer_id)] += 1
    assert len(seen) == 30, [i for i, n in seen.items() if n > 1]


def test_brokers_registering_at_once(tmp_path: Path) -> None:
    """Five brokers started at the same moment all register (each a decision of the
    controller, racing the others and the controller's own activation): every broker's
    metadata lists all five, and each can lead."""
    with SluiceCluster(tmp_path, brokers=5) as cluster:
        servers = cluster.bootstrap.split(",")
        meta_mod = load_payload_module(3, 12, EntityType.request)
        request = build(
            meta_mod.MetadataRequest,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        for server in servers:
            with RawClient(server) as client:
                brokers = {b.node_id for b in client.request(request).brokers}
            assert brokers == {0, 1, 2, 3, 4}, (server, brokers)
        name = unique("race-register")
        create(servers, name, 10)
        with RawClient(servers[0]) as client:
            meta = client.request(
                build(
                    meta_mod.MetadataRequest,
                    topics=(build(meta_mod.MetadataRequestTopic, name=name, topic_id=None),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
        assert {p.leader_id for p in meta.topics[0].partitions} == {0, 1, 2, 3, 4}
