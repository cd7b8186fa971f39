"""Real clients through secured listeners: confluent-kafka (librdkafka) and kafka-python
produce and consume over SASL_SSL and SASL_PLAINTEXT with SCRAM and PLAIN, and over SSL
with a client certificate; wrong passwords, unknown users and mechanisms that are not
enabled fail as they fail on Kafka."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as PyKafkaError
from kafka.net.selector import NetworkSelector

from tests.security.conftest import ALICE, ALICE_PASSWORD, Secured


def _topic(secured: Secured, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": secured.broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(10)
    return name


def _round_trip(conf: dict[str, str], topic: str, count: int = 20) -> list[bytes]:
    producer = Producer(conf)
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer(
        {**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(bytes(message.value()))
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_SSL", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ],
)
def test_confluent_kafka_produces_and_consumes(
    secured: Secured, protocol: str, mechanism: str
) -> None:
    topic = _topic(secured, "auth")
    conf = secured.conf(protocol, mechanism, ALICE, ALICE_PASSWORD)
    values = _round_trip(conf, topic)
    assert values == [f"record-{i}".encode() for i in range(20)]


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_large_records_over_tls(secured: Secured, protocol: str) -> None:
    """Frames larger than a connection's read buffer arrive through the TLS transport too;
    fetch answers of whole segment ranges go out read back over TLS, with sendfile after
    a SASL login without TLS."""
    topic = _topic(secured, "large")
    conf = secured.conf(protocol, "SCRAM-SHA-512", ALICE, ALICE_PASSWORD)
    producer = Producer({**conf, "linger.ms": 50, "compression.type": "none"})
    values = [bytes([i]) * 900_000 for i in range(4)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "large-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 4 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(bytes(message.value()))
    consumer.close()
    assert got == values


def test_confluent_kafka_over_mutual_tls(secured: Secured) -> None:
    client = secured.ca.client("alice", "eng")
    conf = {
        "bootstrap.servers": secured.ssl,
        "security.protocol": "SSL",
        "ssl.ca.location": str(secured.ca.ca),
        "ssl.certificate.location": str(client.cert),
        "ssl.key.location": str(client.key),
    }
    topic = _topic(secured, "mtls")
    assert len(_round_trip(conf, topic, 5)) == 5


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")],
)
def test_kafka_python_produces_and_consumes(
    secured: Secured, protocol: str, mechanism: str
) -> None:
    topic = _topic(secured, "kp")
    conf = secured.conf(protocol, mechanism, ALICE, ALICE_PASSWORD)
    options = {
        "bootstrap_servers": conf["bootstrap.servers"],
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": ALICE,
        "sasl_plain_password": ALICE_PASSWORD,
    }
    if protocol == "SASL_SSL":
        options["ssl_cafile"] = str(secured.ca.ca)
    producer = KafkaProducer(**options)
    sent = [producer.send(topic, f"kp-{i}".encode()) for i in range(5)]
    # each acknowledged (an error raises here), not only flushed
    assert [f.get(timeout=60).offset for f in sent] == list(range(5))
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", **options)
    # until the 5 arrive (a loaded machine may take more than an idle timeout to log in)
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < 5 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            values.extend(r.value for r in records)
    consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(5)]


def _auth_error(conf: dict[str, str]) -> KafkaError:
    """The error librdkafka reports (to error_cb, from poll) for a failed login."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append, "retry.backoff.ms": 1000})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error reported"
    return errors[0]


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "message"),
    [
        (
            "SCRAM-SHA-512",
            ALICE,
            "wrong",
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512",
        ),
        (
            "SCRAM-SHA-256",
            "nobody",
            "whatever",
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-256",
        ),
        ("PLAIN", ALICE, "wrong", "Authentication failed: Invalid username or password"),
        ("PLAIN", "nobody", "whatever", "Authentication failed: Invalid username or password"),
    ],
)
def test_bad_credentials_fail_with_kafkas_message(
    secured: Secured, mechanism: str, user: str, password: str, message: str
) -> None:
    error = _auth_error(secured.conf("SASL_SSL", mechanism, user, password))
    assert error.code() == KafkaError._AUTHENTICATION
    assert message in error.str()


def test_kafka_python_wrong_password_fails(
    secured: Secured, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kafka-python 3.0.12 leaves the wake-up socket pair of a producer whose constructor
    # failed open (a ResourceWarning, an error in this suite): close its selectors after
    selectors: list[NetworkSelector] = []
    original = NetworkSelector.__init__

    def tracked(self: NetworkSelector, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)
        selectors.append(self)

    monkeypatch.setattr(NetworkSelector, "__init__", tracked)
    try:
        with pytest.raises(PyKafkaError):
            KafkaProducer(
                bootstrap_servers=secured.sasl_plaintext,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username=ALICE,
                sasl_plain_password="wrong",
                bootstrap_timeout_ms=3000,
            )
    finally:
        for selector in selectors:
            selector.close()
    assert (
        "SaslAuthenticationFailedError: Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-512" in caplog.text
    )
