"""A certificate authority per installation, for the TLS listeners of its clusters (issue 15).

The CA lives in ``$SLUICE_HOME/ca/``: ``ca.crt`` (the bundle clients trust, what
``cloudctl get-ca-cert`` prints) and ``ca.key`` (mode 0600, never leaves the directory).
Brokers get a certificate of their own (ECDSA P-256, signed by the CA) whose subject
alternative names are the addresses clients dial (IP addresses and DNS names), issued when
the control plane starts a broker with a TLS listener; clients of mTLS listeners get a
certificate whose subject is their principal (``CN=alice`` -> ``User:CN=alice``, Kafka's
default mapping).

Validity: the CA 10 years, broker and client certificates ``LEAF_DAYS`` (397, the most
browsers accept; a broker's certificate is issued anew at each start).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 397
CA_DIR = "ca"
CA_CERT = "ca.crt"
CA_KEY = "ca.key"
BACKDATE = datetime.timedelta(minutes=5)
"""Certificates start a little in the past: clocks of clients may lag."""


@dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its private key, PEM."""

    certificate: bytes
    key: bytes

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """``name.crt`` and ``name.key`` (0600) in ``directory``; their paths."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        _write(key_path, self.key, 0o600)
        _write(cert_path, self.certificate, 0o644)
        return cert_path, key_path


class CertificateAuthority:
    def __init__(self, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self.certificate = certificate
        self._key = key

    @classmethod
    def load_or_create(cls, home: Path, name: str = "Sluice local CA") -> CertificateAuthority:
        """The installation's CA, made at the first call (the key written 0600 before the
        certificate, so a half-made CA is never trusted)."""
        directory = home / CA_DIR
        cert_path, key_path = directory / CA_CERT, directory / CA_KEY
        if cert_path.exists() and key_path.exists():
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            if not isinstance(key, ec.EllipticCurvePrivateKey):
                raise ValueError(f"{key_path} is not an EC private key")
            return cls(x509.load_pem_x509_certificate(cert_path.read_bytes()), key)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write(key_path, _key_pem(key), 0o600)
        _write(cert_path, certificate.public_bytes(serialization.Encoding.PEM), 0o644)
        return cls(certificate, key)

    def fingerprint(self) -> str:
        """SHA-256 of the CA certificate, hex pairs joined by colons (openssl's form)."""
        return self.certificate.fingerprint(hashes.SHA256()).hex(":").upper()

    def bundle(self) -> bytes:
        """The PEM bundle clients trust (``ssl.ca.location``)."""
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue_server(self, common_name: str, addresses: list[str]) -> Issued:
        """A broker's certificate for ``addresses`` (IP addresses or DNS names; clients
        check the one they dial against these)."""
        if not addresses:
            raise ValueError("a server certificate needs at least one address")
        names: list[x509.GeneralName] = []
        for address in addresses:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(address)))
            except ValueError:
                names.append(x509.DNSName(address))
        return self._issue(
            common_name,
            ExtendedKeyUsageOID.SERVER_AUTH,
            x509.SubjectAlternativeName(names),
        )

    def issue_client(self, common_name: str) -> Issued:
        """A client certificate for mTLS: its subject ``CN=<common_name>`` is the principal
        ``User:CN=<common_name>``."""
        return self._issue(common_name, ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def _issue(
        self,
        common_name: str,
        usage: x509.ObjectIdentifier,
        alternative: x509.SubjectAlternativeName | None,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if alternative is not None:
            builder = builder.add_extension(alternative, critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        return Issued(certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    """Atomically, with ``mode`` from the start."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
