"""MirrorMaker 2 (Apache Kafka 4.3's ``connect-mirror``, dedicated mode) replicating topics
(records, partitions, configs) and consumer-group offsets (checkpoints, and
``sync.group.offsets.enabled``) from one Sluice cluster to another, and from Apache Kafka
(a real 4.3 KRaft node) to Sluice.

The mm2.properties is the one the control plane's replicators run with
(``controlplane.replicator_process.mm2_properties``), so these tests prove it too. One source
and one target cluster (3 brokers each) per module; each test runs its own MirrorMaker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from controlplane.replicator_process import ClusterAccess, Flow, write_files
from tests.controlplane.harness import wait_until
from tests.support.connect import MirrorMakerProcess, connect_available
from tests.support.kafka_oracle import KafkaOracle, oracle_available
from tests.support.mirror import (
    TOPIC_CONFIG,
    commit,
    count,
    partitions_of,
    produce,
    records,
    seed,
    topic_config,
    wait_translated,
)
from tests.support.sluice_cluster import SluiceCluster


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SluiceCluster, ...]]:
    reason = connect_available()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("mm2")
    with (
        SluiceCluster(workdir / "east", brokers=3) as east,
        SluiceCluster(workdir / "west", brokers=3) as west,
    ):
        yield east, west


def flow(source_alias: str, source: str, target: str, **options: Any) -> Flow:
    settings: dict[str, Any] = {
        "topics": ".*",
        "groups": ".*",
        "sync_group_offsets": True,
        "identical_names": False,
        "replication_factor": 3,
        "source_replication_factor": 3,
        "refresh_s": 2,
        "sync_s": 1,
        "offset_flush_ms": 1000,
        **options,
    }
    return Flow(source_alias, "west", ClusterAccess(source), ClusterAccess(target), **settings)


def run_mirror_maker(workdir: Path, name: str, flow: Flow) -> MirrorMakerProcess:
    properties = write_files(workdir, name, flow)
    process = MirrorMakerProcess(workdir / name, properties, flow.target_alias)
    process.start()
    return process


def test_sluice_to_sluice(clusters: tuple[SluiceCluster, ...], tmp_path: Path) -> None:
    east, west = clusters
    seed(east.bootstrap, "orders", 3, 300)
    seed(east.bootstrap, "audit-log", 1, 10)  # not matched by the flow's topics
    group = {("orders", 0): 100, ("orders", 1): 100, ("orders", 2): 40}
    commit(east.bootstrap, "billing", group)
    mm2 = run_mirror_maker(
        tmp_path, "east-west", flow("east", east.bootstrap, west.bootstrap, topics="orders.*")
    )
    try:
        wait_until(lambda: count(west.bootstrap, "east.orders") == 300, 120, "300 records copied")
        assert records(west.bootstrap, "east.orders") == records(east.bootstrap, "orders")
        copied = topic_config(west.bootstrap, "east.orders")
        assert {k: copied[k] for k in TOPIC_CONFIG} == TOPIC_CONFIG
        assert partitions_of(west.bootstrap, "east.orders") == 3
        assert count(west.bootstrap, "east.audit-log") == -1, "a topic the flow leaves out"
        # checkpoints, translated and committed on the target (the group has no members there)
        translated = wait_translated(west.bootstrap, "billing", "east.orders", group)
        print(f"\ngroup billing: source offsets {group}, translated on the target {translated}")
        assert count(west.bootstrap, "east.checkpoints.internal") > 0
        # it goes on: new records, and a partition added on the source
        admin = AdminClient({"bootstrap.servers": east.bootstrap})
        admin.create_partitions([NewPartitions("orders", 4)])["orders"].result(timeout=30)
        produce(east.bootstrap, "orders", 4, 300, 100)
        wait_until(lambda: partitions_of(west.bootstrap, "east.orders") == 4, 60, "4 partitions")
        wait_until(lambda: count(west.bootstrap, "east.orders") == 400, 60, "400 records")
        assert records(west.bootstrap, "east.orders") == records(east.bootstrap, "orders")
        assert "UnsupportedVersionException" not in mm2.log_path.read_text()
    finally:
        mm2.stop()


# a Kafka JVM beside the Sluice clusters; test_sluice_to_sluice runs the same
# MirrorMaker 2 path in `make test`
@pytest.mark.long
def test_apache_kafka_to_sluice(clusters: tuple[SluiceCluster, ...], tmp_path: Path) -> None:
    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    _, west = clusters
    with KafkaOracle(tmp_path / "kafka") as kafka:
        seed(kafka.bootstrap, "events", 2, 200, replicas=1)
        audit = {("events", 0): 70, ("events", 1): 100}
        commit(kafka.bootstrap, "audit", audit)
        mirror = flow(
            "kafka",
            kafka.bootstrap,
            west.bootstrap,
            identical_names=True,
            source_replication_factor=1,
        )
        mm2 = run_mirror_maker(tmp_path, "kafka-west", mirror)
        try:
            wait_until(lambda: count(west.bootstrap, "events") == 200, 120, "200 records copied")
            assert records(west.bootstrap, "events") == records(kafka.bootstrap, "events")
            copied = topic_config(west.bootstrap, "events")
            assert {k: copied[k] for k in TOPIC_CONFIG} == TOPIC_CONFIG
            translated = wait_translated(west.bootstrap, "audit", "events", audit)
            print(f"\ngroup audit: source offsets {audit}, translated on the target {translated}")
            assert "UnsupportedVersionException" not in mm2.log_path.read_text()
        finally:
            mm2.stop()
