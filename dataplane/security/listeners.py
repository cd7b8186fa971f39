"""The broker's Kafka listeners: names, security protocols, addresses and TLS contexts.

``listeners`` is Kafka's ``NAME://host:port,...``; a NAME is a security protocol or a name
that ``listener.security.protocol.map`` maps to one. Without ``listeners`` the broker has
one PLAINTEXT listener at ``--listen`` (as before). With it, ``--listen`` must be one of
them: the listener other brokers and the controller use.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from dataplane.config import Settings
from dataplane.config.security_table import SECURITY_PROTOCOLS
from wire.errors import InvalidConfig

ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    protocol: str
    host: str
    port: int

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


ENDPOINT_LISTENER_PREFIX = "ENDPOINT_"
"""A private endpoint's listener is ``ENDPOINT_`` + its name in upper case, hyphens as
underscores (the control plane names them so)."""


def endpoint_of(listener_name: str) -> str:
    """The private endpoint a listener serves (its name as the control plane spells it:
    lower case, hyphens), or "" for any other listener."""
    if not listener_name.startswith(ENDPOINT_LISTENER_PREFIX):
        return ""
    return listener_name.removeprefix(ENDPOINT_LISTENER_PREFIX).lower().replace("_", "-")


def protocol_map(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (x.strip() for x in raw.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfig(
                f"invalid listener.security.protocol.map entry {item!r}: expected "
                f"NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        out[name] = protocol
    return out


def parse_listeners(config: Settings, listen_host: str, listen_port: int) -> list[Listener]:
    """The configured listeners, the one at ``--listen`` first. InvalidConfig names the
    key of a bad entry."""
    raw = config.get_str("listeners")
    if not raw:
        return [Listener("PLAINTEXT", "PLAINTEXT", listen_host, listen_port)]
    protocols = protocol_map(config.get_str("listener.security.protocol.map"))
    found: list[Listener] = []
    for item in (x.strip() for x in raw.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, _, port = address.rpartition(":")
        name = name.strip().upper()
        if not sep or not port.isdigit():
            raise InvalidConfig(f"invalid listeners entry {item!r}: expected NAME://host:port")
        protocol = protocols.get(name)
        if protocol is None:
            raise InvalidConfig(
                f"listeners: no security protocol for listener name {name!r} in "
                "listener.security.protocol.map"
            )
        if any(known.name == name for known in found):
            raise InvalidConfig(f"listeners: the listener name {name!r} appears twice")
        found.append(Listener(name, protocol, host.strip("[]") or "0.0.0.0", int(port)))
    primary = [x for x in found if (x.host, x.port) == (listen_host, listen_port)]
    if not primary:
        raise InvalidConfig(
            f"--listen {listen_host}:{listen_port} must be one of the listeners ({raw}): "
            "other brokers and the controller reach this broker there"
        )
    return primary + [x for x in found if x is not primary[0]]


def allowed_principals(config: Settings, listeners: list[Listener]) -> dict[str, frozenset[str]]:
    """``listener.allowed.principals`` by listener name (absent: every principal)."""
    names = {x.name for x in listeners}
    out: dict[str, frozenset[str]] = {}
    for item in (x.strip() for x in config.get_str("listener.allowed.principals").split(";")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        principals = frozenset(p.strip() for p in raw.split("|") if p.strip())
        if not sep or not name.strip() or not principals:
            raise InvalidConfig(
                f"invalid listener.allowed.principals entry {item!r}: expected NAME=User:a|User:b"
            )
        if name.strip() not in names:
            raise InvalidConfig(
                f"listener.allowed.principals: no listener named {name.strip()!r} "
                f"(listeners: {', '.join(sorted(names))})"
            )
        bad = sorted(p for p in principals if not p.startswith("User:"))
        if bad:
            raise InvalidConfig(
                f"listener.allowed.principals: {bad[0]!r} is not a principal (User:NAME)"
            )
        out[name.strip()] = principals
    return out


def check_security(config: Settings, listeners: list[Listener]) -> None:
    """Refuse settings a secured listener cannot start with."""
    if any(x.tls for x in listeners):
        for key in ("ssl.certificate.location", "ssl.key.location"):
            if not config.get_str(key):
                raise InvalidConfig(f"{key} is required by an SSL or SASL_SSL listener")
        if config.get_str("ssl.client.auth") != "none" and not config.get_str("ssl.ca.location"):
            raise InvalidConfig("ssl.client.auth requested or required needs ssl.ca.location")
    if any(x.sasl for x in listeners) and not config.get_list("sasl.enabled.mechanisms"):
        raise InvalidConfig("sasl.enabled.mechanisms is empty but a SASL listener is configured")
    internal = listeners[0]
    if internal.tls:
        raise InvalidConfig(
            f"the inter-broker listener {internal.name} (at --listen) is {internal.protocol}: "
            "brokers talk to each other over PLAINTEXT or SASL_PLAINTEXT only; put --listen "
            "on a PLAINTEXT or SASL_PLAINTEXT listener"
        )
    if internal.sasl and not config.get_str("inter.broker.credentials.file"):
        raise InvalidConfig(
            f"the inter-broker listener {internal.name} (at --listen) is {internal.protocol}: "
            "set inter.broker.credentials.file to the credentials brokers authenticate with"
        )


def server_context(config: Settings, client_auth: str | None = None) -> ssl.SSLContext:
    """The TLS context of SSL and SASL_SSL listeners (TLS 1.2 or newer); client
    certificates as ``client_auth`` says, else as ``ssl.client.auth``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(
            config.get_str("ssl.certificate.location"), config.get_str("ssl.key.location")
        )
        ca = config.get_str("ssl.ca.location")
        if ca:
            context.load_verify_locations(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidConfig(f"cannot load the TLS certificate, key or CA: {exc}") from exc
    client_auth = client_auth or config.get_str("ssl.client.auth")
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[client_auth]
    return context


def certificate_principal(der: bytes | None) -> str:
    """Kafka's default principal of a TLS client: ``User:`` + the certificate subject's
    distinguished name in RFC 2253 form (most specific first, e.g. ``User:CN=alice,OU=eng,
    O=Example``); ``User:ANONYMOUS`` without a client certificate."""
    if not der:
        return ANONYMOUS
    # cryptography only for a client certificate (its import is ~60 ms of a broker's start)
    from cryptography import x509  # noqa: PLC0415

    subject = x509.load_der_x509_certificate(der).subject
    return "User:" + subject.rfc4514_string()
