"""Brokers authenticate to each other: a three-broker cluster whose inter-broker listener (at
--listen) is SASL_PLAINTEXT. Registration, forwarding and replication log in with the
inter-broker credentials file; the Raft quorum's port answers only a peer that proves it
holds the same secret; a client without credentials gets nothing from either."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dataplane.config import BrokerConfig
from dataplane.security.listeners import check_security, parse_listeners
from tests.security.conftest import users_file
from tests.support.broker import BrokerProcess
from tests.support.processes import free_port
from tests.support.sluice_cluster import SluiceCluster
from wire.errors import InvalidConfig
from wire.sasl import Mechanism, SaslCredentials, load_credentials, write_credentials

INTERNAL, INTERNAL_PASSWORD = "sluice-internal", "internal-secret-0123456789"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SluiceCluster]:
    tmp_path = tmp_path_factory.mktemp("inter-broker")
    users = users_file(tmp_path, [f"SCRAM-SHA-512=[name={INTERNAL},password={INTERNAL_PASSWORD}]"])
    credentials = tmp_path / "internal.json"
    write_credentials(credentials, SaslCredentials(INTERNAL, INTERNAL_PASSWORD))
    cluster = SluiceCluster(
        tmp_path / "cluster",
        3,
        # Three partitions, not fifty: the group below waits for them all to get leaders.
        {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3"},
    )
    for i, broker in enumerate(cluster.brokers):
        broker.settings.update(
            {
                "listeners": f"INTERNAL://127.0.0.1:{cluster.kafka_ports[i]}",
                "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "sasl.scram.bootstrap.users.file": str(users),
                "inter.broker.credentials.file": str(credentials),
            }
        )
    cluster.start(wait=False)
    try:
        admin = AdminClient(conf(cluster.bootstrap))
        deadline = time.monotonic() + 60
        while True:
            try:
                if len(admin.list_topics(timeout=2).brokers) == 3:
                    break
            except Exception:
                pass
            assert time.monotonic() < deadline, cluster.all_logs()
            time.sleep(0.2)
        yield cluster
    finally:
        cluster.stop()


def conf(bootstrap: str, password: str = INTERNAL_PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": INTERNAL,
        "sasl.password": password,
        "log_level": 0,
    }


def test_a_cluster_forms_and_replicates_over_sasl(cluster: SluiceCluster) -> None:
    admin = AdminClient(conf(cluster.bootstrap))
    for future in admin.create_topics([NewTopic("replicated", 3, 3)]).values():
        future.result(30)
    producer = Producer({**conf(cluster.bootstrap), "acks": "all", "enable.idempotence": True})
    for i in range(300):
        producer.produce("replicated", f"v{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    deadline = time.monotonic() + 30
    while True:  # every follower fetched over the authenticated listener
        meta = admin.list_topics("replicated", timeout=10).topics["replicated"]
        if all(sorted(p.isrs) == [0, 1, 2] for p in meta.partitions.values()):
            break
        assert time.monotonic() < deadline, {p: m.isrs for p, m in meta.partitions.items()}
        time.sleep(0.2)
    consumer = Consumer(
        {**conf(cluster.bootstrap), "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["replicated"])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60  # the group's first join creates __consumer_offsets
    while len(seen) < 300 and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            assert msg.error() is None, msg.error()
            seen.add(msg.value() or b"")
    consumer.close()
    assert len(seen) == 300


def test_the_raft_port_closes_a_peer_without_the_secret(cluster: SluiceCluster) -> None:
    _, raft_port = cluster.ports(1)
    with socket.create_connection(("127.0.0.1", raft_port), timeout=5) as sock:
        nonce = sock.recv(32)
        assert len(nonce) == 32, "a challenge comes first"
        sock.sendall(b"\0" * 32 + b"\x00\x00\x00\x10" + b"x" * 16)  # a wrong proof, a frame
        sock.settimeout(10)
        assert sock.recv(1) == b"", "closed without reading the frame"
    deadline = time.monotonic() + 10
    while "did not prove the cluster's secret" not in cluster.logs(1, 400):
        assert time.monotonic() < deadline, cluster.logs(1)
        time.sleep(0.1)


def test_a_wrong_password_gets_nothing(cluster: SluiceCluster) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**conf(cluster.bootstrap, password="wrong"), "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error reported"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors[0]


def test_an_inter_broker_sasl_listener_needs_credentials(tmp_path: Path) -> None:
    config = BrokerConfig.build(
        data_dir=str(tmp_path),
        listen="127.0.0.1:9092",
        overrides={
            "listeners": "INTERNAL://127.0.0.1:9092",
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
        },
    )
    with pytest.raises(InvalidConfig, match=r"set inter\.broker\.credentials\.file"):
        check_security(config, parse_listeners(config, "127.0.0.1", 9092))
    tls = BrokerConfig.build(
        data_dir=str(tmp_path),
        listen="127.0.0.1:9092",
        overrides={
            "listeners": "SSL://127.0.0.1:9092",
            "ssl.certificate.location": "c.pem",
            "ssl.key.location": "k.pem",
        },
    )
    with pytest.raises(InvalidConfig, match="PLAINTEXT or SASL_PLAINTEXT only"):
        check_security(tls, parse_listeners(tls, "127.0.0.1", 9092))


def test_the_credentials_file_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    write_credentials(path, SaslCredentials("u", "p", Mechanism.SCRAM_SHA_256))
    assert path.stat().st_mode & 0o777 == 0o600
    loaded = load_credentials(path)
    assert loaded == SaslCredentials("u", "p", Mechanism.SCRAM_SHA_256)
    assert "p" not in repr(loaded).replace("SCRAM", "")
    path.chmod(0o644)
    with pytest.raises(ValueError, match="readable by others"):
        load_credentials(path)
    path.chmod(0o600)
    path.write_text(json.dumps({"username": "u"}))
    with pytest.raises(ValueError, match="not JSON with username, password"):
        load_credentials(path)
    path.write_text(json.dumps({"username": "u", "password": "p", "mechanism": "GSSAPI"}))
    with pytest.raises(ValueError, match="not JSON with username"):
        load_credentials(path)


def test_a_broker_with_a_bad_credentials_file_does_not_start(tmp_path: Path) -> None:
    path = tmp_path / "open.json"
    path.write_text(json.dumps({"username": "u", "password": "p"}))
    path.chmod(0o644)
    port = free_port()
    broker = BrokerProcess(
        tmp_path / "data",
        {
            "listeners": f"INTERNAL://127.0.0.1:{port}",
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
            "inter.broker.credentials.file": str(path),
        },
        port=port,
    )
    broker.spawn()
    try:
        with pytest.raises(RuntimeError, match="broker exited") as exited:
            broker.wait_listening(30)
        assert "inter.broker.credentials.file" in str(exited.value)
        assert "chmod 600" in str(exited.value)
    finally:
        broker.kill()
