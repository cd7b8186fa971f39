"""Authorization decisions with Kafka's semantics (``StandardAuthorizer``):

- super users (``super.users``) may do everything;
- a resource that no ACL applies to (for any principal) is allowed to everyone only with
  ``allow.everyone.if.no.acl.found``;
- an ACL applies to a request when its resource pattern matches (LITERAL: the same name or
  ``*``; PREFIXED: a prefix of the name), its principal is the request's or ``User:*``, and
  its host is the client's address or ``*``;
- DENY beats ALLOW: a DENY of the operation (or of ALL) refuses, whatever else allows;
- an ALLOW of the operation, of ALL, or of an operation that implies it allows: READ, WRITE,
  DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
- ``authorize_any``: whether the principal may do the operation on some resource of a type
  (KIP-679: an idempotent producer needs WRITE on some topic or IDEMPOTENT_WRITE on the
  cluster);
- ``authorized_operations``: the bit field Metadata and the Describe APIs report
  (``include_*_authorized_operations``), bit ``1 << operation code`` per allowed operation.

Sans-io: the ACLs come from the metadata image; nothing here reads or writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from dataplane.authorizer.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}
"""Operations whose ALLOW also allows the key (never a DENY: denying READ denies no
DESCRIBE)."""

OPERATIONS_OF: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        Operation.READ,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}
"""The operations each resource type reports in authorized-operations bit fields."""


class Authorizer:
    """Decisions over one set of ACLs (rebuild it when the ACLs change: it indexes them)."""

    def __init__(
        self,
        acls: Iterable[AclBinding],
        super_users: Iterable[str] = (),
        *,
        allow_if_no_acl: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in acls:
            self._by_type.setdefault(binding.pattern.resource_type, []).append(binding)

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        matching = [
            b
            for b in self._by_type.get(resource_type, ())
            if b.pattern.matches(resource_type, name)
        ]
        if not matching:
            return self.allow_if_no_acl
        mine = [b for b in matching if _applies(b, principal, host)]
        if any(
            b.entry.permission == Permission.DENY
            and b.entry.operation in (operation, Operation.ALL)
            for b in mine
        ):
            return False
        allowing = {operation, Operation.ALL} | IMPLIED_BY.get(operation, frozenset())
        return any(
            b.entry.permission == Permission.ALLOW and b.entry.operation in allowing for b in mine
        )

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of ``resource_type`` allows ``operation`` (Kafka's
        ``authorizeByResourceType``): an ALLOW that no DENY covers entirely."""
        if principal in self.super_users:
            return True
        bindings = self._by_type.get(resource_type, [])
        if not bindings:
            return self.allow_if_no_acl
        ops = (operation, Operation.ALL)
        mine = [b for b in bindings if _applies(b, principal, host) and b.entry.operation in ops]
        denied = [b.pattern for b in mine if b.entry.permission == Permission.DENY]
        if any(p.pattern_type == PatternType.LITERAL and p.name == WILDCARD for p in denied):
            return False
        for b in mine:
            if b.entry.permission != Permission.ALLOW:
                continue
            allowed = b.pattern
            covered = any(
                (d.pattern_type == PatternType.PREFIXED and allowed.name.startswith(d.name))
                or (
                    d.pattern_type == PatternType.LITERAL
                    and allowed.pattern_type == PatternType.LITERAL
                    and d.name == allowed.name
                )
                for d in denied
            )
            if not covered:
                return True
        return False

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """Kafka's bit field: bit ``1 << code`` for each allowed operation of the type."""
        bits = 0
        for operation in OPERATIONS_OF.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits


def _applies(binding: AclBinding, principal: str, host: str) -> bool:
    entry = binding.entry
    return entry.principal in (principal, WILDCARD_PRINCIPAL) and entry.host in (host, WILDCARD)
