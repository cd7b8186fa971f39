"""The SASL conversation byte by byte (kio requests on a raw connection): what a
connection may send before it is authenticated, Kafka's answers to an unknown mechanism,
a garbage token and SASL requests on a listener without SASL, a plaintext client on a
TLS port, and that no password is stored or logged."""

from __future__ import annotations

import datetime
import os
import ssl
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from scramp import ScramClient

from dataplane.security.listeners import certificate_principal
from tests.security.conftest import (
    ALICE,
    ALICE_PASSWORD,
    Secured,
    secured_settings,
    users_file,
)
from tests.support.broker import REPO
from tests.support.processes import free_port
from tests.support.raw_client import RawClient
from tests.support.tls import TestCA

API_VERSIONS = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
METADATA = MetadataRequest(
    topics=None,
    allow_auto_topic_creation=False,
    include_topic_authorized_operations=False,
)


def _scram_login(client: RawClient, user: str, password: str) -> object:
    handshake = client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    assert handshake.error_code == ErrorCode.none
    scram = ScramClient(["SCRAM-SHA-512"], user, password)
    first = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode()))
    assert first.error_code == ErrorCode.none, first
    scram.set_server_first(first.auth_bytes.decode())
    final = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode()))
    if final.error_code == ErrorCode.none:
        scram.set_server_final(final.auth_bytes.decode())  # the server proved itself too
    return final


def test_scram_login_then_requests(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as client:
        versions = client.request(API_VERSIONS)
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[17] == (0, 1)  # as Kafka 4.3.1
        assert keys[36][0] == 0
        assert 50 in keys
        assert 51 in keys
        final = _scram_login(client, ALICE, ALICE_PASSWORD)
        assert final.error_code == ErrorCode.none
        assert final.session_lifetime == datetime.timedelta(0)  # connections.max.reauth.ms=0
        port = int(secured.sasl_plaintext.rpartition(":")[2])
        assert client.request(METADATA).brokers[0].port == port  # this listener's


def test_requests_before_authentication_close_the_connection(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as client:
        client.send(METADATA)
        assert client.is_closed()
    with RawClient(secured.sasl_plaintext) as client:  # after the handshake, before the end
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        client.send(METADATA)
        assert client.is_closed()


def test_unsupported_mechanism_is_answered_then_closed(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as client:
        answer = client.request(SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert client.is_closed()


def test_garbage_tokens_are_refused_and_the_broker_keeps_serving(secured: Secured) -> None:
    tokens = [os.urandom(64), b"\xff" * 3, b"n,,n=alice,r=abc,tokenauth=true", b""]
    for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"):
        for token in tokens:
            with RawClient(secured.sasl_plaintext) as client:
                assert client.request(SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
                answer = client.request(SaslAuthenticateRequest(auth_bytes=token))
                assert answer.error_code == ErrorCode.sasl_authentication_failed
                assert answer.error_message
                assert client.is_closed()
    with RawClient(secured.sasl_plaintext) as client:  # garbage frames before any SASL
        client.send_raw(b"\x00\x00\x00\x10" + os.urandom(16))
        assert client.is_closed()
    with RawClient(secured.sasl_plaintext) as client:
        assert _scram_login(client, ALICE, ALICE_PASSWORD).error_code == ErrorCode.none


def test_sasl_requests_on_a_plaintext_listener_are_illegal(secured: Secured) -> None:
    with RawClient(secured.broker.bootstrap) as client:
        handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.illegal_sasl_state
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\x00a\x00b"))
        assert answer.error_code == ErrorCode.illegal_sasl_state
        assert client.request(METADATA).brokers  # still served


def test_authenticated_session_cannot_authenticate_again_without_expiry(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as client:
        assert _scram_login(client, ALICE, ALICE_PASSWORD).error_code == ErrorCode.none
        again = client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        assert again.error_code == ErrorCode.illegal_sasl_state
        assert client.request(METADATA).brokers


def test_plaintext_client_on_a_tls_port_is_closed_cleanly(secured: Secured) -> None:
    for address in (secured.sasl_ssl, secured.ssl):
        with RawClient(address) as client:
            client.send(API_VERSIONS)
            assert client.is_closed()
    with RawClient(secured.sasl_plaintext) as client:
        assert client.request(API_VERSIONS).error_code == ErrorCode.none
    assert secured.broker.alive()
    assert "Traceback" not in secured.broker.logs()


def test_no_password_is_stored_or_logged(secured: Secured) -> None:
    secret = ALICE_PASSWORD.encode()
    for path in Path(secured.broker.data_dir).rglob("*"):
        if path.is_file():
            assert secret not in path.read_bytes(), path
    assert ALICE_PASSWORD not in secured.broker.logs()


def test_certificate_principal_is_the_subject_dn(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    client = ca.client("alice", "eng")
    der = ssl_der(client.cert)
    assert certificate_principal(der) == "User:CN=alice,OU=eng,O=Sluice Tests"
    assert certificate_principal(None) == "User:ANONYMOUS"


def ssl_der(pem: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


def test_a_users_file_readable_by_others_stops_the_broker(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "tls")
    users = users_file(tmp_path, ["SCRAM-SHA-512=[name=a,password=b]"])
    users.chmod(0o644)
    port = free_port()
    settings = secured_settings(ca, users, listeners=f"SASL_SSL://127.0.0.1:{port}")
    command = [
        sys.executable,
        "-m",
        "dataplane.main",
        "--data-dir",
        str(tmp_path / "data"),
        "--listen",
        f"127.0.0.1:{port}",
    ]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "readable by other users" in done.stderr


def test_many_wrong_passwords_leave_the_broker_serving(secured: Secured) -> None:
    def attempt(i: int) -> int:
        with RawClient(secured.sasl_plaintext) as client:
            if i % 2:
                client.request(SaslHandshakeRequest(mechanism="PLAIN"))
                token = f"\x00{ALICE}\x00guess-{i}".encode()
                return int(client.request(SaslAuthenticateRequest(auth_bytes=token)).error_code)
            return int(_scram_login(client, ALICE, f"guess-{i}").error_code)

    with ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(attempt, range(300)))
    assert set(codes) == {ErrorCode.sasl_authentication_failed.value}
    with RawClient(secured.sasl_plaintext) as client:
        assert _scram_login(client, ALICE, ALICE_PASSWORD).error_code == ErrorCode.none
        assert client.request(METADATA).brokers
    assert secured.broker.alive()
