"""ACL values with Kafka's codes and names: resource types, pattern types, operations,
permissions, the binding of a resource pattern to an access control entry, and the filters
DescribeAcls and DeleteAcls match with (``org.apache.kafka.common.acl`` and
``...resource``). Codes are the protocol's (CreateAcls, DescribeAcls, DeleteAcls)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

CLUSTER_NAME = "kafka-cluster"
"""The name of the one cluster resource."""
WILDCARD = "*"
"""A LITERAL resource name, principal or host that matches every one."""
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    """Filters only: any pattern type, the name as given."""
    MATCH = 2
    """Filters only: every pattern that applies to the name (literal, wildcard, prefixes)."""
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class InvalidAcl(ValueError):
    """An ACL CreateAcls refuses (Kafka answers INVALID_REQUEST with this message)."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this (stored, LITERAL or PREFIXED) pattern applies to one resource."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name in (name, WILDCARD)
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return False


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    """``User:alice``; ``User:*`` matches every principal."""
    host: str
    """An IP address, or ``*``."""
    operation: Operation
    permission: Permission


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> None:
        """What Kafka checks before it stores an ACL (the broker: the cluster resource's
        name; the controller's AclControlManager: the rest, with its messages)."""
        p, e = self.pattern, self.entry
        if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl(f"Invalid resourceType {p.resource_type.name}")
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {p.pattern_type.name}")
        if e.operation in (Operation.ANY, Operation.UNKNOWN):
            raise InvalidAcl(f"Invalid operation {e.operation.name}")
        if e.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"Invalid permissionType {e.permission.name}")
        if not p.name:
            raise InvalidAcl("Resource name should not be empty")
        if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if ":" not in e.principal:
            raise InvalidAcl(
                f"Could not parse principal from `{e.principal}` (no colon is present "
                "separating the principal type from the principal name)"
            )


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select. ``None`` fields match anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        p, e = binding.pattern, binding.entry
        if self.resource_type not in (ResourceType.ANY, p.resource_type):
            return False
        if not self._pattern_matches(p):
            return False
        if self.principal is not None and self.principal != e.principal:
            return False
        if self.host is not None and self.host != e.host:
            return False
        if self.operation not in (Operation.ANY, e.operation):
            return False
        return self.permission in (Permission.ANY, e.permission)

    def _pattern_matches(self, p: ResourcePattern) -> bool:
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            if p.pattern_type == PatternType.LITERAL:
                return p.name in (self.name, WILDCARD)
            return p.pattern_type == PatternType.PREFIXED and self.name.startswith(p.name)
        if self.pattern_type not in (PatternType.ANY, p.pattern_type):
            return False
        return self.name is None or self.name == p.name
