"""format("sluice") through a private endpoint of a secured cluster: ``sluice.cluster`` +
``sluice.endpoint`` resolve the endpoint's bootstrap string through the control plane,
``kafka.security.protocol`` / ``kafka.sasl.*`` / ``kafka.ssl.*`` log in as alice (admitted
by the endpoint, READ by ACL), and the tiered part of the read uses the cluster's read-only
object-store key (scoped to its bucket) that GetCluster hands out. An endpoint the cluster
does not have is an error that says where to look."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from spark.control_plane import with_cluster
from spark.options import OptionError, read_options
from spark.planning import TieredSplit, plan
from spark.remote_log import describe_remote_log
from tests.cli.conftest import Cloud, running_cloud
from tests.controlplane.harness import wait_until
from wire.sasl import ClientSecurity

CLUSTER, TOPIC, ENDPOINT = "spark-private", "events", "analytics"
USER, PASSWORD = "alice", "alice-Secret-123"
RECORDS = 1200


def ok(cloud: Cloud, *args: str, stdin: str = "") -> Any:
    done = cloud.run(*args, "-o", "json", stdin=stdin)
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout) if done.stdout.strip() else None


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    with running_cloud(tmp_path_factory.mktemp("spark-private")) as running:
        ok(running, "create-cluster", CLUSTER, "--brokers", "1", "--client-auth", "scram",
           "--config", "remote.log.manager.task.interval.ms=200",
           "--config", "log.retention.check.interval.ms=200", "--wait")  # fmt: skip
        ok(running, "create-topic", "--cluster", CLUSTER, TOPIC, "--partitions", "1",
           "--config", "remote.storage.enable=true", "--config", "segment.bytes=20000",
           "--config", "local.retention.bytes=40000")  # fmt: skip
        ok(running, "create-user", "--cluster", CLUSTER, USER, "--password-stdin", stdin=PASSWORD)
        for operation in ("read", "write"):
            ok(running, "create-acl", "--cluster", CLUSTER, "--principal", f"User:{USER}",
               "--operation", operation, "--topic", TOPIC)  # fmt: skip
        ok(running, "create-private-endpoint", "--cluster", CLUSTER, ENDPOINT,
           "--allow-principal", f"User:{USER}", "--wait")  # fmt: skip
        yield running


def client_conf(cloud: Cloud) -> dict[str, str]:
    ca = cloud.home / "ca-bundle.pem"
    ca.write_text(cloud.run("get-ca-cert", CLUSTER).stdout)
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
        "ssl.ca.location": str(ca),
    }


@pytest.fixture(scope="module")
def through_endpoint(cloud: Cloud) -> str:
    """The endpoint's bootstrap string, once the records are in the object store."""
    found = ok(cloud, "get-bootstrap-brokers", CLUSTER, "--endpoint", ENDPOINT)
    address = found["bootstrap_brokers"]
    conf = client_conf(cloud)
    producer = Producer({**conf, "bootstrap.servers": address, "batch.size": 4000})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"%d" % i, value=b"%d|" % i + b"x" * 150)
        producer.poll(0)
    assert producer.flush(60) == 0
    security = ClientSecurity.from_properties(conf)

    def tiered() -> bool:
        remote = describe_remote_log(address, [TOPIC], security=security)
        part = remote.of(TOPIC, 0)
        return part is not None and len(part.segments) >= 2

    wait_until(tiered, 90, "segments in the object store")
    return str(address)


def options(cloud: Cloud, **extra: str) -> dict[str, str]:
    conf = client_conf(cloud)
    return {
        "sluice.cluster": CLUSTER,
        "sluice.endpoint": ENDPOINT,
        "sluice.controlplane.endpoint": cloud.endpoint,
        "sluice.controlplane.token": (cloud.home / "token").read_text().strip(),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{USER}" password="{PASSWORD}";'
        ),
        "kafka.ssl.ca.location": conf["ssl.ca.location"],
        "subscribe": TOPIC,
        **extra,
    }


def test_spark_reads_through_the_endpoint(
    session: Any, cloud: Cloud, through_endpoint: str
) -> None:
    given = options(cloud)
    resolved = with_cluster({k.lower(): v for k, v in given.items()})
    assert resolved["kafka.bootstrap.servers"] == through_endpoint
    assert resolved["sluice.s3.access.key.id"], "the cluster's scoped read-only key"
    planned = plan(read_options(given, streaming=False))
    assert any(isinstance(s, TieredSplit) for s in planned.splits), planned.splits
    rows = session.read.format("sluice").options(**given).load().select("key").collect()
    assert sorted(int(r["key"]) for r in rows) == list(range(RECORDS))


def test_an_unknown_endpoint_says_where_to_look(cloud: Cloud) -> None:
    with pytest.raises(OptionError, match="list-private-endpoints --cluster spark-private"):
        read_options(options(cloud, **{"sluice.endpoint": "nowhere"}), streaming=False)
