"""KIP-368: with connections.max.reauth.ms a session expires; SaslAuthenticate v1+ tells the
client its lifetime, a client re-authenticates on the same connection (same mechanism and
principal), and a connection that sends a request after expiry is closed."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.security.conftest import ALICE, ALICE_PASSWORD, Secured, start_secured
from tests.security.test_protocol import METADATA, _scram_login
from tests.support.raw_client import RawClient

LIFETIME_MS = 1500


@pytest.fixture(scope="module")
def expiring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    setup = start_secured(
        tmp_path_factory.mktemp("reauth"), **{"connections.max.reauth.ms": str(LIFETIME_MS)}
    )
    try:
        yield setup
    finally:
        setup.broker.stop()
        setup.broker.kill()


def test_an_expired_session_is_closed(expiring: Secured) -> None:
    with RawClient(expiring.sasl_plaintext) as client:
        final = _scram_login(client, ALICE, ALICE_PASSWORD)
        assert final.session_lifetime == datetime.timedelta(milliseconds=LIFETIME_MS)
        assert client.request(METADATA).brokers
        time.sleep(LIFETIME_MS / 1000 + 0.3)
        client.send(METADATA)
        assert client.is_closed()


def test_reauthentication_extends_the_session(expiring: Secured) -> None:
    with RawClient(expiring.sasl_plaintext) as client:
        assert _scram_login(client, ALICE, ALICE_PASSWORD).error_code == ErrorCode.none
        for _ in range(3):
            time.sleep(LIFETIME_MS / 1000 * 0.6)
            assert _scram_login(client, ALICE, ALICE_PASSWORD).error_code == ErrorCode.none
            assert client.request(METADATA).brokers


def test_reauthentication_cannot_change_mechanism(expiring: Secured) -> None:
    with RawClient(expiring.sasl_plaintext) as client:
        assert _scram_login(client, ALICE, ALICE_PASSWORD).error_code == ErrorCode.none
        answer = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert client.is_closed()


def test_librdkafka_reauthenticates_and_keeps_producing(expiring: Secured, tmp_path: Path) -> None:
    topic = "reauth-" + tmp_path.name[-8:]
    admin = AdminClient({"bootstrap.servers": expiring.broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(10)
    before = expiring.broker.log_path.read_text().count("expired")
    errors: list[KafkaError] = []
    conf = expiring.conf("SASL_SSL", "SCRAM-SHA-512", ALICE, ALICE_PASSWORD)
    producer = Producer({**conf, "error_cb": errors.append, "linger.ms": 0})
    delivered: list[object] = []
    deadline = time.monotonic() + 3 * LIFETIME_MS / 1000
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda err, _msg: delivered.append(err))
        producer.poll(0.2)
    assert producer.flush(20) == 0
    assert delivered
    assert all(err is None for err in delivered)
    assert not [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert expiring.broker.log_path.read_text().count("expired") == before
