"""A three-broker cluster with a SASL_SSL listener beside each broker's PLAINTEXT one:
clients that bootstrap through SASL_SSL are given every broker's SASL_SSL address (each
broker registers its listeners), and a user created through one broker (forwarded to the
controller) logs in at another."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.security.conftest import (
    ALICE,
    ALICE_PASSWORD,
    secured_settings,
    users_file,
    wait_for_user,
)
from tests.support.processes import free_ports
from tests.support.sluice_cluster import SluiceCluster
from tests.support.tls import TestCA


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[SluiceCluster, list[int], TestCA]]:
    ca = TestCA(tmp_path / "tls")
    users = users_file(tmp_path, [f"SCRAM-SHA-512=[name={ALICE},password={ALICE_PASSWORD}]"])
    cluster = SluiceCluster(tmp_path / "cluster", 3, {"offsets.topic.replication.factor": "3"})
    sasl_ports = free_ports(3)
    for i, broker in enumerate(cluster.brokers):
        broker.settings.update(
            secured_settings(
                ca,
                users,
                listeners=f"PLAINTEXT://127.0.0.1:{cluster.kafka_ports[i]},"
                f"SASL_SSL://127.0.0.1:{sasl_ports[i]}",
            )
        )
    cluster.start()
    try:
        wait_for_user(cluster.brokers[0].bootstrap, ALICE)
        yield cluster, sasl_ports, ca
    finally:
        cluster.stop()


def _conf(address: str, ca: TestCA, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": address,
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(ca.ca),
    }


def test_clients_are_given_the_listener_they_came_through(
    cluster: tuple[SluiceCluster, list[int], TestCA],
) -> None:
    sluice, sasl_ports, ca = cluster
    conf = _conf(f"127.0.0.1:{sasl_ports[2]}", ca, ALICE, ALICE_PASSWORD)
    admin = AdminClient(conf)
    brokers = admin.list_topics(timeout=20).brokers
    assert sorted(b.port for b in brokers.values()) == sorted(sasl_ports)
    for future in admin.create_topics([NewTopic("spread", 3, 3)]).values():
        future.result(20)
    producer = Producer(conf)
    for i in range(30):
        producer.produce("spread", f"v{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "spread-g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["spread"])
    got = 0
    deadline = time.monotonic() + 40
    while got < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    consumer.close()
    assert got == 30

    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    made = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("dave", sha512, b"dave-secret")]
    )
    made["dave"].result(20)
    for port in sasl_ports:  # known everywhere (forwarded answers wait for the local image)
        other = AdminClient(_conf(f"127.0.0.1:{port}", ca, "dave", "dave-secret"))
        assert other.list_topics(timeout=20).brokers
    assert all("Traceback" not in b.logs() for b in sluice.brokers)
