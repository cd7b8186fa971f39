"""ACLs through Kafka's admin APIs (CreateAcls, DescribeAcls, DeleteAcls) with
confluent-kafka's AdminClient: created, listed with LITERAL, PREFIXED, ANY and MATCH
filters, deleted by filter, refused with Kafka's messages when invalid, and kept in the
metadata log across a broker restart. The brokers run the StandardAuthorizer with the
PLAINTEXT client (User:ANONYMOUS) as super user; without an authorizer the ACL APIs answer
SECURITY_DISABLED, as Kafka's. Enforcement: test_authorization.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from tests.conftest import BrokerProcess
from tests.security.test_authorization import any_acls
from tests.support.cluster_workload import wait_for
from tests.support.raw_client import RawClient
from tests.support.sluice_cluster import SluiceCluster

LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TIMEOUT = 30
AUTHORIZED = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("acls") / "data", AUTHORIZED).start()
    yield proc
    proc.stop()
    proc.kill()


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def create(client: AdminClient, bindings: list[AclBinding]) -> None:
    for future in client.create_acls(bindings, request_timeout=TIMEOUT).values():
        future.result(TIMEOUT)


def describe(client: AdminClient, f: AclBindingFilter) -> set[tuple[Any, ...]]:
    found = client.describe_acls(f, request_timeout=TIMEOUT).result(TIMEOUT)
    return {key(b) for b in found}


def key(b: AclBinding) -> tuple[Any, ...]:
    return (
        b.restype,
        b.name,
        b.resource_pattern_type,
        b.principal,
        b.host,
        b.operation,
        b.permission_type,
    )


def everything(**overrides: Any) -> AclBindingFilter:
    fields: dict[str, Any] = {
        "restype": ResourceType.ANY,
        "name": None,
        "resource_pattern_type": ResourcePatternType.ANY,
        "principal": None,
        "host": None,
        "operation": AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
    }
    fields.update(overrides)
    return AclBindingFilter(**fields)


ORDERS = AclBinding(ResourceType.TOPIC, "orders", LIT, "User:alice", "*", AclOperation.READ, ALLOW)
LOGS = AclBinding(ResourceType.TOPIC, "logs-", PRE, "User:alice", "*", AclOperation.WRITE, ALLOW)
SECRET = AclBinding(ResourceType.TOPIC, "orders", LIT, "User:bob", "*", AclOperation.ALL, DENY)
GROUP = AclBinding(ResourceType.GROUP, "billing", LIT, "User:alice", "*", AclOperation.READ, ALLOW)
ALL = {key(b) for b in (ORDERS, LOGS, SECRET, GROUP)}


def test_create_describe_delete_and_restart(acl_broker: BrokerProcess) -> None:
    client = admin(acl_broker.bootstrap)
    create(client, [ORDERS, LOGS, SECRET, GROUP])
    create(client, [ORDERS])  # an ACL that exists is accepted and not stored twice
    assert describe(client, everything()) == ALL
    assert describe(client, everything(restype=ResourceType.GROUP)) == {key(GROUP)}
    assert describe(client, everything(principal="User:bob")) == {key(SECRET)}
    assert describe(client, everything(resource_pattern_type=PRE)) == {key(LOGS)}
    matching = everything(
        restype=ResourceType.TOPIC, name="logs-app", resource_pattern_type=ResourcePatternType.MATCH
    )
    assert describe(client, matching) == {key(LOGS)}, "MATCH: the prefixed ACL applies"
    assert describe(client, everything(name="orders")) == {key(ORDERS), key(SECRET)}

    acl_broker.restart()
    client = admin(acl_broker.bootstrap)
    assert describe(client, everything()) == ALL, "kept in the metadata log"

    deleted = client.delete_acls([everything(principal="User:bob")], request_timeout=TIMEOUT)
    [result] = [f.result(TIMEOUT) for f in deleted.values()]
    assert {key(b) for b in result} == {key(SECRET)}
    assert describe(client, everything()) == ALL - {key(SECRET)}
    deleted = client.delete_acls([everything()], request_timeout=TIMEOUT)
    [result] = [f.result(TIMEOUT) for f in deleted.values()]
    assert len(result) == 3
    assert describe(client, everything()) == set()


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (
            AclBinding(ResourceType.TOPIC, "t", LIT, "alice", "*", AclOperation.READ, ALLOW),
            "Could not parse principal",
        ),
        (
            # confluent-kafka names the cluster resource (4) BROKER
            AclBinding(ResourceType.BROKER, "c", LIT, "User:a", "*", AclOperation.ALTER, ALLOW),
            "kafka-cluster",
        ),
    ],
)
def test_invalid_acls_are_refused(
    acl_broker: BrokerProcess, binding: AclBinding, message: str
) -> None:
    client = admin(acl_broker.bootstrap)
    with pytest.raises(KafkaException, match=message):
        create(client, [binding])
    assert describe(client, everything()) == set()


def test_every_broker_of_a_cluster_sees_an_acl_created_through_any(tmp_path: Path) -> None:
    cluster = SluiceCluster(tmp_path / "sluice", brokers=3, settings=AUTHORIZED)
    try:
        cluster.start()
        addresses = [cluster.broker(i).bootstrap for i in range(cluster.size)]
        for i, address in enumerate(addresses):
            binding = AclBinding(
                ResourceType.TOPIC, f"t{i}", LIT, "User:alice", "*", AclOperation.READ, ALLOW
            )
            create(admin(address), [binding])
            for other in addresses:  # answered once the answering broker has it; the others
                wait_for(  # replay the metadata log within moments
                    lambda other=other, binding=binding: (
                        key(binding) in describe(admin(other), everything())
                    ),
                    30,
                    f"{binding} on {other}",
                )
    finally:
        cluster.stop()


def test_without_an_authorizer_the_acl_apis_are_disabled(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    binding = AclBinding(ResourceType.TOPIC, "t", LIT, "User:a", "*", AclOperation.READ, ALLOW)
    with pytest.raises(KafkaException, match="No Authorizer is configured"):
        create(client, [binding])
    # (librdkafka's describe_acls gives an empty list for a top-level error: ask raw)
    with RawClient(broker.bootstrap) as raw:
        answer = raw.request(any_acls())
    assert answer.error_code == ErrorCode.security_disabled
    assert answer.error_message == "No Authorizer is configured."
