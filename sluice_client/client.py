"""The control plane's client side, shared by ``cloudctl`` (cli/) and the Spark data source
(spark/): where the control plane is, how to authenticate, and what a failed call means.

    SLUICE_HOME      state directory (default ~/.sluice): token, endpoint file, logs
    SLUICE_ENDPOINT  control-plane address HOST:PORT (default: the one `cloudctl up` recorded
                     in $SLUICE_HOME/endpoint)
    SLUICE_TOKEN     API token (default: $SLUICE_HOME/token)

Values given explicitly (``cloudctl --home``, Spark's ``sluice.controlplane.*`` options) win
over the environment, which wins over the files. A failed call raises :class:`ApiError`:
its gRPC code, its reason (the ``google.rpc.ErrorInfo`` the control plane attaches,
``proto/sluice/v1/errors.proto``) and its message. Callers decide by the reason and show
the message.

This module is public API: it imports the standard library, grpcio, grpcio-status,
googleapis-common-protos and the generated stubs in ``proto/`` only, never the server side of
``controlplane/`` (clients use public APIs; tests/controlplane/test_client.py checks it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from proto.sluice.v1 import (
    clusters_pb2,
    clusters_pb2_grpc,
    controlplane_pb2_grpc,
    groups_pb2_grpc,
    logs_pb2_grpc,
    operations_pb2_grpc,
    topics_pb2_grpc,
    transforms_pb2_grpc,
)
from proto.sluice.v1 import errors_pb2 as epb

LISTENER_OF = {
    "PLAINTEXT": clusters_pb2.CLIENT_AUTH_NONE,
    "SASL_SSL": clusters_pb2.CLIENT_AUTH_SCRAM,
    "SASL_PLAINTEXT": clusters_pb2.CLIENT_AUTH_SCRAM,
    "SSL": clusters_pb2.CLIENT_AUTH_TLS,
}
"""The cluster listener (client-auth mode) a Kafka client's ``security.protocol`` goes to."""

DEFAULT_HOME = "~/.sluice"
ENDPOINT_FILE = "endpoint"
TOKEN_FILE = "token"  # noqa: S105 - a file name, not a secret
PID_FILE = "controlplane.pid"
DEFAULT_TIMEOUT = 30.0
TOKEN_VARIABLE = "SLUICE_TOKEN"  # noqa: S105 - the variable's name, not a secret
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Largest request of the API: the client's send limit and the server's receive limit
(gRPC's default receive limit is 4 MiB). DeployTransform carries a WebAssembly module, up to
the brokers' ``transforms.module.max.bytes`` (10 MiB by default; Redpanda's too): with room
above it, a module the brokers find too large reaches them and gets their INVALID_TRANSFORM,
which names the setting, rather than gRPC's RESOURCE_EXHAUSTED. A cluster that raises the
setting above this (it goes up to 512 MiB) deploys such modules with Kafka tools, not
through the API."""
ERROR_DOMAIN = "sluice.dev"
"""``ErrorInfo.domain`` of the control plane's errors (the server sets it from here)."""


def home_dir(override: str | None = None) -> Path:
    """The state directory: ``override``, else ``$SLUICE_HOME``, else ``~/.sluice``."""
    raw = override or os.environ.get("SLUICE_HOME") or DEFAULT_HOME
    return Path(raw).expanduser().absolute()


@dataclass(frozen=True)
class Env:
    """Where the control plane is and its token; built from the environment, or directly."""

    home: Path
    endpoint_override: str | None = None
    token_override: str | None = None
    token_origin: str = ""
    """Where ``token_override`` came from (``"SLUICE_TOKEN"`` for the environment), for
    messages; empty when it was given explicitly or there is none."""

    @classmethod
    def from_environ(
        cls, home: str | None = None, *, endpoint: str | None = None, token: str | None = None
    ) -> Env:
        """Explicit values first, then ``SLUICE_ENDPOINT`` / ``SLUICE_TOKEN``."""
        from_env = os.environ.get(TOKEN_VARIABLE) or None
        return cls(
            home_dir(home),
            endpoint or os.environ.get("SLUICE_ENDPOINT") or None,
            token or from_env,
            "" if token or from_env is None else TOKEN_VARIABLE,
        )

    def token_source(self) -> str:
        """Where the token sent comes from, as a user reads it: ``the SLUICE_TOKEN
        environment variable``, ``the token given``, or the token file's path."""
        if self.token_override:
            if self.token_origin == TOKEN_VARIABLE:
                return "the SLUICE_TOKEN environment variable"
            return "the token given"
        return str(self.token_path)

    def recorded_endpoint(self) -> str | None:
        """The address the running control plane wrote to ``$SLUICE_HOME/endpoint``."""
        try:
            return (self.home / ENDPOINT_FILE).read_text().strip() or None
        except OSError:
            return None

    def endpoint(self) -> str | None:
        return self.endpoint_override or self.recorded_endpoint()

    def token(self) -> str | None:
        if self.token_override:
            return self.token_override
        try:
            return (self.home / TOKEN_FILE).read_text().strip() or None
        except OSError:
            return None

    @property
    def token_path(self) -> Path:
        return self.home / TOKEN_FILE


class ApiError(Exception):
    """A failed call: gRPC code, reason (``sluice.v1.ErrorReason``) and message."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: epb.ErrorReason,
        message: str,
        *,
        metadata: Mapping[str, str] | None = None,
        endpoint: str = "",
        reason_name: str = "",
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})
        """The ErrorInfo's metadata: the resource concerned (``cluster``, ``topic``, ...)."""
        self.endpoint = endpoint
        self.reason_name = reason_name or epb.ErrorReason.Name(reason)
        """The reason as sent: a reason of a newer control plane that this client does not
        know stays readable here while ``reason`` is ERROR_REASON_UNSPECIFIED."""

    def __repr__(self) -> str:
        return f"ApiError({self.code.name}, {self.reason_name}, {self.message!r})"

    @classmethod
    def from_rpc(cls, exc: grpc.RpcError, endpoint: str = "") -> ApiError:
        """The typed form of a failed call. An UNAVAILABLE without ErrorInfo did not come
        from the control plane (nothing answered, or the connection broke): its reason is
        CONTROL_PLANE_UNAVAILABLE."""
        code: grpc.StatusCode = exc.code()
        message: str = exc.details() or code.name
        info = error_info(exc)
        if info is not None:
            try:
                reason = epb.ErrorReason.Value(info.reason)
            except ValueError:  # a newer control plane's reason
                reason = epb.ERROR_REASON_UNSPECIFIED
            return cls(
                code,
                reason,
                message,
                metadata=info.metadata,
                endpoint=endpoint,
                reason_name=info.reason,
            )
        if code == grpc.StatusCode.UNAVAILABLE:
            return cls(code, epb.CONTROL_PLANE_UNAVAILABLE, message, endpoint=endpoint)
        return cls(code, epb.ERROR_REASON_UNSPECIFIED, message, endpoint=endpoint)


def error_info(exc: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The control plane's ErrorInfo in a failed call's ``grpc-status-details-bin`` trailer;
    None when there is none (or it is not ours, or does not match the call's status)."""
    if not isinstance(exc, grpc.Call):
        return None
    try:
        status = rpc_status.from_call(exc)
    except ValueError:  # a status detail that contradicts the call's code or message
        return None
    if status is None:
        return None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            return info
    return None


def cluster_state_name(state: int) -> str:
    """A ``sluice.v1.ClusterState`` as users read it: ``ACTIVE``, ``UNSPECIFIED`` for 0."""
    return clusters_pb2.ClusterState.Name(state).removeprefix("CLUSTER_STATE_")


def broker_state_name(state: int) -> str:
    """A ``sluice.v1.BrokerState`` as users read it: ``RUNNING``, ``UNSPECIFIED`` for 0."""
    return clusters_pb2.BrokerState.Name(state).removeprefix("BROKER_STATE_")


class Client:
    """Stubs of every service over one channel; the bearer token and a deadline on every
    call; a failure raises :class:`ApiError`. Use it as a context manager, or ``close()``."""

    def __init__(
        self, endpoint: str, token: str, *, root_certificates: bytes | None = None
    ) -> None:
        """``root_certificates`` (PEM): TLS to the control plane, trusting those CAs (a
        control plane behind a TLS-terminating proxy); None: plaintext gRPC."""
        self.endpoint = endpoint
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
        if root_certificates is None:
            self.channel = grpc.insecure_channel(endpoint, options=options)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self.channel = grpc.secure_channel(endpoint, credentials, options=options)
        self.metadata = (("authorization", f"Bearer {token}"),)
        self.clusters = clusters_pb2_grpc.ClustersStub(self.channel)
        self.topics = topics_pb2_grpc.TopicsStub(self.channel)
        self.control_plane = controlplane_pb2_grpc.ControlPlaneStub(self.channel)
        self.groups = groups_pb2_grpc.GroupsStub(self.channel)
        self.operations = operations_pb2_grpc.OperationsStub(self.channel)
        self.logs = logs_pb2_grpc.LogsStub(self.channel)
        self.transforms = transforms_pb2_grpc.TransformsStub(self.channel)

    def call(
        self, method: Callable[..., Any], request: Any, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """``method(request)`` with the token and a deadline of ``timeout`` seconds."""
        try:
            return method(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as exc:
            raise ApiError.from_rpc(exc, self.endpoint) from None

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def write_token_file(path: Path, token: str) -> None:
    """Replace a token file atomically (a reader sees the old token or the new one, never a
    partial file), mode 0600 from the start."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.replace(tmp, path)
