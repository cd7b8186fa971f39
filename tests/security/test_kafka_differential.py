"""The same SASL conversations against Sluice and Apache Kafka 4.3.1, both with a
SASL_PLAINTEXT listener offering PLAIN and SCRAM-SHA-512 and the same user (Kafka: PLAIN
from JAAS, SCRAM created with AlterUserScramCredentials): error codes and messages of a
wrong password, an unknown user, a mechanism not enabled, a garbage token, a request
before authentication, SASL on a PLAINTEXT listener; and the per-user errors of
AlterUserScramCredentials and DescribeUserScramCredentials."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism
from confluent_kafka.admin import UserScramCredentialUpsertion as Upsert
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
)
from kio.schema.alter_user_scram_credentials.v0.request import (
    ScramCredentialDeletion as Deletion,
)
from kio.schema.alter_user_scram_credentials.v0.request import (
    ScramCredentialUpsertion as Upsertion,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i8, i32
from scramp import ScramClient

from tests.security.conftest import ALICE, ALICE_PASSWORD, users_file, wait_for_user
from tests.security.test_protocol import METADATA
from tests.support.broker import BrokerProcess
from tests.support.kafka_oracle import KafkaOracle, oracle_available
from tests.support.processes import free_port, free_ports
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.oracle
MECHANISMS = "PLAIN,SCRAM-SHA-512"


class SaslKafka(KafkaOracle):
    """Apache Kafka with a SASL_PLAINTEXT listener beside its PLAINTEXT one."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.sasl_port = free_port()

    def server_properties(self) -> dict[str, str]:
        config = super().server_properties()
        sasl = f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        config["listeners"] += "," + sasl
        config["advertised.listeners"] += "," + sasl
        config["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        config["sasl.enabled.mechanisms"] = MECHANISMS
        config["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{ALICE}="{ALICE_PASSWORD}";'
        )
        config["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        )
        return config


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, str]]]:
    """name -> (PLAINTEXT address, SASL_PLAINTEXT address)."""
    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("sasl-differential")
    users = users_file(work, [f"SCRAM-SHA-512=[name={ALICE},password={ALICE_PASSWORD}]"])
    port, sasl = free_ports(2)
    sluice = BrokerProcess(
        work / "sluice",
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms": MECHANISMS,
            "sasl.scram.bootstrap.users.file": str(users),
        },
        port=port,
    ).start()
    try:
        wait_for_user(sluice.bootstrap, ALICE)
        with SaslKafka(work / "kafka") as kafka:
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
            info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
            admin.alter_user_scram_credentials([Upsert(ALICE, info, ALICE_PASSWORD.encode())])[
                ALICE
            ].result(30)
            yield {
                "sluice": (sluice.bootstrap, f"127.0.0.1:{sasl}"),
                "kafka": (kafka.bootstrap, f"127.0.0.1:{kafka.sasl_port}"),
            }
    finally:
        sluice.stop()
        sluice.kill()


def _scram(address: str, user: str, password: str) -> tuple[Any, ...]:
    with RawClient(address) as client:
        handshake = client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        scram = ScramClient(["SCRAM-SHA-512"], user, password)
        first = client.request(
            SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode())
        )
        if first.error_code != 0:
            return handshake.error_code, first.error_code, first.error_message, client.is_closed()
        scram.set_server_first(first.auth_bytes.decode())
        final = client.request(
            SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode())
        )
        closed = client.is_closed(2) if final.error_code else False
        return handshake.error_code, final.error_code, final.error_message, closed


def _plain(address: str, token: bytes) -> tuple[Any, ...]:
    with RawClient(address) as client:
        handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        answer = client.request(SaslAuthenticateRequest(auth_bytes=token))
        closed = client.is_closed(2) if answer.error_code else False
        return handshake.error_code, answer.error_code, answer.error_message, closed


def _compare(both: dict[str, tuple[str, str]], probe: Any) -> None:
    answers = {name: probe(sasl) for name, (_, sasl) in both.items()}
    assert answers["sluice"] == answers["kafka"]


def test_scram_right_and_wrong(both: dict[str, tuple[str, str]]) -> None:
    _compare(both, lambda a: _scram(a, ALICE, ALICE_PASSWORD)[:3])
    _compare(both, lambda a: _scram(a, ALICE, "wrong"))
    _compare(both, lambda a: _scram(a, "nobody", "wrong"))


def test_plain_right_wrong_and_malformed(both: dict[str, tuple[str, str]]) -> None:
    _compare(both, lambda a: _plain(a, f"\x00{ALICE}\x00{ALICE_PASSWORD}".encode())[:3])
    _compare(both, lambda a: _plain(a, f"\x00{ALICE}\x00wrong".encode()))
    _compare(both, lambda a: _plain(a, b"\x00nobody\x00wrong"))
    _compare(both, lambda a: _plain(a, b"\x00\x00pw"))
    _compare(both, lambda a: _plain(a, f"\x00{ALICE}\x00".encode()))
    _compare(both, lambda a: _plain(a, f"bob\x00{ALICE}\x00pw".encode()))


def test_garbage_and_order(both: dict[str, tuple[str, str]]) -> None:
    def garbage(address: str) -> tuple[Any, ...]:
        with RawClient(address) as client:
            client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
            answer = client.request(SaslAuthenticateRequest(auth_bytes=os.urandom(40)))
            return answer.error_code, client.is_closed(2)

    def unsupported(address: str) -> tuple[Any, ...]:
        with RawClient(address) as client:
            answer = client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
            return answer.error_code, sorted(answer.mechanisms), client.is_closed(2)

    def before_auth(address: str) -> bool:
        with RawClient(address) as client:
            client.send(METADATA)
            return client.is_closed(2)

    _compare(both, garbage)
    _compare(both, unsupported)
    _compare(both, before_auth)


def test_sasl_on_a_plaintext_listener(both: dict[str, tuple[str, str]]) -> None:
    def illegal(address: str) -> tuple[Any, ...]:
        with RawClient(address) as client:
            handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
            answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\x00a\x00b"))
            return handshake.error_code, answer.error_code, answer.error_message

    answers = {name: illegal(plain) for name, (plain, _) in both.items()}
    assert answers["sluice"] == answers["kafka"]


def _upsertion(name: str, mechanism: int, iterations: int) -> Upsertion:
    return Upsertion(
        name=name,
        mechanism=i8(mechanism),
        iterations=i32(iterations),
        salt=b"salt",
        salted_password=b"\x01" * 64,
    )


def test_admin_api_answers_match(both: dict[str, tuple[str, str]]) -> None:
    def alter(address: str) -> list[tuple[Any, ...]]:
        upserts = (
            _upsertion("few", 2, 1000),
            _upsertion("many", 2, 20000),
            _upsertion("mech", 3, 4096),
            _upsertion("", 2, 4096),
            _upsertion("twice", 2, 4096),
            _upsertion("twice", 1, 4096),
        )
        deletions = (Deletion(name="ghost", mechanism=i8(1)),)
        with RawClient(address) as client:
            answer = client.request(
                AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upserts)
            )
            described = client.request(
                DescribeUserScramCredentialsRequest(
                    users=(UserName(name="ghost"), UserName(name="dup"), UserName(name="dup"))
                )
            )
        altered = sorted((r.user, r.error_code, r.error_message) for r in answer.results)
        seen = sorted((r.user, r.error_code, r.error_message) for r in described.results)
        return altered + seen

    answers = {name: alter(plain) for name, (plain, _) in both.items()}
    assert answers["sluice"] == answers["kafka"]
