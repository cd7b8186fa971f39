"""A Sluice cluster by name: its bootstrap servers and object store, asked of the control
plane (``Clusters.GetCluster`` of the public gRPC API, ``proto/sluice/v1/clusters.proto``).

    .option("sluice.cluster", "orders")                       # instead of kafka.bootstrap.servers
    .option("sluice.controlplane.endpoint", "127.0.0.1:50051")  # default: $SLUICE_ENDPOINT, or
                                                                # the one `cloudctl up` recorded
    .option("sluice.controlplane.token", "...")               # default: $SLUICE_TOKEN, or
                                                                # $SLUICE_HOME/token

Options given explicitly win: ``kafka.bootstrap.servers`` (e.g. a private endpoint's
address) and any ``sluice.s3.*``. The lookup runs once, where Spark plans the query (the
driver's planning worker); executors get the resolved values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spark.options import S3_PREFIX, OptionError

CLUSTER = "sluice.cluster"
ENDPOINT = "sluice.controlplane.endpoint"
TOKEN = "sluice.controlplane.token"  # noqa: S105 - an option name
TIMEOUT = "sluice.controlplane.timeout.ms"
DEFAULT_HOME = "~/.sluice"
"""``cloudctl``'s state directory when ``SLUICE_HOME`` is not set."""


def _home() -> Path:
    return Path(os.environ.get("SLUICE_HOME") or DEFAULT_HOME).expanduser()


def _recorded(name: str) -> str | None:
    try:
        return (_home() / name).read_text().strip() or None
    except OSError:
        return None


def with_cluster(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` (lowercased keys) with the bootstrap servers and ``sluice.s3.*`` of the
    cluster named by ``sluice.cluster`` filled in; unchanged without that option."""
    out = dict(options)
    name = out.get(CLUSTER)
    if not name:
        return out
    endpoint = out.get(ENDPOINT) or os.environ.get("SLUICE_ENDPOINT") or _recorded("endpoint")
    if not endpoint:
        raise OptionError(
            f"{CLUSTER}={name!r}: no control plane endpoint (set {ENDPOINT} or SLUICE_ENDPOINT, "
            f"or start it with `cloudctl up`; SLUICE_HOME={_home()})"
        )
    token = out.get(TOKEN) or os.environ.get("SLUICE_TOKEN") or _recorded("token")
    if not token:
        raise OptionError(
            f"{CLUSTER}={name!r}: no API token (set {TOKEN} or SLUICE_TOKEN, or SLUICE_HOME to "
            f"the directory `cloudctl up` used; looked in {_home() / 'token'})"
        )
    timeout = int(out.get(TIMEOUT) or 10_000) / 1000
    cluster = _get_cluster(endpoint, token, name, timeout)
    if not out.get("kafka.bootstrap.servers"):
        if not cluster.bootstrap_brokers:
            raise OptionError(f"cluster {name!r} has no brokers yet (state {cluster.state})")
        out["kafka.bootstrap.servers"] = cluster.bootstrap_brokers
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


def _get_cluster(endpoint: str, token: str, name: str, timeout: float) -> Any:
    import grpc

    from proto.sluice.v1 import clusters_pb2, clusters_pb2_grpc

    with grpc.insecure_channel(endpoint) as channel:
        stub = clusters_pb2_grpc.ClustersStub(channel)
        try:
            return stub.GetCluster(
                clusters_pb2.GetClusterRequest(name=name),
                metadata=(("authorization", f"Bearer {token}"),),
                timeout=timeout,
            )
        except grpc.RpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.NOT_FOUND:
                raise OptionError(
                    f"{CLUSTER}: no cluster {name!r} at the control plane {endpoint} "
                    "(`cloudctl list-clusters` lists them)"
                ) from None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise OptionError(
                    f"{CLUSTER}: cannot reach the control plane at {endpoint} ({exc.details()}); "
                    f"is it running (`cloudctl status`)? {ENDPOINT} sets another address"
                ) from None
            if code == grpc.StatusCode.UNAUTHENTICATED:
                raise OptionError(
                    f"{CLUSTER}: the control plane at {endpoint} refused the API token "
                    f"({TOKEN}, SLUICE_TOKEN or SLUICE_HOME/token)"
                ) from None
            raise OptionError(
                f"{CLUSTER}: GetCluster({name!r}): {code.name}: {exc.details()}"
            ) from None
