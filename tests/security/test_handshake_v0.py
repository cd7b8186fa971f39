"""SaslHandshake v0, as Kafka serves it: after the handshake the SASL tokens travel as raw
size-prefixed frames (no request header), answered the same way; a failure closes the
connection. Announcing v0 also lets older librdkafka builds (Debian's kcat, librdkafka 2.0,
whose feature check looks for v0 in ApiVersions) log in at all: kcat lists metadata over
SASL_PLAINTEXT and SASL_SSL with PLAIN, its configuration in a file (never on its command
line)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest
from scramp import ScramClient

from tests.security.conftest import ALICE, ALICE_PASSWORD, Secured
from tests.support.raw_client import RawClient

SIZE = struct.Struct(">i")
METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def raw_exchange(client: RawClient, token: bytes) -> bytes:
    """Send a raw token, read the raw answer (which may be empty: no request framing)."""
    client.send_raw(SIZE.pack(len(token)) + token)
    (size,) = SIZE.unpack(read_exactly(client, 4))
    return read_exactly(client, size)


def read_exactly(client: RawClient, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = client.sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def test_plain_with_raw_tokens(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as client:
        answer = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert answer.error_code == ErrorCode.none
        assert raw_exchange(client, f"\0{ALICE}\0{ALICE_PASSWORD}".encode()) == b""
        assert client.request(METADATA).brokers, "authenticated: requests are served"


def test_scram_with_raw_tokens(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as client:
        assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code == 0
        scram = ScramClient(["SCRAM-SHA-512"], ALICE, ALICE_PASSWORD)
        first = raw_exchange(client, scram.get_client_first().encode())
        scram.set_server_first(first.decode())
        final = raw_exchange(client, scram.get_client_final().encode())
        scram.set_server_final(final.decode())  # raises unless the server proved itself
        assert client.request(METADATA).brokers


def test_a_wrong_password_closes_the_connection(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as client:
        client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        client.send_raw(SIZE.pack(20) + f"\0{ALICE}\0wrong-secret".encode().ljust(20, b"x"))
        assert client.is_closed(5)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kcat_logs_in(secured: Secured, protocol: str, tmp_path: Path) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed and could not be (tools/ensure-system-deps.sh)")
    conf = tmp_path / "kcat.conf"
    conf.write_text(
        f"security.protocol={protocol}\nsasl.mechanisms=PLAIN\nsasl.username={ALICE}\n"
        f"sasl.password={ALICE_PASSWORD}\nssl.ca.location={secured.ca.ca}\n"
    )
    conf.chmod(0o600)
    address = secured.sasl_ssl if protocol == "SASL_SSL" else secured.sasl_plaintext
    done = subprocess.run(
        [kcat, "-F", str(conf), "-b", address, "-L", "-m", "15"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "1 brokers:" in done.stdout
