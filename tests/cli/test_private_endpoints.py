"""Private endpoints (MSK's multi-VPC connectivity) through cloudctl and a real control plane,
on one 2-broker SCRAM cluster: endpoint A admits alice, endpoint B admits bob, each on its
own loopback address. A client bootstrapping through A learns only A's addresses (Metadata),
with A's address in the brokers' certificates (the TLS host name check passes); alice
produces and consumes through A and is refused at B with her valid password. The endpoints
survive a broker reboot, a new broker (scale-out) gets both listeners, and deleting B drops
an open connection to it and refuses new ones while A goes on."""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.metadata.v12.request import MetadataRequest

from tests.cli.conftest import Cloud
from tests.support.scram_login import logs_in
from wire.client import BlockingConnection, ConnectFailed
from wire.sasl import ClientSecurity

CLUSTER = "pe-scram"
TOPIC = "orders"
USERS = {"alice": "alice-Secret-123", "bob": "bob-Secret-456"}
ENDPOINTS = {"A": "alice", "B": "bob"}


def cli(cloud: Cloud, *args: str) -> Any:
    done = cloud.run(*args, "-o", "json")
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def endpoint(cloud: Cloud, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cli(cloud, "describe-private-endpoint", "--cluster", CLUSTER, name)
    return found


def conf(cloud: Cloud, name: str, user: str) -> dict[str, str]:
    """librdkafka's settings for ``user`` through endpoint ``name`` (its bootstrap string
    from cloudctl; the CA bundle from get-ca-cert; the host name checked, librdkafka's
    default)."""
    bootstrap = cloud.run("get-bootstrap-brokers", CLUSTER, "--endpoint", name)
    assert bootstrap.returncode == 0, bootstrap.stderr
    return {
        "bootstrap.servers": bootstrap.stdout.strip(),
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": USERS[user],
        "ssl.ca.location": str(cloud.home / f"{CLUSTER}-ca.pem"),
        "ssl.endpoint.identification.algorithm": "https",
    }


def metadata_addresses(settings: dict[str, str]) -> set[str]:
    brokers = AdminClient(dict(settings)).list_topics(timeout=20).brokers
    return {f"{b.host}:{b.port}" for b in brokers.values()}


def produce_and_consume(settings: dict[str, str], tag: str) -> None:
    values = [f"{tag}-{i}" for i in range(20)]
    producer = Producer({**settings, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(TOPIC, value.encode())
    assert producer.flush(60) == 0
    consumer = Consumer({**settings, "group.id": f"g-{tag}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(2)])
    got: set[str] = set()
    deadline = time.monotonic() + 60
    try:
        while not set(values) <= got and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                assert message.error() is None, message.error()
                got.add((message.value() or b"").decode())
    finally:
        consumer.close()
    assert set(values) <= got


def connect(settings: dict[str, str], address: str) -> BlockingConnection:
    """A connection to one broker's listener, TLS (host name checked) and SCRAM done."""
    security = ClientSecurity.from_properties(settings)
    return BlockingConnection.to(address, security=security, client_id="pe-test", timeout=10)


def metadata(connection: BlockingConnection) -> set[str]:
    answer = connection.request(
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    )
    return {f"{b.host}:{b.port}" for b in answer.brokers}


def closed_by_peer(connection: BlockingConnection, timeout: float) -> bool:
    connection.sock.settimeout(timeout)
    try:
        return connection.sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


@pytest.fixture(scope="module")
def endpoints_cloud(shared_cloud: Cloud) -> Iterator[Cloud]:
    made = shared_cloud.run(
        "create-cluster", CLUSTER, "--brokers", "2", "--client-auth", "scram", "--wait"
    )
    assert made.returncode == 0, made.stderr
    try:
        ca = shared_cloud.run("get-ca-cert", CLUSTER)
        (shared_cloud.home / f"{CLUSTER}-ca.pem").write_text(ca.stdout)
        cli(shared_cloud, "create-topic", "--cluster", CLUSTER, TOPIC, "--partitions", "2")
        for user, password in USERS.items():
            done = shared_cloud.run(
                "create-user", "--cluster", CLUSTER, user, "--password-stdin", stdin=password
            )
            assert done.returncode == 0, done.stderr
            for operation, resource in (
                ("read", ("--topic", TOPIC)),
                ("write", ("--topic", TOPIC)),
                ("read", ("--group", "*")),
            ):
                cli(
                    shared_cloud, "create-acl", "--cluster", CLUSTER, "--principal",
                    f"User:{user}", "--operation", operation, *resource,
                )  # fmt: skip
        for name, user in ENDPOINTS.items():
            created = cli(
                shared_cloud, "create-private-endpoint", "--cluster", CLUSTER, name,
                "--allow-principal", f"User:{user}", "--wait",
            )  # fmt: skip
            assert created["state"] == "ACTIVE"
        yield shared_cloud
    finally:
        shared_cloud.run("delete-cluster", CLUSTER, "--yes", "--if-exists", "--wait")


def test_each_endpoint_has_its_own_address_listener_and_ports(endpoints_cloud: Cloud) -> None:
    cloud = endpoints_cloud
    a, b = endpoint(cloud, "A"), endpoint(cloud, "B")
    assert (a["listener_name"], b["listener_name"]) == ("ENDPOINT_A", "ENDPOINT_B")
    assert a["security_protocol"] == b["security_protocol"] == "SASL_SSL"
    assert a["client_auth"] == "SCRAM", "the cluster's first mode"
    assert a["allowed_principals"] == ["User:alice"]
    assert a["address"] != b["address"]
    assert a["address"].startswith("127.")
    assert a["address"] != "127.0.0.1"
    assert [x["broker_id"] for x in a["brokers"]] == [0, 1]
    assert a["bootstrap_brokers"] == ",".join(x["address"] for x in a["brokers"])
    assert all(x["address"] == f"{a['address']}:{x['port']}" for x in a["brokers"])
    listed = cli(cloud, "list-private-endpoints", "--cluster", CLUSTER)["endpoints"]
    assert [e["name"] for e in listed] == ["A", "B"]
    operations = cli(cloud, "list-operations", CLUSTER)["operations"]
    connectivity = [op for op in operations if op["type"] == "UPDATE_CONNECTIVITY"]
    assert [op["state"] for op in connectivity] == ["COMPLETED", "COMPLETED"]
    assert connectivity[0]["detail"] == (
        f"create private endpoint A (scram at {a['address']}, allow User:alice)"
    )


def test_a_client_of_an_endpoint_learns_only_its_addresses(endpoints_cloud: Cloud) -> None:
    cloud = endpoints_cloud
    a = endpoint(cloud, "A")
    own = {x["address"] for x in a["brokers"]}
    settings = conf(cloud, "A", "alice")
    assert metadata_addresses(settings) == own
    found = cli(cloud, "get-bootstrap-brokers", CLUSTER, "--endpoint", "A")
    assert (found["endpoint"], found["client_auth"]) == ("A", "SCRAM")
    assert found["bootstrap_brokers"] == a["bootstrap_brokers"]
    assert found["BootstrapBrokerStringSaslScram"] not in ("", a["bootstrap_brokers"])
    # Python's TLS checks the endpoint's address against the broker's certificate
    with connect(settings, a["brokers"][1]["address"]) as connection:
        assert metadata(connection) == own


def test_alice_works_through_a_and_is_refused_at_b(endpoints_cloud: Cloud) -> None:
    cloud = endpoints_cloud
    produce_and_consume(conf(cloud, "A", "alice"), "alice-a")
    assert not logs_in(conf(cloud, "B", "alice")), "alice's valid password, at B"
    assert logs_in(conf(cloud, "B", "bob"))
    assert not logs_in(conf(cloud, "A", "bob"))


def test_refusals_change_nothing(endpoints_cloud: Cloud) -> None:
    cloud = endpoints_cloud
    for args, expected in (
        (["a"], "has a private endpoint 'A' already"),
        (["C", "--auth", "tls"], "has no tls listener"),
        (["9lives"], "invalid private endpoint name"),
        (["C", "--allow-principal", "alice"], "is not a principal"),
    ):
        done = cloud.run("create-private-endpoint", "--cluster", CLUSTER, *args)
        assert done.returncode == 1, done.stderr
        assert expected in done.stderr, done.stderr
    missing = cloud.run("get-bootstrap-brokers", CLUSTER, "--endpoint", "nope")
    assert missing.returncode == 1
    assert "list-private-endpoints" in missing.stderr
    listed = cli(cloud, "list-private-endpoints", "--cluster", CLUSTER)["endpoints"]
    assert [e["name"] for e in listed] == ["A", "B"]


def test_endpoints_survive_a_broker_reboot(endpoints_cloud: Cloud) -> None:
    cloud = endpoints_cloud
    before = endpoint(cloud, "A")
    done = cloud.run("reboot-broker", CLUSTER, "--broker", "1", "--wait")
    assert done.returncode == 0, done.stderr
    assert endpoint(cloud, "A")["brokers"] == before["brokers"], "same ports"
    settings = conf(cloud, "A", "alice")
    assert metadata_addresses(settings) == {x["address"] for x in before["brokers"]}
    produce_and_consume(settings, "alice-after-reboot")


def test_a_new_broker_gets_every_endpoint(endpoints_cloud: Cloud) -> None:
    cloud = endpoints_cloud
    done = cloud.run("update-broker-count", CLUSTER, "--brokers", "3", "--wait")
    assert done.returncode == 0, done.stderr
    for name, user in ENDPOINTS.items():
        found = endpoint(cloud, name)
        assert [x["broker_id"] for x in found["brokers"]] == [0, 1, 2]
        assert metadata_addresses(conf(cloud, name, user)) == {
            x["address"] for x in found["brokers"]
        }


def test_deleting_an_endpoint_drops_its_connections(endpoints_cloud: Cloud) -> None:
    cloud = endpoints_cloud
    b = endpoint(cloud, "B")
    settings = conf(cloud, "B", "bob")
    opened = [connect(settings, x["address"]) for x in b["brokers"]]
    try:
        assert all(metadata(c) == {x["address"] for x in b["brokers"]} for c in opened)
        done = cloud.run("delete-private-endpoint", "--cluster", CLUSTER, "B", "--wait")
        assert done.returncode == 0, done.stderr
        assert "rolling restart: broker" in done.stderr
        assert all(closed_by_peer(c, 10) for c in opened)
    finally:
        for connection in opened:
            connection.close()
    for x in b["brokers"]:
        with pytest.raises(ConnectFailed):
            connect(settings, x["address"])
    assert [
        e["name"] for e in cli(cloud, "list-private-endpoints", "--cluster", CLUSTER)["endpoints"]
    ] == ["A"]
    gone = cloud.run("describe-private-endpoint", "--cluster", CLUSTER, "B")
    assert gone.returncode == 1
    again = cli(cloud, "delete-private-endpoint", "--cluster", CLUSTER, "B", "--if-exists")
    assert again["existed"] is False
    produce_and_consume(conf(cloud, "A", "alice"), "alice-after-delete")
