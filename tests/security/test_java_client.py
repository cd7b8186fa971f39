"""Apache Kafka's Java client (tools/java/ClientHarness.java) through SASL_SSL with
SCRAM-SHA-512 (a PEM truststore) and SASL_PLAINTEXT with PLAIN; a wrong password fails
with Kafka's SaslAuthenticationException."""

from __future__ import annotations

import uuid

import pytest

from tests.security.conftest import ALICE, ALICE_PASSWORD, Secured
from tests.support.java_client import JavaClientError, java_available, run_java_client

MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _configs(secured: Secured, protocol: str, mechanism: str, password: str) -> list[str]:
    jaas = f'{MODULES[mechanism]} required username="{ALICE}" password="{password}";'
    configs = {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": jaas,
    }
    if protocol == "SASL_SSL":
        configs["ssl.truststore.type"] = "PEM"
        configs["ssl.truststore.location"] = str(secured.ca.ca)
    out: list[str] = []
    for key, value in configs.items():
        out += ["--config", f"{key}={value}"]
    return out


@pytest.fixture(autouse=True)
def _java() -> None:
    reason = java_available()
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize(
    ("protocol", "mechanism"), [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")]
)
def test_java_client_produces_and_consumes(secured: Secured, protocol: str, mechanism: str) -> None:
    address = secured.sasl_ssl if protocol == "SASL_SSL" else secured.sasl_plaintext
    common = ["--bootstrap", address, *_configs(secured, protocol, mechanism, ALICE_PASSWORD)]
    topic = f"java-{uuid.uuid4().hex[:8]}"
    run_java_client(
        ["admin", "create-topic", topic, "--partitions", "1", "--replication-factor", "1", *common]
    )
    acks = run_java_client(["produce", "--topic", topic, "--count", "10", *common])
    assert len(acks) == 10
    records = run_java_client(
        ["consume", "--topic", topic, "--group", "java-g", "--count", "10", *common]
    )
    assert [r["value"] for r in records] == [f"v{i}" for i in range(10)]


def test_java_client_wrong_password(secured: Secured) -> None:
    common = [
        "--bootstrap",
        secured.sasl_ssl,
        *_configs(secured, "SASL_SSL", "SCRAM-SHA-512", "wrong"),
    ]
    with pytest.raises(JavaClientError) as failure:
        run_java_client(["admin", "list-topics", *common])
    assert failure.value.error == "SaslAuthenticationException"
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(failure.value)
