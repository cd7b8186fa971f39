"""A broker with every kind of listener: PLAINTEXT (--listen), SASL_PLAINTEXT, SASL_SSL
(both with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512) and SSL with client certificates
requested; a throwaway CA; alice created from the bootstrap users file."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.schema.errors import ErrorCode

from tests.support.broker import BrokerProcess
from tests.support.processes import free_port
from tests.support.raw_client import RawClient
from tests.support.tls import TestCA

ALICE, ALICE_PASSWORD = "alice", "alice-secret"


@dataclass
class Secured:
    broker: BrokerProcess
    ca: TestCA
    sasl_plaintext: str
    sasl_ssl: str
    ssl: str

    def conf(self, protocol: str, mechanism: str, user: str, password: str) -> dict[str, str]:
        address = self.sasl_ssl if protocol == "SASL_SSL" else self.sasl_plaintext
        conf = {
            "bootstrap.servers": address,
            "security.protocol": protocol,
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
        if protocol == "SASL_SSL":
            conf["ssl.ca.location"] = str(self.ca.ca)
        return conf


def users_file(directory: Path, lines: list[str]) -> Path:
    path = directory / "users.properties"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def secured_settings(ca: TestCA, users: Path, **extra: str) -> dict[str, str]:
    return {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.certificate.location": str(ca.broker.cert),
        "ssl.key.location": str(ca.broker.key),
        "ssl.ca.location": str(ca.ca),
        "ssl.client.auth": "requested",
        "sasl.scram.bootstrap.users.file": str(users),
        **extra,
    }


def start_secured(directory: Path, **extra: str) -> Secured:
    ca = TestCA(directory / "tls")
    users = users_file(
        directory,
        [
            f"SCRAM-SHA-512=[name={ALICE},password={ALICE_PASSWORD}]",
            f'SCRAM-SHA-256=[name={ALICE},password="{ALICE_PASSWORD}",iterations=8192]',
        ],
    )
    port, sasl, sasl_ssl, ssl_port = free_port(), free_port(), free_port(), free_port()
    listeners = (
        f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl},"
        f"SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{ssl_port}"
    )
    settings = secured_settings(ca, users, listeners=listeners, **extra)
    broker = BrokerProcess(directory / "data", settings, port=port).start()
    wait_for_user(broker.bootstrap, ALICE)
    return Secured(
        broker, ca, f"127.0.0.1:{sasl}", f"127.0.0.1:{sasl_ssl}", f"127.0.0.1:{ssl_port}"
    )


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    setup = start_secured(tmp_path_factory.mktemp("secured"))
    try:
        yield setup
    finally:
        setup.broker.stop()
        setup.broker.kill()


def wait_for_user(bootstrap: str, name: str, timeout: float = 20) -> None:
    """Until the broker (its PLAINTEXT listener) describes SCRAM credentials of ``name``."""
    deadline = time.monotonic() + timeout
    while True:
        with RawClient(bootstrap) as client:
            answer = client.request(
                DescribeUserScramCredentialsRequest(users=(UserName(name=name),))
            )
        if answer.results and answer.results[0].error_code == ErrorCode.none:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"user {name} was not created: {answer}")
        time.sleep(0.1)
