"""Private endpoints of a cluster (the Endpoints API), as MSK's multi-VPC private
connectivity and Redpanda Cloud's private links, on one machine.

An endpoint is a named listener on every broker of its cluster:

- bound to a loopback address of its own (one per endpoint, from the control plane's
  ``private.endpoint.network``, 127.0.16.0/20 by default: the first address no endpoint of
  this control plane has and no socket of the machine uses, checked to bind; recorded, so
  it stays the same across restarts), on a port of its own per broker (reserved as every
  broker port is, and kept);
- advertised under its own Kafka listener name, ``ENDPOINT_<NAME>`` (upper case, hyphens as
  underscores), so a client that bootstraps through it learns only that endpoint's
  addresses;
- with the security protocol of its mode (one of the cluster's: scram → SASL_SSL, tls → SSL
  with client certificates required, none → PLAINTEXT) and, when given, the principals it
  admits (``listener.allowed.principals``: any other is refused once it has authenticated).

Creating or deleting one is an operation (``UPDATE_CONNECTIVITY``) recorded in the same
transaction as the endpoint's row (state CREATING, or DELETING) and a config-version bump: the
reconciler restarts the brokers one at a time (an endpoint never touches the inter-broker
listener), each with the endpoints that are not DELETING (``cluster_security.broker_settings``
via :func:`listeners_for`), and once every broker runs a config version at least the
endpoint's, :func:`settle` makes a CREATING endpoint ACTIVE and forgets a DELETING one (its
ports go with it). New brokers (scale-out) get a port of every endpoint before they start
(:func:`ensure_ports`); a broker removed by a scale-in takes its ports with it.

Metering (``usage_history.py``): an endpoint is billed (``endpoint_ms``) from the
transaction that records its creation until the one that forgets it (or its cluster's end).
"""

from __future__ import annotations

import enum
import ipaddress
import logging
import re
import socket
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from controlplane import errors, usage_history
from controlplane.cluster_security import LISTENERS, EndpointListener
from controlplane.config import Settings
from controlplane.process import free_port, port_free
from controlplane.states import ClientAuth, ClusterState, OperationType
from controlplane.store import BrokerRecord, ClusterRecord, Store
from proto.sluice.v1 import endpoints_pb2 as pb

log = logging.getLogger("sluice.controlplane.endpoints")

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")
"""1-32 ASCII letters, digits and hyphens, starting with a letter (a Kafka listener name is
made of it)."""
LISTENER_PREFIX = "ENDPOINT_"
PRINCIPAL = re.compile(r"^User:[^;|\s](?:[^;|]*[^;|\s])?$")
"""``User:NAME``; ``;`` and ``|`` separate listeners and principals in the broker setting."""
PROC_NET_TCP = Path("/proc/net/tcp")


class EndpointState(enum.StrEnum):
    CREATING = "CREATING"
    """Recorded; the brokers restart with its listener."""
    ACTIVE = "ACTIVE"
    DELETING = "DELETING"
    """The brokers restart without its listener; then the row goes."""

    def to_proto(self) -> pb.PrivateEndpointState:
        return STATES[self]


STATES: dict[EndpointState, pb.PrivateEndpointState] = {
    EndpointState.CREATING: pb.PRIVATE_ENDPOINT_STATE_CREATING,
    EndpointState.ACTIVE: pb.PRIVATE_ENDPOINT_STATE_ACTIVE,
    EndpointState.DELETING: pb.PRIVATE_ENDPOINT_STATE_DELETING,
}


def listener_name(name: str) -> str:
    """The Kafka listener name of endpoint ``name``: ``ENDPOINT_`` + upper case, hyphens as
    underscores (two names that differ only in case are the same listener)."""
    return LISTENER_PREFIX + name.upper().replace("-", "_")


@dataclass(frozen=True)
class EndpointRecord:
    """One private endpoint, as recorded (``endpoints`` and ``endpoint_ports``)."""

    cluster: str
    name: str
    address: str
    """Its loopback address (every broker's listener of the endpoint binds to it)."""
    client_auth: ClientAuth
    state: EndpointState
    allowed: tuple[str, ...] = ()
    """Principals it admits; empty: every one."""
    config_version: int = 0
    """The cluster config version from which brokers run with (CREATING) or without
    (DELETING) its listener."""
    created_at: float = 0.0
    ports: dict[int, int] = field(default_factory=dict)
    """Broker id -> the port of its listener there."""

    @property
    def listener(self) -> str:
        return listener_name(self.name)

    @property
    def protocol(self) -> str:
        return LISTENERS[self.client_auth].protocol

    def addresses(self) -> list[str]:
        """``address:port`` of its listener on every broker, by broker id."""
        return [f"{self.address}:{port}" for _, port in sorted(self.ports.items())]

    def bootstrap(self) -> str:
        return ",".join(self.addresses())


# ---------------------------------------------------------------------- the table


def load(store: Store, cluster: str, name: str | None = None) -> list[EndpointRecord]:
    """The endpoints of ``cluster`` (the one named ``name``), by name, with their ports."""
    rows = store.db.execute(
        "SELECT * FROM endpoints WHERE cluster = ? AND (? IS NULL OR name = ?) ORDER BY name",
        (cluster, name, name),
    ).fetchall()
    ports: dict[str, dict[int, int]] = {}
    for row in store.db.execute(
        "SELECT endpoint, broker_id, port FROM endpoint_ports WHERE cluster = ?"
        " AND (? IS NULL OR endpoint = ?)",
        (cluster, name, name),
    ):
        ports.setdefault(row["endpoint"], {})[row["broker_id"]] = row["port"]
    return [
        EndpointRecord(
            cluster=row["cluster"],
            name=row["name"],
            address=row["address"],
            client_auth=ClientAuth(row["client_auth"]),
            state=EndpointState(row["state"]),
            allowed=tuple(p for p in row["allowed"].split("|") if p),
            config_version=row["config_version"],
            created_at=row["created_at"],
            ports=ports.get(row["name"], {}),
        )
        for row in rows
    ]


def _insert(db: sqlite3.Connection, record: EndpointRecord) -> None:
    db.execute(
        "INSERT INTO endpoints (cluster, name, address, client_auth, allowed, state,"
        " config_version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.cluster,
            record.name,
            record.address,
            record.client_auth.value,
            "|".join(record.allowed),
            record.state.value,
            record.config_version,
            record.created_at,
        ),
    )
    db.executemany(
        "INSERT INTO endpoint_ports (cluster, endpoint, broker_id, port) VALUES (?, ?, ?, ?)",
        [(record.cluster, record.name, b, port) for b, port in record.ports.items()],
    )


def listeners_for(store: Store, cluster: str, broker_id: int) -> list[EndpointListener]:
    """The endpoint listeners broker ``broker_id`` starts with: every endpoint not DELETING
    that has a port there."""
    return [
        EndpointListener(e.listener, e.client_auth, e.address, e.ports[broker_id], e.allowed)
        for e in load(store, cluster)
        if e.state is not EndpointState.DELETING and broker_id in e.ports
    ]


def ensure_ports(store: Store, cluster: str, avoid: set[int]) -> None:
    """A port of every endpoint (not DELETING) for each broker that lacks one (brokers added
    by a scale-out), reserved before the broker starts."""
    brokers = store.brokers(cluster)
    missing = [
        (e, b.broker_id)
        for e in load(store, cluster)
        if e.state is not EndpointState.DELETING
        for b in brokers
        if b.broker_id not in e.ports
    ]
    if not missing:
        return
    used = store.used_ports() | avoid
    for endpoint, broker_id in missing:
        port = free_port(endpoint.address, used)
        used.add(port)
        store.db.execute(
            "INSERT INTO endpoint_ports (cluster, endpoint, broker_id, port) VALUES (?, ?, ?, ?)",
            (cluster, endpoint.name, broker_id, port),
        )
        log.info(
            "cluster %s: broker %d gets port %d of private endpoint %s",
            cluster,
            broker_id,
            port,
            endpoint.name,
        )


def move_taken_ports(store: Store, broker: BrokerRecord, avoid: set[int]) -> None:
    """Move the endpoint ports of ``broker`` (down: it failed to start) that someone else
    took meanwhile."""
    used = store.used_ports() | avoid
    for endpoint in load(store, broker.cluster):
        port = endpoint.ports.get(broker.broker_id)
        if port is None or port_free(endpoint.address, port):
            continue
        moved = free_port(endpoint.address, used)
        used.add(moved)
        store.db.execute(
            "UPDATE endpoint_ports SET port = ? WHERE cluster = ? AND endpoint = ?"
            " AND broker_id = ?",
            (moved, broker.cluster, endpoint.name, broker.broker_id),
        )
        log.warning(
            "cluster %s: port %d of private endpoint %s on broker %d is taken; moving it to %d",
            broker.cluster,
            port,
            endpoint.name,
            broker.broker_id,
            moved,
        )


def settle(store: Store, cluster: str) -> None:
    """Once every broker runs a config version at least an endpoint's: CREATING → ACTIVE, a
    DELETING one forgotten (with its ports). Called when every broker answers."""
    brokers = store.brokers(cluster)
    if not brokers:
        return
    running = min(b.config_version for b in brokers)
    for endpoint in load(store, cluster):
        if endpoint.state is EndpointState.ACTIVE or endpoint.config_version > running:
            continue
        with store.transaction() as db:
            if endpoint.state is EndpointState.DELETING:
                db.execute(
                    "DELETE FROM endpoints WHERE cluster = ? AND name = ?", (cluster, endpoint.name)
                )
                usage_history.record_endpoint(db, cluster, endpoint.name, active=False)
            else:
                db.execute(
                    "UPDATE endpoints SET state = ? WHERE cluster = ? AND name = ?",
                    (EndpointState.ACTIVE.value, cluster, endpoint.name),
                )
        done = "deleted" if endpoint.state is EndpointState.DELETING else "active"
        log.info("cluster %s: private endpoint %s %s", cluster, endpoint.name, done)


# ---------------------------------------------------------------------- addresses


def used_addresses(path: Path = PROC_NET_TCP) -> set[str]:
    """IPv4 addresses that sockets of this machine are bound to (``/proc/net/tcp``; empty
    where it cannot be read)."""
    try:
        lines = path.read_text().splitlines()[1:]
    except OSError:
        return set()
    found = set()
    for line in lines:
        local = line.split()[1].partition(":")[0]
        try:
            found.add(socket.inet_ntoa(bytes.fromhex(local)[::-1]))
        except (ValueError, OSError):
            continue
    return found


def choose_address(network: str, taken: set[str], cluster: str) -> str:
    """The first host address of ``network`` (a loopback network) not in ``taken`` nor used
    by a socket of the machine (x.x.x.0 and x.x.x.255 left out), checked to bind."""
    try:
        net: ipaddress.IPv4Network | None = ipaddress.IPv4Network(network, strict=False)
    except ValueError:
        net = None
    if net is None or not net.subnet_of(ipaddress.IPv4Network("127.0.0.0/8")):
        raise errors.PreconditionFailed(
            f"private.endpoint.network {network!r} is not a network in 127.0.0.0/8: set the "
            "control plane's private.endpoint.network to one (e.g. 127.0.16.0/20)",
            cluster=cluster,
        )
    busy = taken | used_addresses()
    for host in net.hosts():
        text = str(host)
        if text in busy or text.endswith((".0", ".255")):
            continue
        try:
            with socket.socket() as sock:
                sock.bind((text, 0))
        except OSError as exc:
            raise errors.PreconditionFailed(
                f"cannot bind to {text} on this machine ({exc}): private endpoints need "
                "loopback addresses besides 127.0.0.1; set private.endpoint.network to a "
                "network the loopback interface serves",
                cluster=cluster,
            ) from None
        return text
    raise errors.PreconditionFailed(
        f"no free address left in private.endpoint.network {network}: delete unused private "
        "endpoints or give the control plane a larger network",
        cluster=cluster,
    )


# ---------------------------------------------------------------------- frontend


class Backend(Protocol):
    """What endpoints use of the reconcilers' manager (``reconciler.ClusterManager``)."""

    def notify(self, name: str, *, interrupt: bool = False) -> None: ...

    def reserved_ports(self) -> set[int]: ...


def check_principals(
    given: Sequence[str], mode: ClientAuth, cluster: str, name: str
) -> tuple[str, ...]:
    """The principals an endpoint admits, each once, in the order given."""
    principals = tuple(dict.fromkeys(p.strip() for p in given))
    about: dict[str, str | int] = {"cluster": cluster, "private_endpoint": name}
    for principal in principals:
        if not PRINCIPAL.match(principal):
            raise errors.BadRequest(
                f"{principal!r} is not a principal: give User:NAME (a SCRAM user) or "
                "User:<certificate subject> (e.g. User:CN=app), without ';' or '|'",
                **about,
            )
    if principals and mode is ClientAuth.NONE:
        raise errors.BadRequest(
            f"private endpoint {name!r} is a none (PLAINTEXT) endpoint: its clients are all "
            "User:ANONYMOUS, so it cannot admit only some principals; give --auth scram or tls",
            **about,
        )
    return principals


class EndpointOps:
    def __init__(self, store_: Store, backend: Backend, settings: Settings) -> None:
        self.store = store_
        self.backend = backend
        self.settings = settings

    def cluster(self, name: str) -> ClusterRecord:
        return errors.existing_cluster(self.store, name)

    def list_endpoints(self, cluster: str) -> list[EndpointRecord]:
        self.cluster(cluster)
        return load(self.store, cluster)

    def get(self, cluster: str, name: str) -> EndpointRecord:
        self.cluster(cluster)
        found = load(self.store, cluster, name)
        if not found:
            raise errors.EndpointNotFound(
                f"cluster {cluster!r} has no private endpoint {name!r}",
                cluster=cluster,
                private_endpoint=name,
            )
        return found[0]

    def active(self, cluster: str, name: str) -> EndpointRecord:
        """An endpoint whose listeners run on every broker (its bootstrap string works)."""
        endpoint = self.get(cluster, name)
        if endpoint.state is not EndpointState.ACTIVE:
            raise errors.PreconditionFailed(
                f"private endpoint {name!r} of cluster {cluster!r} is {endpoint.state}: "
                + (
                    "its listeners start as the brokers restart; wait for it "
                    f"(`cloudctl describe-private-endpoint --cluster {cluster} {name}`)"
                    if endpoint.state is EndpointState.CREATING
                    else "its listeners are being closed"
                ),
                cluster=cluster,
                private_endpoint=name,
            )
        return endpoint

    def _check_idle(self, cluster: ClusterRecord, what: str) -> None:
        if cluster.state not in (ClusterState.ACTIVE, ClusterState.FAILED) or cluster.busy:
            doing = f" ({cluster.operation})" if cluster.operation else ""
            raise errors.OperationInProgress(
                f"cannot {what}: cluster {cluster.name!r} is {cluster.state}{doing}; "
                "retry when it is ACTIVE",
                cluster=cluster.name,
            )

    def create(
        self,
        cluster_name: str,
        name: str,
        mode: ClientAuth | None = None,
        allowed: Sequence[str] = (),
    ) -> EndpointRecord:
        cluster = self.cluster(cluster_name)
        about: dict[str, str | int] = {"cluster": cluster_name, "private_endpoint": name}
        if not NAME.match(name):
            raise errors.InvalidName(
                f"invalid private endpoint name {name!r}: use 1-32 ASCII letters, digits and "
                "hyphens, starting with a letter",
                **about,
            )
        mode = cluster.client_auth[0] if mode is None else mode
        if mode not in cluster.client_auth:
            have = ", ".join(m.option for m in cluster.client_auth)
            wanted = " ".join(f"--client-auth {m.option}" for m in (*cluster.client_auth, mode))
            raise errors.PreconditionFailed(
                f"cluster {cluster_name!r} has no {mode.option} listener (its client auth: "
                f"{have}), so it cannot have a {mode.option} private endpoint; add the mode "
                f"first: `cloudctl update-cluster-security {cluster_name} {wanted}`",
                **about,
            )
        principals = check_principals(allowed, mode, cluster_name, name)
        existing = load(self.store, cluster_name)
        same = [e for e in existing if e.listener == listener_name(name)]
        if same:
            deleting = (
                " (being deleted: retry once that ends)"
                if same[0].state is (EndpointState.DELETING)
                else ""
            )
            raise errors.EndpointAlreadyExists(
                f"cluster {cluster_name!r} has a private endpoint {same[0].name!r} already"
                f"{deleting}",
                **about,
            )
        limit = self.settings.cluster_max_private_endpoints
        if len(existing) >= limit:
            raise errors.PreconditionFailed(
                f"cluster {cluster_name!r} has {len(existing)} private endpoints, the most "
                f"it may have (cluster.max.private.endpoints = {limit}); delete one first",
                **about,
            )
        self._check_idle(cluster, f"create private endpoint {name!r}")
        taken = {row[0] for row in self.store.db.execute("SELECT address FROM endpoints")}
        address = choose_address(self.settings.private_endpoint_network, taken, cluster_name)
        used = self.store.used_ports() | self.backend.reserved_ports()
        ports = {}
        for broker in self.store.brokers(cluster_name):
            ports[broker.broker_id] = free_port(address, used)
            used.add(ports[broker.broker_id])
        version = cluster.config_version + 1
        record = EndpointRecord(
            cluster=cluster_name,
            name=name,
            address=address,
            client_auth=mode,
            state=EndpointState.CREATING,
            allowed=principals,
            config_version=version,
            created_at=time.time(),
            ports=ports,
        )
        detail = f"create private endpoint {name} ({mode.option} at {address}"
        detail += f", allow {', '.join(principals)})" if principals else ")"

        def add(db: sqlite3.Connection) -> None:
            _insert(db, record)
            usage_history.record_endpoint(db, cluster_name, name, active=True)  # billed from now

        self.store.start_operation(
            cluster_name,
            OperationType.UPDATE_CONNECTIVITY,
            detail,
            also=add,
            config_version=version,
            state=ClusterState.UPDATING,
            state_message="rolling restart: starting",
        )
        log.info("cluster %s: %s", cluster_name, detail)
        self.backend.notify(cluster_name)
        return self.get(cluster_name, name)

    def delete(self, cluster_name: str, name: str) -> EndpointRecord:
        """Mark the endpoint DELETING and roll the brokers without its listener (an endpoint
        already DELETING is returned as it is)."""
        cluster = self.cluster(cluster_name)
        endpoint = self.get(cluster_name, name)
        if endpoint.state is EndpointState.DELETING:
            return endpoint
        self._check_idle(cluster, f"delete private endpoint {name!r}")
        version = cluster.config_version + 1

        def mark(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE endpoints SET state = ?, config_version = ? WHERE cluster = ? AND name = ?",
                (EndpointState.DELETING.value, version, cluster_name, name),
            )

        detail = f"delete private endpoint {name} ({endpoint.client_auth.option} at "
        detail += f"{endpoint.address})"
        self.store.start_operation(
            cluster_name,
            OperationType.UPDATE_CONNECTIVITY,
            detail,
            also=mark,
            config_version=version,
            state=ClusterState.UPDATING,
            state_message="rolling restart: starting",
        )
        log.info("cluster %s: %s", cluster_name, detail)
        self.backend.notify(cluster_name)
        return self.get(cluster_name, name)
