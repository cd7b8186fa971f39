"""What a handler sees: the broker's parts and the request's version and client."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation, ResourceType
from wire.errors import (
    ClusterAuthorizationFailed,
    GroupAuthorizationFailed,
    TopicAuthorizationFailed,
)
from wire.framing import build, response_module

if TYPE_CHECKING:
    from dataplane.broker import Broker
    from dataplane.security.session import Session

T = TypeVar("T")
CLUSTER_RESOURCE = "kafka-cluster"
"""The one CLUSTER resource's name, as Kafka's."""


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str = ""
    session: Session | None = None
    """The connection's authentication (None for a request that came from no listener)."""

    @property
    def listener(self) -> str | None:
        """The name of the listener the request came through (None: no listener)."""
        return None if self.session is None else self.session.listener.name

    # ------------------------------------------------------------------ authorization

    @property
    def caller(self) -> str | None:
        """The principal the authorizer checks; None for the broker's own requests."""
        return None if self.session is None else self.session.principal

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the caller may do ``operation`` on the resource (always, without an
        authorizer)."""
        return self.broker.access.allowed(
            self.caller, self.client_host, operation, resource_type, name
        )

    def allowed_any(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the caller may do ``operation`` on some resource of the type (KIP-679)."""
        return self.broker.access.allowed_any(
            self.caller, self.client_host, operation, resource_type
        )

    def on_topic(self, operation: Operation, topic: str) -> bool:
        return self.allowed(operation, ResourceType.TOPIC, topic)

    def on_group(self, operation: Operation, group: str) -> bool:
        return self.allowed(operation, ResourceType.GROUP, group)

    def on_cluster(self, operation: Operation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_RESOURCE)

    def require_group(self, operation: Operation, group: str) -> None:
        """GroupAuthorizationFailed unless the caller may."""
        if not self.on_group(operation, group):
            raise GroupAuthorizationFailed(f"not authorized to {operation.name} group {group}")

    def require_cluster(self, operation: Operation) -> None:
        """ClusterAuthorizationFailed unless the caller may."""
        if not self.on_cluster(operation):
            raise ClusterAuthorizationFailed(f"not authorized to {operation.name} the cluster")

    def require_topic(self, operation: Operation, topic: str) -> None:
        """TopicAuthorizationFailed unless the caller may."""
        if not self.on_topic(operation, topic):
            raise TopicAuthorizationFailed(f"not authorized to {operation.name} topic {topic}")

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """The authorized-operations bit field of a resource, for this caller."""
        return self.broker.access.operations(self.caller, self.client_host, resource_type, name)

    @property
    def principal(self) -> str:
        """Who sent the request: ``User:NAME`` after SASL, ``User:<certificate DN>`` on an
        SSL listener with a client certificate, else ``User:ANONYMOUS`` (Kafka's)."""
        return "User:ANONYMOUS" if self.session is None else self.session.principal

    def make(self, entity: type[T], /, **values: Any) -> T:
        """Build the response entity ``entity`` — a kio class the handler names statically
        (its API's newest version) — in this request's version, from the fields that
        version has. (tests/dataplane/test_handler_fields.py checks that every field a
        handler sets exists in some version, so a typo is not silently dropped.)"""
        cls = _in_version(self.api_key, self.api_version, entity.__module__, entity.__name__)
        result: T = build(cls, **values)
        return result


@cache
def _in_version(api_key: int, api_version: int, module_name: str, name: str) -> Any:
    if not module_name.startswith("kio."):  # one of Sluice's own APIs (one version)
        return getattr(importlib.import_module(module_name), name)
    return getattr(response_module(api_key, api_version), name)


def cluster_operations(ctx: RequestContext) -> int:
    """The cluster's authorized-operations field, as Kafka fills it: 0 for a caller that may
    not DESCRIBE the cluster."""
    if not ctx.on_cluster(Operation.DESCRIBE):
        return 0
    return ctx.operations(ResourceType.CLUSTER, CLUSTER_RESOURCE)


def acl_api_refusal(ctx: RequestContext, operation: Operation) -> tuple[ErrorCode, str] | None:
    """Why an ACL API (DescribeAcls: DESCRIBE, CreateAcls / DeleteAcls: ALTER on the cluster)
    is refused, as Kafka's: SECURITY_DISABLED without an authorizer, else
    CLUSTER_AUTHORIZATION_FAILED for a caller that may not; None when it may go on."""
    if not ctx.broker.access.enabled:
        return ErrorCode.security_disabled, "No Authorizer is configured."
    if not ctx.on_cluster(operation):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return None
