"""Where the control plane is, how to authenticate to it, and what its errors mean to a user.

    SLUICE_HOME      state directory (default ~/.sluice): token, endpoint file, logs
    SLUICE_ENDPOINT  control-plane address HOST:PORT (default: the one `cloudctl up` recorded
                     in $SLUICE_HOME/endpoint)
    SLUICE_TOKEN     API token (default: $SLUICE_HOME/token)

gRPC failures become one-line :class:`CliError`s in one place, :func:`explain`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from cli.output import CliError
from proto.sluice.v1 import clusters_pb2_grpc, controlplane_pb2_grpc, topics_pb2_grpc

DEFAULT_HOME = "~/.sluice"
ENDPOINT_FILE = "endpoint"
TOKEN_FILE = "token"  # noqa: S105 - a file name, not a secret
PID_FILE = "controlplane.pid"
DEFAULT_TIMEOUT = 30.0


def home_dir(override: str | None = None) -> Path:
    raw = override or os.environ.get("SLUICE_HOME") or DEFAULT_HOME
    return Path(raw).expanduser().absolute()


@dataclass(frozen=True)
class Env:
    """Where to find the control plane; built from the environment, or by tests directly."""

    home: Path
    endpoint_override: str | None = None
    token_override: str | None = None

    @classmethod
    def from_environ(cls, home: str | None = None) -> Env:
        return cls(
            home_dir(home),
            os.environ.get("SLUICE_ENDPOINT") or None,
            os.environ.get("SLUICE_TOKEN") or None,
        )

    def recorded_endpoint(self) -> str | None:
        try:
            return (self.home / ENDPOINT_FILE).read_text().strip() or None
        except OSError:
            return None

    def endpoint(self) -> str:
        endpoint = self.endpoint_override or self.recorded_endpoint()
        if not endpoint:
            raise CliError(
                f"the control plane is not running for SLUICE_HOME={self.home}",
                "start it with `cloudctl up`, or set SLUICE_ENDPOINT",
            )
        return endpoint

    def token(self) -> str:
        if self.token_override:
            return self.token_override
        try:
            return (self.home / TOKEN_FILE).read_text().strip()
        except OSError:
            raise CliError(
                f"no API token in {self.home / TOKEN_FILE}",
                "start the control plane with `cloudctl up`, or set SLUICE_HOME to the "
                "directory it uses",
            ) from None


class Api:
    """Stubs of every service, with the bearer token and a deadline on every call."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.endpoint = env.endpoint()
        self.channel = grpc.insecure_channel(self.endpoint)
        self.metadata = (("authorization", f"Bearer {env.token()}"),)
        self.clusters = clusters_pb2_grpc.ClustersStub(self.channel)
        self.topics = topics_pb2_grpc.TopicsStub(self.channel)
        self.status = controlplane_pb2_grpc.ControlPlaneStub(self.channel)

    def call(
        self, method: Callable[..., Any], request: Any, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        try:
            return method(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as exc:
            raise explain(exc, self.env, self.endpoint) from None

    def close(self) -> None:
        self.channel.close()


def explain(exc: grpc.RpcError, env: Env, endpoint: str) -> CliError:
    """The one mapping from a gRPC status to a user-facing error line with a hint."""
    code = exc.code()
    details = exc.details() or code.name
    if code == grpc.StatusCode.UNAVAILABLE and details.startswith("the object store "):
        return CliError(details, "`cloudctl status` tells whether the object store answers")
    if code == grpc.StatusCode.UNAVAILABLE and not details.startswith(("broker ", "broker(s) ")):
        return CliError(
            f"cannot reach the control plane at {endpoint}",
            "is it running? start it with `cloudctl up`; `cloudctl status` tells",
        )
    if code == grpc.StatusCode.UNAVAILABLE:
        return CliError(details, "the cluster may be healing: check `cloudctl describe-cluster`")
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return CliError(
            "the control plane refused the API token",
            f"use the SLUICE_HOME that `cloudctl up` used (token read from {env.home}/token)",
        )
    if code == grpc.StatusCode.NOT_FOUND:
        if details.startswith("topic "):
            return CliError(details, "list topics with `cloudctl list-topics --cluster CLUSTER`")
        return CliError(details, "list clusters with `cloudctl list-clusters`")
    if code == grpc.StatusCode.ALREADY_EXISTS:
        return CliError(details, "choose another name, or delete the existing one first")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return CliError(details)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return CliError(details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return CliError(
            f"the control plane at {endpoint} did not answer in time",
            f"see {env.home}/logs/controlplane.log",
        )
    return CliError(f"{details} [{code.name}]", f"see {env.home}/logs/controlplane.log")
