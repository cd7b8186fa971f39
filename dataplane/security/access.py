"""Who may do what on this broker: the authorizer over the metadata log's ACLs, as the
handlers ask it.

``authorizer.class.name`` empty: no authorization, every check passes (and the ACL APIs
answer SECURITY_DISABLED, as Kafka's). Set to StandardAuthorizer: each check goes to a
``dataplane.authorizer.Authorizer`` built from ``MetadataImage.acls``, ``super.users`` and
``allow.everyone.if.no.acl.found``, rebuilt when the ACLs change (``acls_version``), so a
CreateAcls or DeleteAcls applies on every broker as soon as it has replayed the record.

A request that came through no listener (``principal`` None: the broker's own calls) is
always allowed.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from dataplane.authorizer import (
    AccessControlEntry,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from dataplane.cluster import records as r
from dataplane.cluster.image import MetadataImage
from dataplane.config import BrokerConfig

E = TypeVar("E", bound=enum.IntEnum)
MAX_CACHED_DECISIONS = 100_000


def code_enum(kind: type[E], code: int) -> E:
    """``kind`` of a protocol code; an unknown code is UNKNOWN (0), which checks refuse."""
    try:
        return kind(int(code))
    except ValueError:
        return kind(0)


def binding(  # noqa: PLR0917 - the seven fields of an ACL, in the protocol's order
    rtype: int, name: str, ptype: int, principal: str, host: str, op: int, perm: int
) -> AclBinding:
    """An ACL from the protocol's codes (an unknown code becomes UNKNOWN)."""
    return AclBinding(
        ResourcePattern(code_enum(ResourceType, rtype), name, code_enum(PatternType, ptype)),
        AccessControlEntry(principal, host, code_enum(Operation, op), code_enum(Permission, perm)),
    )


def binding_of(acl: r.Acl) -> AclBinding:
    """The ACL a metadata record holds."""
    return binding(
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission,
    )


def parse_super_users(raw: str) -> list[str]:
    return [x.strip() for x in raw.split(";") if x.strip()]


class AccessControl:
    def __init__(self, config: BrokerConfig, image: MetadataImage) -> None:
        self.enabled = bool(config.get_str("authorizer.class.name"))
        self.image = image
        self.super_users = parse_super_users(config.get_str("super.users"))
        self.allow_if_no_acl = config.get_bool("allow.everyone.if.no.acl.found")
        self._authorizer: Authorizer | None = None
        self._version = -1
        self._decisions: dict[tuple[str, str, Operation, ResourceType, str], bool] = {}
        """Decisions under the current ACLs (cleared when they change), so the produce and
        fetch paths do not scan the ACLs for every partition of every request."""

    @property
    def authorizer(self) -> Authorizer:
        if self._authorizer is None or self._version != self.image.acls_version:
            self._version = self.image.acls_version
            self._decisions.clear()
            self._authorizer = Authorizer(
                (binding_of(a) for a in self.image.acls.values()),
                self.super_users,
                allow_if_no_acl=self.allow_if_no_acl,
            )
        return self._authorizer

    def allowed(
        self,
        principal: str | None,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if not self.enabled or principal is None:
            return True
        authorizer = self.authorizer  # first: rebuilt (and the decisions cleared) if stale
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = authorizer.authorize(principal, host, operation, resource_type, name)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def allowed_any(
        self, principal: str | None, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        if not self.enabled or principal is None:
            return True
        return self.authorizer.authorize_any(principal, host, operation, resource_type)

    def operations(
        self, principal: str | None, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The authorized-operations bit field of one resource."""
        if not self.enabled or principal is None:
            return _every_operation(resource_type)
        return self.authorizer.authorized_operations(principal, host, resource_type, name)


def _every_operation(resource_type: ResourceType) -> int:
    """Without an authorizer Kafka reports every operation of the type as allowed."""
    return Authorizer([], allow_if_no_acl=True).authorized_operations(
        "User:ANONYMOUS", "*", resource_type, "*"
    )


def binding_of_creation(creation: Any) -> AclBinding:
    """The ACL of a CreateAcls creation."""
    return binding(
        creation.resource_type,
        creation.resource_name,
        creation.resource_pattern_type,
        creation.principal,
        creation.host,
        creation.operation,
        creation.permission_type,
    )
