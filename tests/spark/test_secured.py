"""format("sluice") against a secured broker, as Spark's Kafka source is configured: the
``kafka.security.protocol`` / ``kafka.sasl.*`` / ``kafka.ssl.*`` options reach both the hot
reads (librdkafka) and the planner's DescribeRemoteLog (wire's blocking client over TLS and
SCRAM), and the broker's ACLs apply: a user with READ on the topic reads every record, the
tiered ones included; a user without it is refused with the broker's authorization error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from spark.remote_log import describe_remote_log
from tests.security.conftest import users_file
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tests.support.processes import free_ports
from tests.support.tiering import TOPIC_CONFIG, broker_settings, data_source_options
from tests.support.tls import TestCA
from tiered.embedded_s3 import EmbeddedS3
from wire.sasl import ClientSecurity

BUCKET = "spark-secured"
TOPIC = "secured-events"
RECORDS = 2000
USERS = {"reader": "reader-secret", "stranger": "stranger-secret"}


@pytest.fixture(scope="module")
def secured(s3: EmbeddedS3, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("spark-secured")
    ca = TestCA(work / "tls")
    users = users_file(work, [f"SCRAM-SHA-512=[name={u},password={p}]" for u, p in USERS.items()])
    port, sasl_ssl = free_ports(2)
    broker = BrokerProcess(
        work / "data",
        {
            **broker_settings(s3.endpoint, BUCKET),
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_ssl}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.scram.bootstrap.users.file": str(users),
            "ssl.certificate.location": str(ca.broker.cert),
            "ssl.key.location": str(ca.broker.key),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
        port=port,
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1, config=TOPIC_CONFIG)])[TOPIC].result(30)
        read = AclBinding(
            ResourceType.TOPIC,
            TOPIC,
            ResourcePatternType.LITERAL,
            "User:reader",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        admin.create_acls([read])[read].result(30)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 4000}
        )
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"%d|" % i + b"x" * 150, partition=i % 2)
            producer.poll(0)
        assert producer.flush(30) == 0

        def tiered() -> bool:
            remote = describe_remote_log(broker.bootstrap, [TOPIC])
            return all(
                (part := remote.of(TOPIC, p)) is not None and len(part.segments) >= 1
                for p in range(2)
            )

        wait_for(tiered, 90, "segments of both partitions in the object store")
        yield {"broker": broker, "address": f"127.0.0.1:{sasl_ssl}", "ca": ca.ca}
    finally:
        broker.stop()
        broker.kill()


def _options(secured: dict[str, Any], user: str) -> dict[str, str]:
    return {
        **data_source_options_for(secured),
        "kafka.bootstrap.servers": secured["address"],
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{USERS[user]}";'
        ),
        "kafka.ssl.ca.location": str(secured["ca"]),
        "subscribe": TOPIC,
    }


def data_source_options_for(secured: dict[str, Any]) -> dict[str, str]:
    endpoint = secured["broker"].settings["tiered.s3.endpoint"]
    return data_source_options(endpoint, BUCKET)


def test_a_reader_with_read_gets_every_record(session: Any, secured: dict[str, Any]) -> None:
    frame = session.read.format("sluice").options(**_options(secured, "reader")).load()
    values = [bytes(r.value) for r in frame.select("value").collect()]
    assert sorted(int(v.split(b"|")[0]) for v in values) == list(range(RECORDS))


def test_the_planner_authenticates_and_is_authorized(secured: dict[str, Any]) -> None:
    conf = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "reader",
        "sasl.password": USERS["reader"],
        "ssl.ca.location": str(secured["ca"]),
    }
    seen = describe_remote_log(
        secured["address"], [TOPIC], security=ClientSecurity.from_properties(conf)
    )
    assert seen.of(TOPIC, 0) is not None
    stranger = {**conf, "sasl.username": "stranger", "sasl.password": USERS["stranger"]}
    hidden = describe_remote_log(
        secured["address"], [TOPIC], security=ClientSecurity.from_properties(stranger)
    )
    assert hidden.of(TOPIC, 0) is None, "no READ on the topic: its segments are not listed"
    wrong = {**conf, "sasl.password": "wrong"}
    with pytest.raises(Exception, match="Authentication failed"):
        describe_remote_log(
            secured["address"], [TOPIC], security=ClientSecurity.from_properties(wrong)
        )


def test_a_user_without_read_is_refused(session: Any, secured: dict[str, Any]) -> None:
    frame = session.read.format("sluice").options(**_options(secured, "stranger")).load()
    with pytest.raises(Exception, match=r"not authorized \(TOPIC_AUTHORIZATION_FAILED\)"):
        frame.count()
