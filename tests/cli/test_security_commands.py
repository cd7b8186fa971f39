"""Users and ACLs through cloudctl and the gRPC API (the Users and Acls services) of a real
control plane: a user created with `create-user --password-stdin` logs in with
confluent-kafka over the SASL_SSL listener of a cluster created with `--client-auth scram`,
a wrong password is refused, and after `delete-user` the login fails; `list-users` shows
mechanisms and iterations and never a password (nor does any log); the password is read
from stdin only, or typed at a prompt that does not echo. ACL commands: the invalid
combinations get Kafka's text and the grammar's exit codes (2 usage, 1 refused), a cluster
without an authorizer says so, and the errors of the API are structured (ErrorInfo
reasons). The round trip of ACLs through the control plane against a real broker, and what
confluent-kafka's AdminClient sees of it: tests/controlplane/test_security_api.py; here too,
once the brokers of secured clusters run an authorizer (marked below)."""

from __future__ import annotations

import json
import os
import pty
import select
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import security_pb2 as pb
from proto.sluice.v1 import security_pb2_grpc as pb_grpc
from sluice_client.client import ApiError, Client
from tests.cli.conftest import CLOUDCTL, SHARED_CLUSTER, Cloud
from tests.support.scram_login import logs_in

OPEN = SHARED_CLUSTER
"""The shared 3-broker cluster: PLAINTEXT, no authorizer."""
SECURED = "sec-users"
PASSWORD = "s3cret-Passw0rd"
TIMEOUT = 30


def cli(cloud: Cloud, *args: str, stdin: str = "") -> Any:
    done = cloud.run(*args, "-o", "json", stdin=stdin)
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


@dataclass
class SecuredCluster:
    name: str
    bootstrap: str
    ca_file: Path

    def conf(self, user: str, password: str) -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca_file),
        }


@pytest.fixture(scope="module")
def secured(
    shared_cloud: Cloud, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecuredCluster]:
    """A 1-broker cluster whose clients log in with SCRAM over TLS, for this module."""
    made = shared_cloud.run(
        "create-cluster", SECURED, "--brokers", "1", "--client-auth", "scram", "--wait"
    )
    assert made.returncode == 0, made.stderr
    try:
        bootstrap = cli(shared_cloud, "get-bootstrap-brokers", SECURED, "--auth", "scram")
        ca = shared_cloud.run("get-ca-cert", SECURED)
        assert ca.returncode == 0, ca.stderr
        ca_file = tmp_path_factory.mktemp("ca") / "ca.pem"
        ca_file.write_text(ca.stdout)
        yield SecuredCluster(SECURED, bootstrap["bootstrap_brokers"], ca_file)
    finally:
        gone = shared_cloud.run("delete-cluster", SECURED, "--yes", "--wait")
        assert gone.returncode == 0, gone.stderr


def api_client(cloud: Cloud) -> Client:
    token = (cloud.home / "token").read_text().strip()
    return Client(cloud.endpoint, token)


# ---------------------------------------------------------------------- users


def test_a_user_created_with_cloudctl_logs_in_until_deleted(
    shared_cloud: Cloud, secured: SecuredCluster
) -> None:
    created = cli(
        shared_cloud,
        "create-user",
        "--cluster",
        SECURED,
        "alice",
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    assert created == {
        "cluster": SECURED,
        "name": "alice",
        "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}],
    }
    assert logs_in(secured.conf("alice", PASSWORD))
    assert not logs_in(secured.conf("alice", PASSWORD + "x")), "a wrong password is refused"
    assert not logs_in(secured.conf("mallory", PASSWORD)), "an unknown user is refused"

    again = shared_cloud.run(
        "create-user", "--cluster", SECURED, "alice", "--password-stdin", stdin="other\n"
    )
    assert again.returncode == 1
    assert "already has a SCRAM-SHA-512 credential" in again.stderr
    assert f"cloudctl delete-user --cluster {SECURED} alice" in again.stderr
    assert logs_in(secured.conf("alice", PASSWORD)), "unchanged"

    listed = cli(shared_cloud, "list-users", "--cluster", SECURED)
    [alice] = [u for u in listed["users"] if u["name"] == "alice"]
    assert alice["credentials"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]

    deleted = cli(shared_cloud, "delete-user", "--cluster", SECURED, "alice")
    assert deleted == {
        "cluster": SECURED,
        "name": "alice",
        "existed": True,
        "deleted": True,
        "mechanisms": ["SCRAM-SHA-512"],
    }
    assert not logs_in(secured.conf("alice", PASSWORD)), "a deleted user cannot log in"
    assert "alice" not in [
        u["name"] for u in cli(shared_cloud, "list-users", "--cluster", SECURED)["users"]
    ]
    missing = shared_cloud.run("delete-user", "--cluster", SECURED, "alice", "--yes")
    assert missing.returncode == 1
    assert f"list users with `cloudctl list-users --cluster {SECURED}`" in missing.stderr
    idempotent = shared_cloud.run("delete-user", "--cluster", SECURED, "alice", "--if-exists")
    assert idempotent.returncode == 0, idempotent.stderr
    assert "does not exist" in idempotent.stderr

    for path in shared_cloud.home.rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert PASSWORD.encode() not in path.read_bytes(), f"the password is in {path}"


def test_list_users_shows_mechanisms_and_iterations_never_a_password(shared_cloud: Cloud) -> None:
    cli(
        shared_cloud,
        "create-user",
        "--cluster",
        OPEN,
        "lister",
        "--mechanism",
        "scram-sha-256",
        "--iterations",
        "8192",
        "--password-stdin",
        stdin=PASSWORD,
    )
    cli(
        shared_cloud,
        "create-user",
        "--cluster",
        OPEN,
        "lister",
        "--config",
        "iterations=4100",
        "--password-stdin",
        stdin=PASSWORD + "\r\n",
    )
    listed = cli(shared_cloud, "list-users", "--cluster", OPEN)
    [user] = [u for u in listed["users"] if u["name"] == "lister"]
    assert user == {
        "cluster": OPEN,
        "name": "lister",
        "credentials": [
            {"mechanism": "SCRAM-SHA-256", "iterations": 8192},
            {"mechanism": "SCRAM-SHA-512", "iterations": 4100},
        ],
    }
    table = shared_cloud.run("list-users", "--cluster", OPEN)
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == ["NAME", "MECHANISM", "ITERATIONS"]
    assert "lister  SCRAM-SHA-256  8192" in table.stdout
    yaml_out = shared_cloud.run("list-users", "--cluster", OPEN, "-o", "yaml")
    for output in (json.dumps(listed), table.stdout, yaml_out.stdout):
        assert PASSWORD not in output
        assert "salt" not in output.lower()
    # the API's messages have no field that could carry a secret
    for message in (pb.User, pb.ScramCredentialInfo, pb.ListUsersResponse):
        assert not {"password", "salt", "salted_password"} & set(message.DESCRIPTOR.fields_by_name)
    assert cli(shared_cloud, "delete-user", "--cluster", OPEN, "lister")["mechanisms"] == [
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ]


@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        ((), PASSWORD, 2, "give the password on stdin with --password-stdin"),
        (("--password", PASSWORD), "", 2, "No such option"),
        (("--password-stdin",), "", 2, "the password is empty"),
        (("--password-stdin",), "one\ntwo\n", 2, "more than one line"),
        (("--password-stdin", "--config", "colour=red"), PASSWORD, 2, "unknown user setting"),
        (
            ("--password-stdin", "--mechanism", "PLAIN"),
            PASSWORD,
            2,
            "Invalid value for '--mechanism'",
        ),
        (("--password-stdin", "--iterations", "1024"), PASSWORD, 1, "Too few iterations: 1024"),
        (("--password-stdin", "--iterations", "16385"), PASSWORD, 1, "Too many iterations"),
    ],
)
def test_create_user_refusals(
    shared_cloud: Cloud, args: tuple[str, ...], stdin: str, code: int, message: str
) -> None:
    done = shared_cloud.invoke("create-user", "--cluster", OPEN, "refused", *args, stdin=stdin)
    assert done.exit_code == code, done.output
    assert message in done.output
    assert PASSWORD not in done.output


def test_the_password_prompt_on_a_terminal_does_not_echo(shared_cloud: Cloud) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: cloudctl on a terminal
        os.execve(
            CLOUDCTL,
            [
                CLOUDCTL,
                "create-user",
                "--cluster",
                OPEN,
                "typist",
                "--password-stdin",
                "-o",
                "json",
            ],
            shared_cloud.environ,
        )
    seen = b""
    answered = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        if seen.count(b"Password: ") + seen.count(b"Repeat for confirmation: ") > answered:
            os.write(fd, PASSWORD.encode() + b"\n")
            answered += 1
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = seen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert answered == 2, "asked twice (typed, then confirmed)"
    assert PASSWORD not in text, "the terminal did not echo it"
    listed = cli(shared_cloud, "list-users", "--cluster", OPEN)
    assert "typist" in [u["name"] for u in listed["users"]]
    cli(shared_cloud, "delete-user", "--cluster", OPEN, "typist")


def test_the_users_api_gives_structured_errors(shared_cloud: Cloud) -> None:
    with api_client(shared_cloud) as client:
        users = pb_grpc.UsersStub(client.channel)
        request = pb.CreateUserRequest(cluster="no-such-cluster", name="u", password=PASSWORD)
        with pytest.raises(ApiError) as missing_cluster:
            client.call(users.CreateUser, request, TIMEOUT)
        assert missing_cluster.value.code == grpc.StatusCode.NOT_FOUND
        assert missing_cluster.value.reason == epb.CLUSTER_NOT_FOUND

        made = client.call(
            users.CreateUser,
            pb.CreateUserRequest(cluster=OPEN, name="api-user", password="pw"),
            TIMEOUT,
        )
        assert [(c.mechanism, c.iterations) for c in made.credentials] == [(pb.SCRAM_SHA_512, 4096)]
        with pytest.raises(ApiError) as exists:
            client.call(
                users.CreateUser,
                pb.CreateUserRequest(cluster=OPEN, name="api-user", password="pw"),
                TIMEOUT,
            )
        assert exists.value.code == grpc.StatusCode.ALREADY_EXISTS
        assert exists.value.reason == epb.USER_ALREADY_EXISTS
        assert exists.value.metadata == {"cluster": OPEN, "user": "api-user"}
        few = pb.CreateUserRequest(cluster=OPEN, name="api-user2", password="pw", iterations=10)
        with pytest.raises(ApiError) as bad:
            client.call(users.CreateUser, few, TIMEOUT)
        assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert bad.value.reason == epb.INVALID_ARGUMENT
        assert bad.value.metadata["kafkaError"] == "unacceptable_credential"
        assert "Too few iterations" in bad.value.message

        gone = client.call(
            users.DeleteUser, pb.DeleteUserRequest(cluster=OPEN, name="api-user"), TIMEOUT
        )
        assert list(gone.deleted) == [pb.SCRAM_SHA_512]
        with pytest.raises(ApiError) as not_found:
            client.call(
                users.DeleteUser, pb.DeleteUserRequest(cluster=OPEN, name="api-user"), TIMEOUT
            )
        assert not_found.value.code == grpc.StatusCode.NOT_FOUND
        assert not_found.value.reason == epb.USER_NOT_FOUND


# ---------------------------------------------------------------------- ACLs


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ("--principal", "User:bob", "--operation", "WRITE", "--cluster-resource"),
            1,
            "ResourceType CLUSTER only supports operations [ALL, CREATE, ALTER, DESCRIBE, "
            "CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE] (not WRITE)",
        ),
        (
            ("--principal", "User:bob", "--operation", "write", "--group", "g"),
            1,
            "ResourceType GROUP only supports operations [ALL, READ, DELETE, DESCRIBE]",
        ),
        (
            ("--principal", "User:bob", "--operation", "READ", "--topic", "t", "--group", "g"),
            2,
            "give one resource: --topic T, --group G, --cluster-resource or --transactional-id X "
            "(got --topic, --group)",
        ),
        (
            ("--principal", "User:bob", "--operation", "READ"),
            2,
            "You must provide at least one resource: --topic T, --group G, --cluster-resource "
            "or --transactional-id X",
        ),
        (("--operation", "READ", "--topic", "t"), 2, "Missing option '--principal'"),
        (("--principal", "User:bob", "--topic", "t"), 2, "Missing option '--operation'"),
        (
            ("--principal", "User:bob", "--operation", "fly", "--topic", "t"),
            2,
            "'fly' is not an ACL operation",
        ),
        (
            ("--principal", "User:bob", "--operation", "READ", "--topic", "t", "--pattern", "any"),
            2,
            "Invalid value for '--pattern'",
        ),
        (
            ("--principal", "User:bob", "--operation", "READ", "--topic", "t", "--config", "a=b"),
            2,
            "ACLs have no settings",
        ),
    ],
)
def test_invalid_acls_get_kafkas_text_and_the_grammars_exit_code(
    shared_cloud: Cloud, args: tuple[str, ...], code: int, message: str
) -> None:
    done = shared_cloud.invoke("create-acl", "--cluster", OPEN, *args)
    assert done.exit_code == code, done.output
    assert message in done.output


def test_filters_are_checked_before_anything_is_asked(shared_cloud: Cloud) -> None:
    both = shared_cloud.invoke("list-acls", "--cluster", OPEN, "--allow", "--deny")
    assert both.exit_code == 2
    assert "give --allow or --deny, not both" in both.output
    everything = shared_cloud.invoke("delete-acl", "--cluster", OPEN, "--yes")
    assert everything.exit_code == 2
    assert "say which ACLs to delete" in everything.output
    two = shared_cloud.invoke("delete-acl", "--cluster", OPEN, "--topic", "a", "--group", "b")
    assert two.exit_code == 2


def test_a_cluster_without_an_authorizer_keeps_no_acls(shared_cloud: Cloud) -> None:
    """Kafka's SECURITY_DISABLED, as FAILED_PRECONDITION with what it means."""
    for args in (
        ("create-acl", "--principal", "User:bob", "--operation", "READ", "--topic", "t"),
        ("list-acls",),
        ("delete-acl", "--principal", "User:bob", "--yes"),
    ):
        done = shared_cloud.run(args[0], "--cluster", OPEN, *args[1:])
        assert done.returncode == 1, done.stderr
        assert f"cluster '{OPEN}' has no authorizer, so it keeps no ACLs" in done.stderr
    with api_client(shared_cloud) as client:
        acls = pb_grpc.AclsStub(client.channel)
        with pytest.raises(ApiError) as disabled:
            client.call(acls.ListAcls, pb.ListAclsRequest(cluster=OPEN), TIMEOUT)
        assert disabled.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert disabled.value.metadata["kafkaError"] == "security_disabled"
        with pytest.raises(ApiError) as missing:
            client.call(acls.ListAcls, pb.ListAclsRequest(cluster="no-such-cluster"), TIMEOUT)
        assert missing.value.reason == epb.CLUSTER_NOT_FOUND


def admin_as(secured: SecuredCluster, user: str) -> AdminClient:
    return AdminClient({**secured.conf(user, PASSWORD), "log_level": 0})


def kafka_sees(client: AdminClient) -> set[tuple[str, ...]]:
    everything: dict[str, Any] = {
        "restype": ResourceType.ANY,
        "name": None,
        "resource_pattern_type": ResourcePatternType.ANY,
        "principal": None,
        "host": None,
        "operation": AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
    }
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


def test_acls_round_trip_through_cloudctl_as_kafka_admin_clients_see_them(
    shared_cloud: Cloud, secured: SecuredCluster
) -> None:
    cli(
        shared_cloud,
        "create-user",
        "--cluster",
        SECURED,
        "auditor",
        "--password-stdin",
        stdin=PASSWORD,
    )
    base = ("--cluster", SECURED)
    # DescribeAcls needs DESCRIBE on the cluster: the auditor is allowed it first
    made = cli(
        shared_cloud, "create-acl", *base, "--principal", "User:auditor", "--operation",
        "describe", "--cluster-resource",
    )  # fmt: skip
    assert (made["resource_type"], made["resource_name"]) == ("CLUSTER", "kafka-cluster")
    cli(
        shared_cloud,
        "create-acl",
        *base,
        "--principal",
        "User:bob",
        "--operation",
        "WRITE",
        "--topic",
        "orders",
    )
    denied = cli(
        shared_cloud, "create-acl", *base, "--principal", "User:eve", "--operation", "ALL",
        "--topic", "orders-", "--pattern", "prefixed", "--deny", "--host", "10.0.0.9",
    )  # fmt: skip
    assert denied == {
        "cluster": SECURED,
        "resource_type": "TOPIC",
        "resource_name": "orders-",
        "pattern_type": "PREFIXED",
        "principal": "User:eve",
        "host": "10.0.0.9",
        "operation": "ALL",
        "permission": "DENY",
    }
    listed = cli(shared_cloud, "list-acls", *base)["acls"]
    assert kafka_sees(admin_as(secured, "auditor")) == {
        (
            "BROKER" if a["resource_type"] == "CLUSTER" else a["resource_type"],
            a["resource_name"],
            a["pattern_type"],
            a["principal"],
            a["host"],
            a["operation"],
            a["permission"],
        )
        for a in listed
    }
    assert len(listed) == 3
    matching = cli(shared_cloud, "list-acls", *base, "--topic", "orders-eu", "--pattern", "match")
    assert [a["principal"] for a in matching["acls"]] == ["User:eve"]
    gone = cli(shared_cloud, "delete-acl", *base, "--principal", "User:bob")
    assert [a["principal"] for a in gone["deleted"]] == ["User:bob"]
    nothing = shared_cloud.run("delete-acl", *base, "--principal", "User:bob")
    assert nothing.returncode == 1
    assert "nothing was deleted" in nothing.stderr
    assert (
        shared_cloud.run("delete-acl", *base, "--principal", "User:bob", "--if-exists").returncode
        == 0
    )
    assert len(kafka_sees(admin_as(secured, "auditor"))) == 2
