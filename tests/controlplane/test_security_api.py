"""The control plane's users and ACLs (``controlplane/security.py`` over
``controlplane/kafka_security.py``) against a real secured broker: PLAINTEXT (the control
plane's connection, User:ANONYMOUS, a super user), SASL_PLAINTEXT and SASL_SSL listeners,
Kafka's StandardAuthorizer. A user the control plane creates logs in with confluent-kafka
(SCRAM-SHA-512 and -256, PLAINTEXT and TLS) and no longer once deleted; a wrong password is
refused; the password is never logged. ACLs created, listed with filters and deleted are
what confluent-kafka's AdminClient sees, and Kafka's refusals come back with Kafka's
messages. (cloudctl and the gRPC API over a cluster of the control plane:
tests/cli/test_security_commands.py.)"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from controlplane import errors
from controlplane.kafka_security import (
    Acl,
    AclFilter,
    Credential,
    Operation,
    PatternType,
    Permission,
    ScramMechanism,
)
from controlplane.kafka_security import ResourceType as Rt
from controlplane.security import SecurityOps
from controlplane.states import ClusterState
from controlplane.store import BrokerRecord, ClusterRecord, Store
from tests.security.conftest import ALICE, Secured, start_secured
from tests.support.scram_login import logs_in

T = TypeVar("T")
CLUSTER = "sec"
TIMEOUT = 30
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
AUTHORIZED = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@dataclass
class Setup:
    secured: Secured
    ops: SecurityOps


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The secured broker, recorded as the one broker of cluster ``sec`` in a state store
    (as the control plane records the brokers it starts)."""
    home = tmp_path_factory.mktemp("security-api")
    secured = start_secured(home, **AUTHORIZED)
    store = Store(home / "state.db")
    try:
        host, port = secured.broker.bootstrap.split(":")
        store.insert_cluster(
            ClusterRecord(
                name=CLUSTER, cluster_id="sec-id", state=ClusterState.ACTIVE, broker_count=1
            ),
            [BrokerRecord(CLUSTER, 0, host, int(port), str(home / "data"), str(home / "log"))],
        )
        yield Setup(secured, SecurityOps(store, TIMEOUT))
    finally:
        store.close()
        secured.broker.stop()
        secured.broker.kill()


def run(call: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(call)


def login(setup: Setup, protocol: str, mechanism: ScramMechanism, user: str, pw: str) -> bool:
    return logs_in(setup.secured.conf(protocol, mechanism.kafka_name, user, pw))


def test_a_user_logs_in_until_deleted_and_its_password_is_never_logged(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    ops = setup.ops
    caplog.set_level(logging.DEBUG)
    created = run(ops.create_user(CLUSTER, "bob", SHA512, "bob-secret-512"))
    assert created == (Credential(SHA512, 4096),)
    assert login(setup, "SASL_PLAINTEXT", SHA512, "bob", "bob-secret-512")
    assert login(setup, "SASL_SSL", SHA512, "bob", "bob-secret-512")
    assert not login(setup, "SASL_PLAINTEXT", SHA512, "bob", "wrong-password")
    assert not login(setup, "SASL_PLAINTEXT", SHA256, "bob", "bob-secret-512"), "no such credential"

    both = run(ops.create_user(CLUSTER, "bob", SHA256, "bob-secret-256", iterations=8192))
    assert both == (Credential(SHA256, 8192), Credential(SHA512, 4096))
    assert login(setup, "SASL_SSL", SHA256, "bob", "bob-secret-256")
    with pytest.raises(errors.UserAlreadyExists, match="already has a SCRAM-SHA-512 credential"):
        run(ops.create_user(CLUSTER, "bob", SHA512, "another"))
    assert login(setup, "SASL_PLAINTEXT", SHA512, "bob", "bob-secret-512"), "left as it was"

    users = run(ops.list_users(CLUSTER))
    assert users["bob"] == both
    assert ALICE in users
    assert run(ops.delete_user(CLUSTER, "bob", SHA256)) == [SHA256]
    assert not login(setup, "SASL_PLAINTEXT", SHA256, "bob", "bob-secret-256")
    assert login(setup, "SASL_PLAINTEXT", SHA512, "bob", "bob-secret-512"), "the other stays"
    run(ops.create_user(CLUSTER, "bob", SHA256, "bob-secret-256"))
    assert run(ops.delete_user(CLUSTER, "bob")) == [SHA256, SHA512], "every mechanism"
    assert not login(setup, "SASL_SSL", SHA512, "bob", "bob-secret-512")
    assert "bob" not in run(ops.list_users(CLUSTER))
    with pytest.raises(errors.UserNotFound, match="'bob' has no SCRAM credential"):
        run(ops.delete_user(CLUSTER, "bob"))

    assert "got a SCRAM-SHA-512 credential" in caplog.text, "the log says what happened"
    broker_log = setup.secured.broker.log_path.read_text(errors="replace")
    for secret in ("bob-secret-512", "bob-secret-256", "another"):
        assert secret not in caplog.text
        assert secret not in broker_log


@pytest.mark.parametrize(
    ("user", "message"),
    [
        (("carol", "pw", 1024), "Too few iterations: 1024"),
        (("carol", "pw", 100_000), "Too many iterations: 100000"),
        (("carol", "", None), "password of user 'carol' is empty"),
        (("", "pw", None), "Username must not be empty"),
    ],
)
def test_bad_users_are_refused_before_anything_is_sent(
    setup: Setup, user: tuple[str, str, int | None], message: str
) -> None:
    name, password, iterations = user
    with pytest.raises(errors.BadRequest, match=message):
        run(setup.ops.create_user(CLUSTER, name, SHA512, password, iterations))
    assert "carol" not in run(setup.ops.list_users(CLUSTER))


def test_an_unknown_cluster_is_not_found(setup: Setup) -> None:
    with pytest.raises(errors.ClusterNotFound):
        run(setup.ops.list_users("nope"))
    with pytest.raises(errors.ClusterNotFound):
        run(setup.ops.list_acls("nope", AclFilter()))


# ---------------------------------------------------------------------- ACLs

LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


def admin(setup: Setup) -> AdminClient:
    return AdminClient({"bootstrap.servers": setup.secured.broker.bootstrap, "log_level": 0})


def seen_by_kafka_clients(setup: Setup) -> set[tuple[Any, ...]]:
    everything: dict[str, Any] = {
        "restype": ResourceType.ANY,
        "name": None,
        "resource_pattern_type": ResourcePatternType.ANY,
        "principal": None,
        "host": None,
        "operation": AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
    }
    client = admin(setup)
    future = client.describe_acls(AclBindingFilter(**everything), request_timeout=TIMEOUT)
    return {
        (
            b.restype.name,
            b.name,
            b.resource_pattern_type.name,
            b.principal,
            b.host,
            b.operation.name,
            b.permission_type.name,
        )
        for b in future.result(TIMEOUT)
    }


def as_seen(acl: Acl) -> tuple[Any, ...]:
    """An ACL as confluent-kafka names it (it calls the cluster resource BROKER)."""
    rtype = "BROKER" if acl.resource_type == Rt.CLUSTER else acl.resource_type.name
    return (
        rtype,
        acl.resource_name,
        acl.pattern_type.name,
        acl.principal,
        acl.host,
        acl.operation.name,
        acl.permission.name,
    )


WRITE_ORDERS = Acl(
    Rt.TOPIC, "orders", PatternType.LITERAL, "User:bob", "*", Operation.WRITE, Permission.ALLOW
)
DENY_PREFIX = Acl(
    Rt.TOPIC,
    "orders-",
    PatternType.PREFIXED,
    "User:eve",
    "10.0.0.9",
    Operation.ALL,
    Permission.DENY,
)
GROUP_READ = Acl(
    Rt.GROUP, "billing", PatternType.LITERAL, "User:bob", "*", Operation.READ, Permission.ALLOW
)
CLUSTER_DESCRIBE = Acl(
    Rt.CLUSTER, "", PatternType.LITERAL, "User:bob", "*", Operation.DESCRIBE, Permission.ALLOW
)


def test_acls_round_trip_as_kafka_admin_clients_see_them(setup: Setup) -> None:
    ops = setup.ops
    created = [run(ops.create_acl(CLUSTER, a)) for a in (WRITE_ORDERS, DENY_PREFIX, GROUP_READ)]
    assert created == [WRITE_ORDERS, DENY_PREFIX, GROUP_READ]
    cluster_acl = run(ops.create_acl(CLUSTER, CLUSTER_DESCRIBE))
    assert cluster_acl.resource_name == "kafka-cluster", "the cluster resource's one name"
    run(ops.create_acl(CLUSTER, WRITE_ORDERS))  # the same again: kept once
    every = [WRITE_ORDERS, DENY_PREFIX, GROUP_READ, cluster_acl]

    listed = run(ops.list_acls(CLUSTER, AclFilter()))
    assert listed == sorted(every)
    assert seen_by_kafka_clients(setup) == {as_seen(a) for a in every}

    # an ACL a Kafka admin client creates is one the control plane lists
    theirs = AclBinding(
        ResourceType.TOPIC,
        "audit",
        LIT,
        "User:carol",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    client = admin(setup)
    for future in client.create_acls([theirs], request_timeout=TIMEOUT).values():
        future.result(TIMEOUT)
    audit = AclFilter(resource_type=Rt.TOPIC, resource_name="audit")
    [found] = run(ops.list_acls(CLUSTER, audit))
    assert (found.principal, found.operation, found.permission) == (
        "User:carol",
        Operation.READ,
        Permission.ALLOW,
    )

    # filters as Kafka's: MATCH finds what applies to a name, ANY the name exactly
    applies = AclFilter(
        resource_type=Rt.TOPIC, resource_name="orders-eu", pattern_type=PatternType.MATCH
    )
    assert run(ops.list_acls(CLUSTER, applies)) == [DENY_PREFIX]
    exactly = AclFilter(resource_name="orders")
    assert run(ops.list_acls(CLUSTER, exactly)) == [WRITE_ORDERS]
    denies = AclFilter(permission=Permission.DENY)
    assert run(ops.list_acls(CLUSTER, denies)) == [DENY_PREFIX]

    deleted = run(ops.delete_acls(CLUSTER, AclFilter(principal="User:bob")))
    assert deleted == sorted([WRITE_ORDERS, GROUP_READ, cluster_acl])
    assert seen_by_kafka_clients(setup) == {as_seen(DENY_PREFIX), as_seen(found)}
    assert run(ops.delete_acls(CLUSTER, AclFilter(principal="User:bob"))) == [], "none left"
    assert run(ops.delete_acls(CLUSTER, AclFilter())) == sorted([DENY_PREFIX, found])
    assert seen_by_kafka_clients(setup) == set()


@pytest.mark.parametrize(
    ("acl", "message", "kafka_error"),
    [
        (
            Acl(
                Rt.CLUSTER,
                "",
                PatternType.LITERAL,
                "User:bob",
                "*",
                Operation.WRITE,
                Permission.ALLOW,
            ),
            r"ResourceType CLUSTER only supports operations \[ALL, CREATE, ALTER, DESCRIBE, "
            r"CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE\] \(not WRITE\)",
            None,
        ),
        (
            Acl(
                Rt.GROUP,
                "g",
                PatternType.LITERAL,
                "User:bob",
                "*",
                Operation.WRITE,
                Permission.ALLOW,
            ),
            r"ResourceType GROUP only supports operations \[ALL, READ, DELETE, DESCRIBE\]",
            None,
        ),
        (
            Acl(Rt.TOPIC, "t", PatternType.LITERAL, "bob", "*", Operation.READ, Permission.ALLOW),
            "Could not parse principal from `bob`",
            "invalid_request",
        ),
        (
            Acl(
                Rt.CLUSTER,
                "prod",
                PatternType.LITERAL,
                "User:bob",
                "*",
                Operation.ALTER,
                Permission.ALLOW,
            ),
            "The only valid name for the CLUSTER resource is kafka-cluster",
            "invalid_request",
        ),
        (
            Acl(
                Rt.TOPIC, "", PatternType.LITERAL, "User:bob", "*", Operation.READ, Permission.ALLOW
            ),
            "Resource name should not be empty",
            "invalid_request",
        ),
        (
            Acl(
                Rt.ANY, "t", PatternType.LITERAL, "User:bob", "*", Operation.READ, Permission.ALLOW
            ),
            "Invalid resourceType ANY",
            "invalid_request",
        ),
    ],
)
def test_invalid_acls_get_kafkas_reason_and_change_nothing(
    setup: Setup, acl: Acl, message: str, kafka_error: str | None
) -> None:
    with pytest.raises(errors.BadRequest, match=message) as refused:
        run(setup.ops.create_acl(CLUSTER, acl))
    assert refused.value.metadata.get("kafkaError") == kafka_error
    assert run(setup.ops.list_acls(CLUSTER, AclFilter(principal="User:bob"))) == []


def test_a_change_is_sent_once_and_settles(setup: Setup, tmp_path: Path) -> None:
    """A broker that cannot be reached is skipped for a read, and a change made at the
    broker that answers is there when the call returns (settled)."""
    store = Store(tmp_path / "state.db")
    try:
        host, port = setup.secured.broker.bootstrap.split(":")
        store.insert_cluster(
            ClusterRecord(
                name="two", cluster_id="two-id", state=ClusterState.ACTIVE, broker_count=2
            ),
            [
                # nothing listens on port 1
                BrokerRecord("two", 0, "127.0.0.1", 1, str(tmp_path / "b0"), str(tmp_path / "l0")),
                BrokerRecord("two", 1, host, int(port), str(tmp_path / "b1"), str(tmp_path / "l1")),
            ],
        )
        ops = SecurityOps(store, 5)
        acl = Acl(
            Rt.TOPIC,
            "settle",
            PatternType.LITERAL,
            "User:dan",
            "*",
            Operation.READ,
            Permission.ALLOW,
        )
        assert run(ops.create_acl("two", acl)) == acl
        assert run(ops.list_acls("two", AclFilter.exactly(acl))) == [acl]
        assert run(ops.delete_acls("two", AclFilter.exactly(acl))) == [acl]
    finally:
        store.close()
