"""A Sluice cluster by name: its bootstrap servers and object store, asked of the control
plane (``Clusters.GetCluster`` of the public gRPC API, ``proto/sluice/v1/clusters.proto``).

    .option("sluice.cluster", "orders")                       # instead of kafka.bootstrap.servers
    .option("sluice.controlplane.endpoint", "127.0.0.1:50051")  # default: $SLUICE_ENDPOINT, or
                                                                # the one `cloudctl up` recorded
    .option("sluice.controlplane.token", "...")               # default: $SLUICE_TOKEN, or
                                                                # $SLUICE_HOME/token
    .option("sluice.endpoint", "analytics")                   # a private endpoint's listener

The bootstrap servers are those of the listener the read goes through: the private endpoint
``sluice.endpoint`` names, else the listener of the cluster's mode that
``kafka.security.protocol`` asks for (SASL_SSL / SASL_PLAINTEXT: scram, SSL: tls,
PLAINTEXT: none), else the cluster's first (``Clusters.GetBootstrapBrokers``).

Options given explicitly win: ``kafka.bootstrap.servers`` (e.g. a private endpoint's
address) and any ``sluice.s3.*``. For the embedded S3 server, GetCluster hands out the
cluster's read-only key, scoped to its bucket (the embedded server refuses anything else).
The lookup runs once, where Spark plans the query (the driver's planning worker); executors
get the resolved values. Finding the control plane and
talking to it is the shared client's (``sluice_client/client.py``, as `cloudctl`); here its
errors become :class:`OptionError` messages, by their reason.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc

from proto.sluice.v1 import clusters_pb2
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import LISTENER_OF, ApiError, Client, Env, cluster_state_name
from spark.keys import (
    BOOTSTRAP,
    CLUSTER,
    ENDPOINT,
    PRIVATE_ENDPOINT,
    S3_PREFIX,
    SECURITY_PROTOCOL,
    TIMEOUT,
    TOKEN,
    OptionError,
)

DEFAULT_TIMEOUT_MS = 10_000


def with_cluster(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` (lowercased keys) with the bootstrap servers and ``sluice.s3.*`` of the
    cluster named by ``sluice.cluster`` filled in; unchanged without that option."""
    out = dict(options)
    name = out.get(CLUSTER)
    if not name:
        return out
    env = Env.from_environ(endpoint=out.get(ENDPOINT), token=out.get(TOKEN))
    endpoint = env.endpoint()
    if not endpoint:
        raise OptionError(
            f"{CLUSTER}={name!r}: no control plane endpoint (set {ENDPOINT} or SLUICE_ENDPOINT, "
            f"or start it with `cloudctl up`; SLUICE_HOME={env.home})"
        )
    token = env.token()
    if not token:
        raise OptionError(
            f"{CLUSTER}={name!r}: no API token (set {TOKEN} or SLUICE_TOKEN, or SLUICE_HOME to "
            f"the directory `cloudctl up` used; looked in {env.token_path})"
        )
    timeout = int(out.get(TIMEOUT) or DEFAULT_TIMEOUT_MS) / 1000
    cluster = _get_cluster(endpoint, token, name, timeout)
    if not out.get(BOOTSTRAP):
        if not cluster.bootstrap_brokers:
            state = cluster_state_name(cluster.state)
            raise OptionError(f"cluster {name!r} has no brokers yet (state {state})")
        out[BOOTSTRAP] = _bootstrap(endpoint, token, name, out, timeout)
    given_s3 = any(k.startswith(S3_PREFIX) for k in out)
    if cluster.HasField("object_store") and not given_s3:
        store = cluster.object_store
        out[S3_PREFIX + "bucket"] = store.bucket
        out[S3_PREFIX + "region"] = store.region
        if store.endpoint:
            out[S3_PREFIX + "endpoint"] = store.endpoint
        if store.access_key_id:
            out[S3_PREFIX + "access.key.id"] = store.access_key_id
            out[S3_PREFIX + "secret.access.key"] = store.secret_access_key
    return out


def _bootstrap(
    endpoint: str, token: str, name: str, options: Mapping[str, str], timeout: float
) -> str:
    """The bootstrap string of the listener the read goes through (see the module doc)."""
    protocol = (options.get(SECURITY_PROTOCOL) or "").upper()
    if protocol and protocol not in LISTENER_OF:
        raise OptionError(
            f"{SECURITY_PROTOCOL}={protocol!r}: expected one of {', '.join(LISTENER_OF)}"
        )
    private = options.get(PRIVATE_ENDPOINT) or ""
    request = clusters_pb2.GetBootstrapBrokersRequest(
        name=name,
        client_auth=LISTENER_OF[protocol]
        if protocol and not private
        else clusters_pb2.CLIENT_AUTH_UNSPECIFIED,
        endpoint=private,
    )
    try:
        with Client(endpoint, token) as client:
            reply = client.call(client.clusters.GetBootstrapBrokers, request, timeout)
    except ApiError as exc:
        raise _explain(exc, name) from None
    return str(reply.bootstrap_brokers)


def _get_cluster(endpoint: str, token: str, name: str, timeout: float) -> clusters_pb2.Cluster:
    request = clusters_pb2.GetClusterRequest(name=name)
    try:
        with Client(endpoint, token) as client:
            found: clusters_pb2.Cluster = client.call(client.clusters.GetCluster, request, timeout)
    except ApiError as exc:
        raise _explain(exc, name) from None
    return found


def _explain(exc: ApiError, name: str) -> OptionError:
    """The OptionError of a failed GetCluster, by the error's reason."""
    endpoint = exc.endpoint
    if exc.reason == epb.CLUSTER_NOT_FOUND:
        return OptionError(
            f"{CLUSTER}: no cluster {name!r} at the control plane {endpoint} "
            "(`cloudctl list-clusters` lists them)"
        )
    if exc.reason == epb.CONTROL_PLANE_UNAVAILABLE or exc.code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return OptionError(
            f"{CLUSTER}: cannot reach the control plane at {endpoint} ({exc.message}); "
            f"is it running (`cloudctl status`)? {ENDPOINT} sets another address"
        )
    if exc.reason == epb.ENDPOINT_NOT_FOUND:
        return OptionError(
            f"{PRIVATE_ENDPOINT}: cluster {name!r} has no such private endpoint "
            f"(`cloudctl list-private-endpoints --cluster {name}` lists them)"
        )
    if exc.reason == epb.TOKEN_INVALID:
        return OptionError(
            f"{CLUSTER}: the control plane at {endpoint} refused the API token "
            f"({TOKEN}, SLUICE_TOKEN or SLUICE_HOME/token)"
        )
    return OptionError(f"{CLUSTER}: GetCluster({name!r}): {exc.code.name}: {exc.message}")
