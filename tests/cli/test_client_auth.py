"""Client authentication of clusters (MSK's client_authentication) through cloudctl and a
real control plane: a cluster created with scram and tls listeners serves a SCRAM user over
SASL_SSL and an mTLS client over SSL (both trusting `cloudctl get-ca-cert`), refuses a
PLAINTEXT client on its SASL_SSL port, and the control plane manages its topics over the
internal listener; no password is on a broker's command line, in a log or in GetCluster. A
cluster created open keeps its records and its bootstrap string through
`update-cluster-security` to none+scram (its brokers restart together, once), then to
scram+tls (one at a time)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
)

from controlplane.ca import CertificateAuthority
from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import clusters_pb2_grpc
from tests.cli.conftest import Cloud

SECURED, OPENED = "auth-secured", "auth-opened"
USER, PASSWORD = "alice", "alice-Secret-123"
TOPIC, RECORDS = "orders", 300


def cli(cloud: Cloud, *args: str) -> Any:
    done = cloud.run(*args, "-o", "json")
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def internal_credentials(cloud: Cloud, name: str) -> dict[str, str]:
    """The internal user's file, read as only the control plane's owner can."""
    (path,) = (cloud.home / "clusters").glob(f"{name}-*/security/internal.json")
    found: dict[str, str] = json.loads(path.read_text())
    return found


def internal_admin(cloud: Cloud, name: str) -> AdminClient:
    """An admin client on the brokers' internal listener, as the internal (super) user."""
    cluster = cli(cloud, "describe-cluster", name)
    credentials = internal_credentials(cloud, name)
    return AdminClient(
        {
            "bootstrap.servers": ",".join(b["address"] for b in cluster["brokers"]),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": credentials["username"],
            "sasl.password": credentials["password"],
        }
    )


def create_user(cloud: Cloud, name: str) -> None:
    """alice, through cloudctl (the password on stdin), with READ and WRITE on the topic and
    READ on every group: a secured cluster enforces ACLs."""
    made = cloud.run("create-user", "--cluster", name, USER, "--password-stdin", stdin=PASSWORD)
    assert made.returncode == 0, made.stderr
    grant(cloud, name, f"User:{USER}")


def grant(cloud: Cloud, name: str, principal: str) -> None:
    for operation, resource in (
        ("read", ("--topic", TOPIC)),
        ("write", ("--topic", TOPIC)),
        ("read", ("--group", "*")),
    ):
        cli(
            cloud, "create-acl", "--cluster", name, "--principal", principal,
            "--operation", operation, *resource,
        )  # fmt: skip


def ca_bundle(cloud: Cloud, name: str) -> str:
    done = cloud.run("get-ca-cert", name)
    assert done.returncode == 0, done.stderr
    path = cloud.home / "client-ca.pem"
    path.write_text(done.stdout)
    return str(path)


def scram_conf(cloud: Cloud, name: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": cli(cloud, "get-bootstrap-brokers", name, "--auth", "scram")[
            "bootstrap_brokers"
        ],
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
        "ssl.ca.location": ca_bundle(cloud, name),
    }


def tls_conf(cloud: Cloud, name: str, common_name: str = "bob") -> dict[str, Any]:
    issued = CertificateAuthority.load_or_create(cloud.home).issue_client(common_name)
    cert, key = issued.write(cloud.home / "client-certs", common_name)
    return {
        "bootstrap.servers": cli(cloud, "get-bootstrap-brokers", name, "--auth", "tls")[
            "bootstrap_brokers"
        ],
        "security.protocol": "SSL",
        "ssl.ca.location": ca_bundle(cloud, name),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }


def produce(conf: dict[str, Any], topic: str, values: list[str]) -> None:
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value.encode())
    assert producer.flush(60) == 0


def consume(conf: dict[str, Any], topic: str, count: int, group: str) -> list[str]:
    """Up to ``count`` values of the topic's 3 partitions, from the start (assigned: no
    group rebalance to wait for)."""
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    got: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                assert message.error() is None, message.error()
                got.append((message.value() or b"").decode())
    finally:
        consumer.close()
    return got


def fails(conf: dict[str, Any]) -> KafkaException:
    """The error a client gets listing topics (it must not succeed)."""
    with pytest.raises(KafkaException) as caught:
        AdminClient({**conf, "log_level": 0}).list_topics(timeout=5)
    return caught.value


def login_error(conf: dict[str, Any]) -> int:
    """The code librdkafka reports to error_cb (from poll) for a connection that fails."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error reported"
    return int(errors[0].code())


def delete(cloud: Cloud, name: str) -> None:
    done = cloud.run("delete-cluster", name, "--yes", "--if-exists", "--wait")
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def secured(shared_cloud: Cloud) -> Iterator[Cloud]:
    made = shared_cloud.run(
        "create-cluster",
        SECURED,
        "--brokers",
        "3",
        "--client-auth",
        "scram",
        "--client-auth",
        "tls",
        "--wait",
    )
    assert made.returncode == 0, made.stderr
    try:
        cli(shared_cloud, "create-topic", "--cluster", SECURED, TOPIC, "--partitions", "3")
        create_user(shared_cloud, SECURED)
        yield shared_cloud
    finally:
        delete(shared_cloud, SECURED)


def test_describe_cluster_shows_the_modes_and_listeners(secured: Cloud) -> None:
    cluster = cli(secured, "describe-cluster", SECURED)
    assert cluster["client_auth"] == ["SCRAM", "TLS"]
    for broker in cluster["brokers"]:
        kinds = [(x["client_auth"], x["security_protocol"]) for x in broker["listeners"]]
        assert kinds == [("SCRAM", "SASL_SSL"), ("TLS", "SSL")]
        assert broker["port"] not in {x["port"] for x in broker["listeners"]}
    table = secured.run("describe-cluster", SECURED)
    assert re.search(r"^client auth: +scram, tls$", table.stdout, re.M)


def test_bootstrap_strings_per_listener(secured: Cloud) -> None:
    found = cli(secured, "get-bootstrap-brokers", SECURED)
    assert found["client_auth"] == "SCRAM"
    assert found["bootstrap_brokers"] == found["BootstrapBrokerStringSaslScram"]
    assert found["BootstrapBrokerString"] == ""
    tls = secured.run("get-bootstrap-brokers", SECURED, "--auth", "tls")
    assert tls.stdout.strip() == found["BootstrapBrokerStringTls"] != ""
    assert (
        cli(secured, "describe-cluster", SECURED)["bootstrap_brokers"]
        == (found["bootstrap_brokers"])
    )
    missing = secured.run("get-bootstrap-brokers", SECURED, "--auth", "none")
    assert missing.returncode == 1
    assert "has no none listener" in missing.stderr
    assert "update-cluster-security" in missing.stderr


def test_the_control_plane_manages_topics_over_the_internal_listener(secured: Cloud) -> None:
    topic = cli(secured, "describe-topic", "--cluster", SECURED, TOPIC)
    assert all(len(p["isr"]) == 3 for p in topic["partition_details"]), topic


def test_a_scram_user_produces_and_consumes_over_sasl_ssl(secured: Cloud) -> None:
    conf = scram_conf(secured, SECURED)
    values = [f"scram-{i}" for i in range(20)]
    produce(conf, TOPIC, values)
    assert sorted(consume(conf, TOPIC, 20, "scram-group")) == sorted(values)
    assert login_error({**conf, "sasl.password": "not-" + PASSWORD}) == KafkaError._AUTHENTICATION


def test_an_mtls_client_produces_and_consumes_over_ssl(secured: Cloud) -> None:
    conf = tls_conf(secured, SECURED)
    outcomes: list[Any] = []
    refused = Producer({**conf, "acks": "all", "message.timeout.ms": 20000})
    refused.produce(TOPIC, b"denied", on_delivery=lambda err, _msg: outcomes.append(err))
    refused.flush(30)
    assert [e.code() for e in outcomes] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], outcomes
    grant(secured, SECURED, "User:CN=bob")  # the certificate subject is the principal
    values = [f"tls-{i}" for i in range(20)]
    produce(conf, TOPIC, values)
    assert set(values) <= set(consume(conf, TOPIC, 40, "tls-group"))
    without_certificate = {
        k: v for k, v in conf.items() if k not in ("ssl.certificate.location", "ssl.key.location")
    }
    fails(without_certificate)


def test_a_plaintext_client_on_the_sasl_ssl_port_fails_cleanly(secured: Cloud) -> None:
    conf = scram_conf(secured, SECURED)
    fails({"bootstrap.servers": conf["bootstrap.servers"]})
    produce(conf, TOPIC, ["after-plaintext"])  # the brokers serve on


def test_no_password_on_a_command_line_in_a_log_or_in_get_cluster(secured: Cloud) -> None:
    internal = internal_credentials(secured, SECURED)["password"]
    cluster = cli(secured, "describe-cluster", SECURED)
    for broker in cluster["brokers"]:
        raw = Path(f"/proc/{broker['pid']}/cmdline").read_bytes().decode()
        assert "inter.broker.credentials.file=" in raw  # passed as a file name
        assert internal not in raw
        assert PASSWORD not in raw
    for log in [*(secured.home / "logs").rglob("*.log")]:
        text = log.read_text(errors="replace")
        assert internal not in text, log
        assert PASSWORD not in text, log
    token = (secured.home / "token").read_text().strip()
    with grpc.insecure_channel(secured.endpoint) as channel:
        answer = clusters_pb2_grpc.ClustersStub(channel).GetCluster(
            pb.GetClusterRequest(name=SECURED),
            metadata=(("authorization", f"Bearer {token}"),),
            timeout=10,
        )
    assert internal.encode() not in answer.SerializeToString()
    security = next((secured.home / "clusters").glob(f"{SECURED}-*/security"))
    for path in security.iterdir():
        if path.suffix in (".json", ".key") or path.name == "bootstrap-users":
            assert path.stat().st_mode & 0o077 == 0, path


# two rolling updates of a cluster (2 min); a rolling reboot keeping every record runs in
# `make test` (tests/e2e/test_reboot.py), and the secured modes here
@pytest.mark.long
def test_update_from_none_to_none_and_scram_keeps_records(shared_cloud: Cloud) -> None:
    cloud = shared_cloud
    made = cloud.run("create-cluster", OPENED, "--brokers", "3", "--wait")
    assert made.returncode == 0, made.stderr
    try:
        cli(cloud, "create-topic", "--cluster", OPENED, TOPIC, "--partitions", "3")
        plaintext = cli(cloud, "get-bootstrap-brokers", OPENED)["bootstrap_brokers"]
        values = [f"before-{i}" for i in range(RECORDS)]
        produce({"bootstrap.servers": plaintext}, TOPIC, values)

        done = cloud.run(
            "update-cluster-security",
            OPENED,
            "--client-auth",
            "none",
            "--client-auth",
            "scram",
            "--wait",
        )
        assert done.returncode == 0, done.stderr
        assert "together" in done.stderr
        found = cli(cloud, "get-bootstrap-brokers", OPENED)
        assert found["bootstrap_brokers"] == found["BootstrapBrokerString"] == plaintext
        got = consume({"bootstrap.servers": plaintext}, TOPIC, RECORDS, "plain-group")
        assert sorted(got) == sorted(values)
        create_user(cloud, OPENED)
        got = consume(scram_conf(cloud, OPENED), TOPIC, RECORDS, "scram-group")
        assert sorted(got) == sorted(values)
        assert cli(cloud, "describe-cluster", OPENED)["client_auth"] == ["NONE", "SCRAM"]

        # without a `none` listener the cluster is closed to principals without ACLs
        grant(cloud, OPENED, "User:CN=bob")
        # the internal listener stays: the next change restarts one broker at a time
        done = cloud.run(
            "update-cluster-security",
            OPENED,
            "--client-auth",
            "scram",
            "--client-auth",
            "tls",
            "--wait",
        )
        assert done.returncode == 0, done.stderr
        assert "rolling restart: broker" in done.stderr
        assert cloud.run("get-bootstrap-brokers", OPENED, "--auth", "none").returncode == 1
        got = consume(tls_conf(cloud, OPENED), TOPIC, RECORDS, "tls-group")
        assert sorted(got) == sorted(values)
        operations = cli(cloud, "list-operations", OPENED)["operations"]
        updates = [op for op in operations if op["type"] == "UPDATE_SECURITY"]
        assert [op["state"] for op in updates] == ["COMPLETED", "COMPLETED"]
        assert updates[0]["detail"] == "client auth none -> none+scram"
    finally:
        delete(cloud, OPENED)


def test_cloudctl_produce_and_consume_with_a_client_config(secured: Cloud) -> None:
    """The secrets in a file (as Kafka's --command-config), its security.protocol picking the
    listener: SASL_SSL goes to the scram listener."""
    conf = scram_conf(secured, SECURED)
    path = secured.home / "alice.properties"
    path.write_text(
        "# alice over SCRAM\n"
        + "".join(f"{k}={v}\n" for k, v in conf.items() if k != "bootstrap.servers")
    )
    path.chmod(0o600)
    lines = "".join(f"cfg-{i}\n" for i in range(5))
    made = secured.run(
        "produce", "--cluster", SECURED, TOPIC, "--client-config", str(path), stdin=lines
    )
    assert made.returncode == 0, made.stderr
    read = secured.run(
        "consume", "--cluster", SECURED, TOPIC, "--client-config", str(path), "-e", "-o", "json"
    )
    assert read.returncode == 0, read.stderr
    values = {json.loads(line)["value"] for line in read.stdout.splitlines()}
    assert {f"cfg-{i}" for i in range(5)} <= values
    cli(secured, "create-topic", "--cluster", SECURED, "locked", "--partitions", "1")
    cli(secured, "create-acl", "--cluster", SECURED, "--principal", f"User:{USER}",
        "--operation", "write", "--topic", "locked")  # fmt: skip
    refused = secured.run(
        "consume", "--cluster", SECURED, "locked", "--client-config", str(path), "-e"
    )
    assert refused.returncode == 1, "WRITE but no READ: an error, not an endless retry"
    assert "not authorized to read topic 'locked'" in refused.stderr
    assert "cloudctl create-acl" in refused.stderr
    plain = secured.run("produce", "--cluster", SECURED, TOPIC, stdin="x\n")
    assert plain.returncode == 1
    assert "takes authenticated clients only" in plain.stderr
    assert "--client-config" in plain.stderr
