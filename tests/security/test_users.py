"""Users through Kafka's admin APIs (AlterUserScramCredentials, DescribeUserScramCredentials)
with confluent-kafka's AdminClient: a new user logs in, keeps its credential across a
broker restart, and cannot log in once deleted; Kafka's errors for bad requests."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.security.conftest import ALICE, ALICE_PASSWORD, Secured, start_secured


def _logs_in(secured: Secured, user: str, password: str, mechanism: str) -> bool:
    """True when a producer authenticates and reads metadata; False when it is refused."""
    errors: list[KafkaError] = []
    conf = secured.conf("SASL_SSL", mechanism, user, password)
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
        try:
            producer.list_topics(timeout=1)
            return True
        except KafkaException:
            producer.poll(0.1)
    raise AssertionError(f"neither logged in nor refused: {errors}")


def _admin(secured: Secured) -> AdminClient:
    return AdminClient(secured.conf("SASL_SSL", "SCRAM-SHA-512", ALICE, ALICE_PASSWORD))


def test_a_user_created_through_the_admin_api_logs_in_until_deleted(tmp_path: Path) -> None:
    secured = start_secured(tmp_path)
    try:
        admin = _admin(secured)
        sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        created = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("bob", sha512, b"bob-secret")]
        )
        created["bob"].result(10)
        described = admin.describe_user_scram_credentials(["bob"])["bob"].result(10)
        infos = [(i.mechanism, i.iterations) for i in described.scram_credential_infos]
        assert infos == [(ScramMechanism.SCRAM_SHA_512, 8192)]
        assert _logs_in(secured, "bob", "bob-secret", "SCRAM-SHA-512")
        assert _logs_in(secured, "bob", "bob-secret", "PLAIN")  # PLAIN checks the SCRAM key
        assert not _logs_in(secured, "bob", "wrong", "SCRAM-SHA-512")
        assert not _logs_in(secured, "bob", "bob-secret", "SCRAM-SHA-256")  # no such credential

        secured.broker.restart()
        assert _logs_in(secured, "bob", "bob-secret", "SCRAM-SHA-512")

        admin = _admin(secured)
        deleted = admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]
        )
        deleted["bob"].result(10)
        assert not _logs_in(secured, "bob", "bob-secret", "SCRAM-SHA-512")
        everyone = admin.describe_user_scram_credentials().result(10)
        assert set(everyone) == {ALICE}
    finally:
        secured.broker.stop()
        secured.broker.kill()


def test_admin_errors_are_kafkas(secured: Secured) -> None:
    admin = _admin(secured)
    few = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1024)
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("carol", few, b"pw"),
            UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512),
        ]
    )
    with pytest.raises(KafkaException) as too_few:
        futures["carol"].result(10)
    assert too_few.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert "Too few iterations" in too_few.value.args[0].str()
    with pytest.raises(KafkaException) as missing:
        futures["nobody"].result(10)
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    with pytest.raises(KafkaException) as unknown:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    assert unknown.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
