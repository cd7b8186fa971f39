"""The client side of SASL on a Kafka connection: SaslHandshake v1, then SaslAuthenticate v2
carrying PLAIN or SCRAM (RFC 5802/7677, through ``scramp``) tokens.

Used where Sluice itself is the client of a secured listener: brokers talking to brokers
(replication, the Raft quorum, forwarding, transforms) on the inter-broker listener, and the
control plane's admin connections. The credentials are read from a file (never from a
command line or an environment variable), JSON::

    {"username": "...", "password": "...", "mechanism": "SCRAM-SHA-512"}

``mechanism`` is optional (SCRAM-SHA-512). The file must not be readable by group or others.
"""

from __future__ import annotations

import enum
import json
import os
import ssl
import stat
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2 import request as auth_req
from kio.schema.sasl_handshake.v1 import request as hs_req
from scramp import ScramClient, ScramException


class Mechanism(enum.StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class SaslFailed(OSError):
    """The broker refused the credentials or the mechanism (nothing else was sent)."""


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    username: str
    password: str
    mechanism: Mechanism = Mechanism.SCRAM_SHA_512

    def __repr__(self) -> str:  # never the password, in a log or a traceback
        return f"SaslCredentials({self.username!r}, {self.mechanism.value})"


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a client connection is secured: TLS (a context that checks the broker) and / or
    SASL credentials; both None is PLAINTEXT."""

    tls: ssl.SSLContext | None = None
    credentials: SaslCredentials | None = None

    @classmethod
    def from_properties(cls, conf: Mapping[str, str]) -> ClientSecurity | None:
        """From librdkafka's (and Kafka's) client properties: ``security.protocol``,
        ``sasl.mechanism`` / ``sasl.mechanisms``, ``sasl.username``, ``sasl.password``,
        ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
        ``ssl.endpoint.identification.algorithm`` (``none`` or empty: no host name check).
        None for PLAINTEXT; ValueError names what is missing or wrong."""
        protocol = conf.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(
                f"security.protocol {protocol!r}: expected PLAINTEXT, SSL, SASL_PLAINTEXT or "
                "SASL_SSL"
            )
        if protocol == "PLAINTEXT":
            return None
        tls = None
        if protocol.endswith("SSL"):
            tls = ssl.create_default_context(cafile=conf.get("ssl.ca.location") or None)
            if conf.get("ssl.endpoint.identification.algorithm", "https").lower() in ("", "none"):
                tls.check_hostname = False
            certificate = conf.get("ssl.certificate.location")
            if certificate:
                tls.load_cert_chain(certificate, conf.get("ssl.key.location") or None)
        credentials = None
        if protocol.startswith("SASL_"):
            raw = conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "GSSAPI"
            try:
                mechanism = Mechanism(raw.upper())
            except ValueError:
                raise ValueError(
                    f"sasl.mechanism {raw!r}: expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                ) from None
            username, password = conf.get("sasl.username"), conf.get("sasl.password")
            if not username or password is None:
                raise ValueError(f"{protocol} needs sasl.username and sasl.password")
            credentials = SaslCredentials(username, password, mechanism)
        return cls(tls, credentials)


def load_credentials(path: str | Path) -> SaslCredentials:
    """The credentials in ``path``; ValueError says what is wrong with the file."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"cannot read the credentials file {path}: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(
            f"the credentials file {path} is readable by others "
            f"(mode {stat.S_IMODE(mode):o}); chmod 600 it"
        )
    try:
        doc = json.loads(text)
        mechanism = Mechanism(doc.get("mechanism", Mechanism.SCRAM_SHA_512.value))
        username, password = doc["username"], doc["password"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"the credentials file {path} is not JSON with username, password and an optional "
            f"mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): {exc}"
        ) from exc
    if not isinstance(username, str) or not isinstance(password, str) or not username:
        raise ValueError(f"the credentials file {path}: username and password must be strings")
    return SaslCredentials(username, password, mechanism)


def write_credentials(path: str | Path, credentials: SaslCredentials) -> None:
    """Write ``credentials`` to ``path``, readable by its owner only (created 0600)."""
    doc = {
        "username": credentials.username,
        "password": credentials.password,
        "mechanism": credentials.mechanism.value,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(doc, out)
    os.chmod(path, 0o600)


Exchange = Generator[Any, Any, None]
"""Yields the requests to send, one at a time, and is sent each answer (kio entities)."""


def exchange(credentials: SaslCredentials) -> Exchange:
    """The requests of one authentication, sans I/O: the connection sends each request this
    yields and sends the generator the answer; SaslFailed with the broker's message."""
    mechanism = credentials.mechanism.value
    handshake = yield hs_req.SaslHandshakeRequest(mechanism=mechanism)
    if handshake.error_code != ErrorCode.none:
        raise SaslFailed(
            f"the broker does not offer {mechanism} (it offers {', '.join(handshake.mechanisms)})"
        )

    def check(answer: Any) -> bytes:
        if answer.error_code != ErrorCode.none:
            raise SaslFailed(
                f"authentication of {credentials.username} failed: "
                f"{answer.error_message or ErrorCode(answer.error_code).name}"
            )
        return bytes(answer.auth_bytes)

    if credentials.mechanism is Mechanism.PLAIN:
        token = f"\0{credentials.username}\0{credentials.password}".encode()
        check((yield auth_req.SaslAuthenticateRequest(auth_bytes=token)))
        return
    scram = ScramClient([mechanism], credentials.username, credentials.password)
    try:
        first = scram.get_client_first().encode()
        server_first = check((yield auth_req.SaslAuthenticateRequest(auth_bytes=first)))
        scram.set_server_first(server_first.decode())
        final = scram.get_client_final().encode()
        server_final = check((yield auth_req.SaslAuthenticateRequest(auth_bytes=final)))
        scram.set_server_final(server_final.decode())
    except (ScramException, UnicodeDecodeError) as exc:
        raise SaslFailed(f"SCRAM exchange with the broker failed: {exc}") from exc
