"""How a cluster's clients authenticate (MSK's client_authentication), as broker listeners.

Each mode the cluster has is its own listener on every broker, with its own port:

    mode   listener name       security protocol   what a client needs
    none   CLIENT              PLAINTEXT           nothing
    scram  CLIENT_SASL_SCRAM   SASL_SSL            the CA bundle, a SCRAM-SHA-512 user
    tls    CLIENT_SECURE       SSL                 the CA bundle, a client certificate of the CA
                                                   (required; principal User:<subject DN>)

A cluster that has never had a secured mode runs as before: one PLAINTEXT listener at
``--listen``, which is also the client listener (``BrokerRecord.port``). Once a cluster gets a
secured mode it has, for the rest of its life, an internal listener at ``--listen``
(``INTERNAL``, SASL_PLAINTEXT, SCRAM-SHA-512) for the other brokers and the control plane,
used with the cluster's internal user ``sluice-internal``: its random password is generated
once, kept in a 0600 JSON file in the cluster's directory (``security/internal.json``, read by
``wire.sasl.load_credentials``) and in the 0600 bootstrap users file the brokers create it
from (``security/bootstrap-users``); both reach the brokers as file names, never on a command
line or in a log. The internal user is in ``super.users``. Its credentials are never handed
to clients. A secured cluster enforces ACLs (``authorizer.class.name`` is Kafka's
StandardAuthorizer). ``allow.everyone.if.no.acl.found`` is false when every listener
authenticates, so users get nothing until ACLs grant it (``cloudctl create-acl``); while the
cluster keeps a ``none`` listener it is true, so that adding a secured mode does not cut off
the clients already connected (a resource with ACLs is closed to everyone else either way).
The cluster's own config may set it.

Broker certificates (SANs: the broker's host, and ``localhost`` for a loopback host, and
the address of every private endpoint) are issued by the installation's CA (``ca.py``) each
time a broker with a TLS listener starts, written beside the other files (keys 0600).

Private endpoints (``endpoints.py``) add one listener each (:class:`EndpointListener`: its
own loopback address and port, the protocol of its mode, the principals it admits as
``listener.allowed.principals``); an open cluster with one gets its ``--listen`` listener
named ``PLAINTEXT`` beside it.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from controlplane import errors
from controlplane.ca import CA_CERT, CA_DIR, CertificateAuthority
from controlplane.states import ClientAuth
from controlplane.store import BrokerRecord, ClusterRecord
from dataplane.config.security_table import STANDARD_AUTHORIZER
from wire.sasl import Mechanism, SaslCredentials, load_credentials, write_credentials

INTERNAL_USER = "sluice-internal"
"""The cluster's own SCRAM user: brokers authenticate to each other with it, and the control
plane to them."""
INTERNAL_LISTENER = "INTERNAL"
INTERNAL_PROTOCOL = "SASL_PLAINTEXT"
MECHANISM = Mechanism.SCRAM_SHA_512
PASSWORD_BYTES = 32
"""Random bytes of the internal user's password (URL-safe base64: 43 characters)."""
SECURITY_DIR = "security"
CREDENTIALS_FILE = "internal.json"
USERS_FILE = "bootstrap-users"
SUPER_USERS = "super.users"
ALLOW_IF_NO_ACL = "allow.everyone.if.no.acl.found"


@dataclass(frozen=True, slots=True)
class ListenerKind:
    """The listener of one mode: its Kafka listener name and security protocol."""

    auth: ClientAuth
    name: str
    protocol: str


LISTENERS: dict[ClientAuth, ListenerKind] = {
    ClientAuth.NONE: ListenerKind(ClientAuth.NONE, "CLIENT", "PLAINTEXT"),
    ClientAuth.SCRAM: ListenerKind(ClientAuth.SCRAM, "CLIENT_SASL_SCRAM", "SASL_SSL"),
    ClientAuth.TLS: ListenerKind(ClientAuth.TLS, "CLIENT_SECURE", "SSL"),
}

PORT_COLUMNS: dict[ClientAuth, str] = {
    ClientAuth.NONE: "plaintext_port",
    ClientAuth.SCRAM: "scram_port",
    ClientAuth.TLS: "tls_port",
}
"""The broker column holding each mode's port (NONE's only in a secured cluster)."""


def parse_modes(
    modes: Iterable[ClientAuth], cluster: str, *, default: bool
) -> tuple[ClientAuth, ...]:
    """The modes in the order given, each once; empty is NONE with ``default`` (a create),
    else INVALID_ARGUMENT."""
    out: list[ClientAuth] = []
    for mode in modes:
        if mode not in out:
            out.append(mode)
    if not out:
        if default:
            return (ClientAuth.NONE,)
        raise errors.BadRequest(
            f"give cluster {cluster!r} at least one client authentication mode (none, scram, tls)",
            cluster=cluster,
        )
    return tuple(out)


def needs_internal_user(modes: Sequence[ClientAuth]) -> bool:
    """Whether a cluster with ``modes`` needs the internal listener (any secured mode)."""
    return any(mode is not ClientAuth.NONE for mode in modes)


def missing_ports(modes: Sequence[ClientAuth], secured: bool, broker: BrokerRecord) -> list[str]:
    """The port columns ``broker`` still lacks for ``modes`` (a port, once reserved, stays
    with the broker: a mode given again gets its old port back)."""
    out = []
    for mode in modes:
        if mode is ClientAuth.NONE and not secured:
            continue  # the broker's own port
        column = PORT_COLUMNS[mode]
        if not getattr(broker, column):
            out.append(column)
    return out


def client_port(cluster: ClusterRecord, broker: BrokerRecord, mode: ClientAuth) -> int:
    """The port of ``broker``'s listener of ``mode`` (0: none reserved)."""
    if mode is ClientAuth.NONE and not cluster.secured:
        return broker.port
    port: int = getattr(broker, PORT_COLUMNS[mode])
    return port


def bootstrap(cluster: ClusterRecord, brokers: Sequence[BrokerRecord], mode: ClientAuth) -> str:
    """``host:port,...`` of the listener of ``mode`` on every broker; empty when the cluster
    does not have the mode."""
    if mode not in cluster.client_auth:
        return ""
    return ",".join(f"{b.host}:{client_port(cluster, b, mode)}" for b in brokers)


@dataclass(frozen=True, slots=True)
class EndpointListener:
    """A private endpoint's listener on one broker (``endpoints.py`` builds them)."""

    name: str
    """Kafka listener name, ``ENDPOINT_<NAME>``."""
    auth: ClientAuth
    host: str
    """The endpoint's own loopback address."""
    port: int
    allowed: tuple[str, ...] = ()
    """Principals it admits (empty: every one)."""

    @property
    def protocol(self) -> str:
        return LISTENERS[self.auth].protocol


def listeners(cluster: ClusterRecord, broker: BrokerRecord) -> list[tuple[ListenerKind, int]]:
    """The client listeners of ``broker`` and their ports, in the cluster's order of modes."""
    return [(LISTENERS[mode], client_port(cluster, broker, mode)) for mode in cluster.client_auth]


# ---------------------------------------------------------------------- files


def security_dir(cluster_dir: Path) -> Path:
    return cluster_dir / SECURITY_DIR


def create_internal_user(cluster_dir: Path) -> Path:
    """The credentials file of the cluster's internal user, made with a random password the
    first time (kept after: the brokers recorded the user with it), and the bootstrap users
    file the brokers create the user from. Both 0600 in a 0700 directory."""
    directory = security_dir(cluster_dir)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / CREDENTIALS_FILE
    if path.exists():
        credentials = load_credentials(path)
    else:
        password = secrets.token_urlsafe(PASSWORD_BYTES)
        credentials = SaslCredentials(INTERNAL_USER, password, MECHANISM)
        write_credentials(path, credentials)
    users = directory / USERS_FILE
    name, password = credentials.username, credentials.password
    line = f"{credentials.mechanism.value}=[name={name},password={password}]\n"
    tmp = users.with_name(f".{users.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(line)
    os.replace(tmp, users)
    return path


def certificate_names(host: str, extra: Sequence[str] = ()) -> list[str]:
    """The subject alternative names of a broker certificate: its host, and ``localhost``
    beside a loopback address (clients dial either), then ``extra`` (private endpoints'
    addresses)."""
    names = [host]
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        names += [n for n in ("localhost", "127.0.0.1") if n != host]
    return names + [n for n in dict.fromkeys(extra) if n not in names]


def issue_certificate(
    home: Path, directory: Path, broker: BrokerRecord, extra: Sequence[str] = ()
) -> tuple[Path, Path]:
    """A new certificate of the installation's CA for ``broker`` (and the ``extra`` names):
    (certificate, key) files."""
    ca = CertificateAuthority.load_or_create(home)
    issued = ca.issue_server(f"broker-{broker.broker_id}", certificate_names(broker.host, extra))
    return issued.write(directory, f"broker-{broker.broker_id}")


def _listener_settings(
    entries: Sequence[tuple[str, str, str, int]], endpoints: Sequence[EndpointListener]
) -> dict[str, str]:
    """``listeners``, ``advertised.listeners``, the protocol map and the principals each
    endpoint admits, of (name, protocol, host, port) ``entries``."""
    addresses = ",".join(f"{name}://{host}:{port}" for name, _, host, port in entries)
    out = {
        "listeners": addresses,
        "advertised.listeners": addresses,
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p, _, _ in entries),
    }
    allowed = ";".join(f"{e.name}={'|'.join(e.allowed)}" for e in endpoints if e.allowed)
    if allowed:
        out["listener.allowed.principals"] = allowed
    return out


def _endpoint_entries(endpoints: Sequence[EndpointListener]) -> list[tuple[str, str, str, int]]:
    return [(e.name, e.protocol, e.host, e.port) for e in endpoints]


def broker_settings(
    home: Path,
    cluster: ClusterRecord,
    broker: BrokerRecord,
    endpoints: Sequence[EndpointListener] = (),
) -> dict[str, str]:
    """The listener and authentication settings of one broker of a secured cluster, with
    its private endpoints' listeners; issues the broker's certificate when it has a TLS
    listener. A cluster that is not secured needs none for its one PLAINTEXT listener at
    ``--listen`` (empty), only its endpoints' (PLAINTEXT: its only mode)."""
    if not cluster.secured:
        if not endpoints:
            return {}
        own = [("PLAINTEXT", "PLAINTEXT", broker.host, broker.port)]
        return _listener_settings(own + _endpoint_entries(endpoints), endpoints)
    credentials = Path(cluster.internal_credentials)
    directory = credentials.parent
    entries = [(INTERNAL_LISTENER, INTERNAL_PROTOCOL, broker.host, broker.port)] + [
        (kind.name, kind.protocol, broker.host, port) for kind, port in listeners(cluster, broker)
    ]
    out = {
        **_listener_settings(entries + _endpoint_entries(endpoints), endpoints),
        "sasl.enabled.mechanisms": MECHANISM.value,
        "inter.broker.credentials.file": str(credentials),
        "sasl.scram.bootstrap.users.file": str(directory / USERS_FILE),
    }
    # ACLs are enforced on a secured cluster (Kafka's StandardAuthorizer) and the internal
    # user may do everything. A resource without ACLs is closed when every listener
    # authenticates; while a `none` listener remains it stays open (its clients would lose
    # everything the moment a secured mode is added); the cluster's config may say otherwise
    out["authorizer.class.name"] = STANDARD_AUTHORIZER
    out[SUPER_USERS] = f"User:{INTERNAL_USER}"
    modes = set(cluster.client_auth) | {e.auth for e in endpoints}
    still_open = "true" if ClientAuth.NONE in modes else "false"
    out[ALLOW_IF_NO_ACL] = cluster.config.get(ALLOW_IF_NO_ACL, still_open)
    if modes & {ClientAuth.SCRAM, ClientAuth.TLS}:
        extra = [e.host for e in endpoints]
        cert, key = issue_certificate(home, directory, broker, extra)
        out["ssl.certificate.location"] = str(cert)
        out["ssl.key.location"] = str(key)
    if ClientAuth.TLS in modes:
        out["ssl.ca.location"] = str(home / CA_DIR / CA_CERT)
        out["ssl.client.auth"] = "required"  # SSL listeners only; SASL_SSL ignores it (KIP-684)
    return out
