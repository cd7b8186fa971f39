"""The installation's certificate authority (controlplane/ca.py): made once and kept (key
0600), broker certificates that clients verify against the bundle for the address they
dial, client certificates whose subject is the principal; real TLS handshakes over
loopback with Python's ssl."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest

from controlplane.ca import CA_CERT, CA_DIR, CA_KEY, CertificateAuthority, Issued


def handshake(
    server: Issued, ca_file: Path, tmp: Path, *, dial: str, client: Issued | None = None
) -> str:
    """A TLS handshake over 127.0.0.1: the client checks the server's certificate against
    the CA for ``dial``; the server requires a client certificate when one is given.
    The client certificate's subject as the server saw it ("" without one)."""
    cert, key = server.write(tmp / "server", "broker")
    srv = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    srv.load_cert_chain(cert, key)
    if client is not None:
        srv.verify_mode = ssl.CERT_REQUIRED
        srv.load_verify_locations(ca_file)
    cli = ssl.create_default_context(cafile=str(ca_file))
    if client is not None:
        ccert, ckey = client.write(tmp / "client", "client")
        cli.load_cert_chain(ccert, ckey)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    seen: dict[str, object] = {}

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with srv.wrap_socket(conn, server_side=True) as tls:
                peer = tls.getpeercert()
                seen["subject"] = peer.get("subject", ()) if peer else ()
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError) as exc:
            seen["error"] = exc

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            cli.wrap_socket(raw, server_hostname=dial) as tls,
        ):
            assert tls.recv(2) == b"ok"
    finally:
        thread.join(10)
        listener.close()
    subject = seen.get("subject") or ()
    return ",".join(f"{k}={v}" for rdn in subject for k, v in rdn)  # type: ignore[attr-defined]


def test_made_once_and_kept(tmp_path: Path) -> None:
    first = CertificateAuthority.load_or_create(tmp_path)
    again = CertificateAuthority.load_or_create(tmp_path)
    assert first.bundle() == again.bundle()
    key = tmp_path / CA_DIR / CA_KEY
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" not in (tmp_path / CA_DIR / CA_CERT).read_bytes()
    assert b"PRIVATE KEY" not in first.bundle()


def test_broker_certificate_verifies_for_its_addresses(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)
    ca_file = tmp_path / CA_DIR / CA_CERT
    issued = ca.issue_server("broker-0", ["127.0.0.1", "localhost"])
    assert handshake(issued, ca_file, tmp_path, dial="127.0.0.1") == ""
    assert handshake(issued, ca_file, tmp_path, dial="localhost") == ""
    with pytest.raises(ssl.SSLCertVerificationError, match=r"mismatch|match"):
        handshake(issued, ca_file, tmp_path, dial="127.0.0.2")


def test_another_installations_ca_is_not_trusted(tmp_path: Path) -> None:
    ours = CertificateAuthority.load_or_create(tmp_path / "ours")
    theirs = CertificateAuthority.load_or_create(tmp_path / "theirs")
    issued = theirs.issue_server("broker-0", ["127.0.0.1"])
    assert ours.bundle() != theirs.bundle()
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(issued, tmp_path / "ours" / CA_DIR / CA_CERT, tmp_path, dial="127.0.0.1")


def test_client_certificate_carries_the_principal(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)
    ca_file = tmp_path / CA_DIR / CA_CERT
    server = ca.issue_server("broker-0", ["127.0.0.1"])
    client = ca.issue_client("alice")
    subject = handshake(server, ca_file, tmp_path, dial="127.0.0.1", client=client)
    assert subject == "commonName=alice"


def test_a_server_certificate_needs_an_address(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one address"):
        CertificateAuthority.load_or_create(tmp_path).issue_server("b", [])
