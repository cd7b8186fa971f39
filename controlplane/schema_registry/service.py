"""The schema registry service of the control plane: one HTTP server
(``schema.registry.listen``) serving a registry per cluster at ``/clusters/NAME``, the base URL
Confluent's clients are given (they join it and their paths). The cluster is looked up at every
request (a cluster deleted and made again under its name gets a registry of its own: they are
kept by cluster id); CREATING and DELETING clusters answer 503.

Authentication: a cluster with a secured mode (SCRAM or TLS) wants HTTP basic auth with one of
its SCRAM users, as Redpanda's registry does. The password is checked by logging in to one of
the cluster's brokers with it (SCRAM-SHA-512 on the internal listener): the brokers hold the
credentials, the control plane never stores them. A login that worked is remembered for
``schema.registry.auth.cache.ms`` (a keyed hash of the password, never the password itself);
a user deleted or a password changed is refused once that has passed. Passwords and the
Authorization header are never logged.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable

from controlplane.config import Settings
from controlplane.kafka import KafkaConnection
from controlplane.schema_registry import errors
from controlplane.schema_registry.http import HttpServer, Limits, Request, Response
from controlplane.schema_registry.registry import Registry
from controlplane.schema_registry.routes import route
from controlplane.schema_registry.storage import SchemasTopic
from controlplane.states import ClientAuth, ClusterState
from controlplane.store import ClusterRecord, Store
from wire.client import ConnectFailed
from wire.sasl import Mechanism, SaslCredentials, SaslFailed

log = logging.getLogger("sluice.controlplane.schema_registry")

PORT_SETTING = "schema_registry_port"
"""The port bound last time (``state.db``'s settings): a registry on port 0 takes it again when
it is free, so base URLs survive a control-plane restart."""
BIND_ATTEMPTS = 5
NOT_SERVING = (ClusterState.CREATING, ClusterState.DELETING)
SECURED = (ClientAuth.SCRAM, ClientAuth.TLS)


def split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise OSError(f"schema.registry.listen {listen!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


class SchemaRegistryService:
    def __init__(
        self, store: Store, settings: Settings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.server = HttpServer(
            self.handle,
            Limits(
                max_header_bytes=settings.schema_registry_max_header_bytes,
                max_request_bytes=settings.schema_registry_max_request_bytes,
                max_connections=settings.schema_registry_max_connections,
                idle_timeout=settings.schema_registry_idle_timeout_ms / 1000,
            ),
        )
        self.base_url = ""
        self.registries: dict[str, Registry] = {}
        self._secret = secrets.token_bytes(32)
        self._logins: dict[tuple[str, str, bytes], float] = {}

    @property
    def timeout(self) -> float:
        return self.settings.kafka_request_timeout_ms / 1000

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        host, port = split_listen(self.settings.schema_registry_listen)
        remembered = int(self.store.get_setting(PORT_SETTING, "0") or 0) if port == 0 else 0
        candidates = ([remembered] if remembered else []) + [port] * BIND_ATTEMPTS
        bound = 0
        last: OSError | None = None
        for candidate in candidates:
            try:
                bound = await self.server.start(host, candidate)
            except OSError as exc:
                last = exc
                if port != 0:
                    break
                continue
            if candidate == 0 and bound in self.store.used_ports():
                await self.server.stop()  # a broker's reserved port: take another one
                bound = 0
                continue
            break
        if not bound:
            raise OSError(
                f"the schema registry cannot listen on {self.settings.schema_registry_listen} "
                f"(schema.registry.listen): {last or 'no free port'}"
            )
        if port == 0:
            self.store.set_setting(PORT_SETTING, str(bound))
        shown = self.settings.broker_host if host in ("0.0.0.0", "::") else host
        if ":" in shown:
            shown = f"[{shown}]"
        self.base_url = f"http://{shown}:{bound}"
        log.info("schema registry serving on %s/clusters/NAME", self.base_url)

    async def stop(self) -> None:
        await self.server.stop()

    def url(self, cluster: ClusterRecord) -> str:
        """The base URL of ``cluster``'s registry (empty before the server runs)."""
        return f"{self.base_url}/clusters/{cluster.name}" if self.base_url else ""

    # ------------------------------------------------------------------ requests

    async def handle(self, request: Request) -> Response:
        segments = request.segments
        if len(segments) < 2 or segments[0] != "clusters":
            raise errors.not_found(
                "/" + "/".join(segments) + ": registries are at /clusters/NAME "
                "(cloudctl get-schema-registry-url NAME)"
            )
        cluster = self.store.get_cluster(segments[1])
        if cluster is None:
            raise errors.RegistryError(
                404, 404, f"cluster '{segments[1]}' not found (cloudctl list-clusters)"
            )
        if cluster.state in NOT_SERVING:
            raise errors.unavailable(
                f"cluster '{cluster.name}' is {cluster.state.value}: its registry serves once "
                f"it is ACTIVE (cloudctl describe-cluster {cluster.name})"
            )
        if any(mode in SECURED for mode in cluster.client_auth):
            await self._authenticate(cluster, request)
        registry = self._registry(cluster)
        await registry.ensure_loaded()
        return await route(registry, request, segments[2:])

    def _registry(self, cluster: ClusterRecord) -> Registry:
        registry = self.registries.get(cluster.cluster_id)
        if registry is None:
            live = {c.cluster_id for c in self.store.list_clusters()}
            for stale in set(self.registries) - live:
                del self.registries[stale]
            name = cluster.name
            topic = SchemasTopic(name, lambda: self.store.brokers(name), self.timeout)
            protoc = self.settings.schema_registry_protoc_timeout_ms / 1000
            registry = self.registries[cluster.cluster_id] = Registry(name, topic, protoc)
        return registry

    # ------------------------------------------------------------------ authentication

    async def _authenticate(self, cluster: ClusterRecord, request: Request) -> None:
        hint = (
            f"the registry of cluster '{cluster.name}' wants HTTP basic auth with a SCRAM user "
            "of the cluster (cloudctl create-user)"
        )
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic" or not token.strip():
            raise errors.unauthorized(f"Unauthorized: {hint}")
        try:
            decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise errors.unauthorized(
                f"Unauthorized: malformed basic credentials; {hint}"
            ) from None
        user, sep, password = decoded.partition(":")
        if not sep or not user:
            raise errors.unauthorized(f"Unauthorized: {hint}")
        now = self.clock()
        key = (cluster.cluster_id, user, hmac.digest(self._secret, password.encode(), "sha256"))
        if self._logins.get(key, 0.0) > now:
            return
        if not await self._login(cluster, user, password):
            log.warning("cluster %s: schema registry refused user %r", cluster.name, user)
            raise errors.unauthorized(f"Unauthorized: wrong user name or password; {hint}")
        self._logins = {k: t for k, t in self._logins.items() if t > now}
        self._logins[key] = now + self.settings.schema_registry_auth_cache_ms / 1000

    async def _login(self, cluster: ClusterRecord, user: str, password: str) -> bool:
        """True when a broker of ``cluster`` accepts the credentials (SCRAM-SHA-512)."""
        credentials = SaslCredentials(user, password, Mechanism.SCRAM_SHA_512)
        last: BaseException | None = None
        for broker in self.store.brokers(cluster.name):
            try:
                connection = await KafkaConnection.open(
                    broker.host, broker.port, self.timeout, credentials
                )
            except SaslFailed:
                return False
            except (ConnectFailed, OSError, TimeoutError) as exc:
                last = exc
                continue
            with contextlib.suppress(Exception):
                await connection.close()
            return True
        raise errors.unavailable(
            f"no broker of cluster '{cluster.name}' answered to check the credentials "
            f"({last or 'no brokers'}); retry"
        )
