"""The provider's side of the control-plane client: where the control plane is, the stubs of
every service the resources use, and what a failed call means to a Terraform user.

Finding the control plane and the token is the shared client's (``sluice_client``): the
provider's ``endpoint`` and ``token`` arguments win over ``SLUICE_ENDPOINT`` /
``SLUICE_TOKEN``, which win over the files ``cloudctl up`` wrote under ``$SLUICE_HOME``, as
for cloudctl. A failed call (:class:`ApiError`) becomes a :class:`ProviderError` (summary,
what to do, the attribute concerned) in one place, :func:`explain`, by the error's reason,
never by its message text. The token is never logged nor put in a diagnostic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from proto.sluice.v1 import configurations_pb2_grpc, endpoints_pb2_grpc, security_pb2_grpc
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import DEFAULT_TIMEOUT, ApiError, Client, Env

log = logging.getLogger("sluice")

Path_ = Sequence[str | tuple[str | int]]
"""An attribute path as ``tf`` takes it: names, and ``(key,)`` for a map or list element."""


class ProviderError(Exception):
    """An error as Terraform shows it: a summary, a detail that says what to do, and the
    attribute it concerns. ``state`` is what exists despite the error (a cluster created
    that did not become ACTIVE): Terraform keeps it, tainted, so that destroy removes it."""

    def __init__(
        self,
        summary: str,
        detail: str = "",
        path: Path_ | None = None,
        *,
        state: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(summary)
        self.summary = summary
        self.detail = detail
        self.path = list(path) if path else None
        self.state = state


@dataclass(frozen=True)
class Settings:
    """The provider's configuration, resolved."""

    env: Env
    endpoint: str
    token: str
    ca_pem: bytes | None = None

    def describe_token(self) -> str:
        """Where the token came from, for messages (never the token)."""
        if self.env.token_override and not self.env.token_origin:
            return "the provider's `token` argument"
        return self.env.token_source()


def resolve(endpoint: str | None, token: str | None, ca_file: str | None) -> Settings:
    """The provider's settings from its arguments, the environment and ``$SLUICE_HOME``."""
    env = Env.from_environ(None, endpoint=endpoint or None, token=token or None)
    found = env.endpoint()
    if not found:
        raise ProviderError(
            f"The Sluice control plane is not running for SLUICE_HOME={env.home}",
            "Start it with `cloudctl up`, or set the provider's `endpoint` argument (or "
            "SLUICE_ENDPOINT) to the HOST:PORT it listens on.",
            ["endpoint"],
        )
    secret = env.token()
    if not secret:
        raise ProviderError(
            f"No API token for the control plane at {found}",
            f"Set the provider's `token` argument (or SLUICE_TOKEN), or SLUICE_HOME to the "
            f"directory `cloudctl up` used (no token file at {env.token_path}).",
            ["token"],
        )
    ca_pem = None
    if ca_file:
        try:
            ca_pem = Path(ca_file).expanduser().read_bytes()
        except OSError as exc:
            raise ProviderError(
                f"Cannot read ca_file {ca_file!r}: {exc.strerror}",
                "Give the path of a PEM file with the CA certificates the control plane's "
                "TLS endpoint is signed by, or remove `ca_file` for plaintext gRPC.",
                ["ca_file"],
            ) from None
        if b"-----BEGIN CERTIFICATE-----" not in ca_pem:
            raise ProviderError(
                f"ca_file {ca_file!r} holds no PEM certificate",
                "Give a PEM file (-----BEGIN CERTIFICATE-----) with the CA certificates.",
                ["ca_file"],
            )
    return Settings(env, found, secret, ca_pem)


class Api:
    """Every service's stub over one channel; :meth:`call` raises :class:`ApiError`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = Client(settings.endpoint, settings.token, root_certificates=settings.ca_pem)
        channel = self.client.channel
        self.clusters = self.client.clusters
        self.topics = self.client.topics
        self.operations = self.client.operations
        self.transforms = self.client.transforms
        self.users = security_pb2_grpc.UsersStub(channel)
        self.acls = security_pb2_grpc.AclsStub(channel)
        self.endpoints = endpoints_pb2_grpc.EndpointsStub(channel)
        self.configurations = configurations_pb2_grpc.ConfigurationsStub(channel)

    def call(
        self, method: Callable[..., Any], request: Any, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        return self.client.call(method, request, timeout)

    def close(self) -> None:
        self.client.close()


# ---------------------------------------------------------------------- errors

LISTS = {
    "cluster": "`cloudctl list-clusters`",
    "topic": "`cloudctl list-topics --cluster {cluster}`",
    "user": "`cloudctl list-users --cluster {cluster}`",
    "private_endpoint": "`cloudctl list-private-endpoints --cluster {cluster}`",
    "transform": "`cloudctl list-transforms --cluster {cluster}`",
    "configuration": "`cloudctl list-configurations`",
}

NOT_FOUND = {
    epb.CLUSTER_NOT_FOUND: ("cluster", "cluster"),
    epb.TOPIC_NOT_FOUND: ("topic", "input_topic"),
    epb.USER_NOT_FOUND: ("user", "name"),
    epb.ENDPOINT_NOT_FOUND: ("private_endpoint", "private_endpoint"),
    epb.TRANSFORM_NOT_FOUND: ("transform", "name"),
    epb.CONFIGURATION_NOT_FOUND: ("configuration", "configuration_info"),
}
"""Reason -> (what is missing, the attribute that names it)."""

ALREADY_EXISTS = (
    epb.CLUSTER_ALREADY_EXISTS,
    epb.TOPIC_ALREADY_EXISTS,
    epb.USER_ALREADY_EXISTS,
    epb.ENDPOINT_ALREADY_EXISTS,
    epb.CONFIGURATION_ALREADY_EXISTS,
)

BUSY = (epb.CLUSTER_NOT_READY, epb.OPERATION_IN_PROGRESS, epb.BROKER_UNAVAILABLE)
"""Reasons that pass: the cluster is creating, updating or healing."""


def explain(
    exc: ApiError, settings: Settings, *, resource: str = "", config: str = ""
) -> ProviderError:
    """The one mapping from a failed call to a diagnostic. ``resource`` is the Terraform
    type (for the import hint), ``config`` the map attribute whose key an INVALID_CONFIG
    names."""
    return _access(exc, settings) or _about(exc, resource, config) or _other(exc, settings)


def _access(exc: ApiError, settings: Settings) -> ProviderError | None:
    """The control plane cannot be reached, or refuses the token."""
    if exc.reason == epb.CONTROL_PLANE_UNAVAILABLE:
        tls = (
            " With `ca_file` the provider speaks TLS: remove it for a plaintext control plane."
            if settings.ca_pem
            else ""
        )
        return ProviderError(
            f"Cannot reach the Sluice control plane at {exc.endpoint or settings.endpoint}",
            "Is it running? Start it with `cloudctl up` (`cloudctl status` tells), or set the "
            "provider's `endpoint` (or SLUICE_ENDPOINT) to where it listens." + tls,
        )
    if exc.reason == epb.TOKEN_INVALID or exc.code == grpc.StatusCode.UNAUTHENTICATED:
        return ProviderError(
            f"The control plane at {settings.endpoint} refused the API token from "
            f"{settings.describe_token()}",
            "Set the provider's `token` (or SLUICE_TOKEN) to the token of that control plane, "
            "or SLUICE_HOME to the directory `cloudctl up` used.",
        )
    if exc.code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ProviderError(
            f"The control plane at {settings.endpoint} did not answer in time",
            f"See {settings.env.home}/logs/controlplane.log.",
        )
    return None


def _about(exc: ApiError, resource: str, config: str) -> ProviderError | None:
    """Errors about the resource: missing, already there, a bad setting."""
    meta = {"cluster": "CLUSTER", **exc.metadata}
    if exc.reason in NOT_FOUND:
        what, attribute = NOT_FOUND[exc.reason]
        if resource.removeprefix("data.") == f"sluice_{what}":
            attribute = "name"  # the resource's own object: its name
        listing = LISTS[what].format(**meta)
        return ProviderError(exc.message, f"Check `{attribute}`; {listing} lists them.")
    if exc.reason in ALREADY_EXISTS:
        hint = "Choose another name, or bring the existing one under Terraform"
        if resource:
            hint += f" with `terraform import {resource}.NAME ID`"
        return ProviderError(exc.message, hint + " (the resource's documentation gives its ID).")
    if exc.reason == epb.INVALID_CONFIG and config:
        key = exc.metadata.get("key", "")
        path: list[str | tuple[str | int]] = [config, (key,)] if key else [config]
        return ProviderError(
            exc.message, f"Fix or remove the setting in `{config}`; nothing was changed.", path
        )
    if exc.reason in BUSY or exc.code == grpc.StatusCode.UNAVAILABLE:
        cluster = meta["cluster"]
        return ProviderError(
            exc.message,
            f"The cluster may be busy or healing: `cloudctl describe-cluster {cluster}` tells; "
            "apply again once it is ACTIVE.",
        )
    return None


def _other(exc: ApiError, settings: Settings) -> ProviderError:
    if exc.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
        return ProviderError(
            exc.message, "Nothing was changed; fix the configuration and apply again."
        )
    return ProviderError(
        f"{exc.message} [{exc.code.name}, {exc.reason_name}]",
        f"See {settings.env.home}/logs/controlplane.log.",
    )
