"""ACLs and authorization decisions with Kafka's semantics (README.md)."""

from dataplane.authorizer.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from dataplane.authorizer.authorizer import OPERATIONS_OF, Authorizer

__all__ = [
    "CLUSTER_NAME",
    "OPERATIONS_OF",
    "AccessControlEntry",
    "AclBinding",
    "AclFilter",
    "Authorizer",
    "InvalidAcl",
    "Operation",
    "PatternType",
    "Permission",
    "ResourcePattern",
    "ResourceType",
]
