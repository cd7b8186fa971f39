"""Shared by the ACL APIs (CreateAcls, DescribeAcls, DeleteAcls): metadata records to and
from ``dataplane.authorizer`` values, and request filters with Kafka's checks."""

from __future__ import annotations

from typing import Any

from dataplane.authorizer import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from dataplane.cluster import records as r
from dataplane.security.access import binding_of, binding_of_creation, code_enum

__all__ = ["BadFilter", "binding_of", "binding_of_creation", "filter_of", "record_of"]


def record_of(acl_id: str, binding: AclBinding) -> r.Acl:
    p, e = binding.pattern, binding.entry
    return r.Acl(
        id=acl_id,
        resource_type=int(p.resource_type),
        resource_name=p.name,
        pattern_type=int(p.pattern_type),
        principal=e.principal,
        host=e.host,
        operation=int(e.operation),
        permission=int(e.permission),
    )


class BadFilter(ValueError):
    """A filter Kafka refuses with INVALID_REQUEST."""


def filter_of(f: Any) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter, checked as Kafka's controller checks
    it (an UNKNOWN code in the pattern or the entry part is refused)."""
    resource_type = code_enum(ResourceType, f.resource_type_filter)
    pattern_type = code_enum(PatternType, f.pattern_type_filter)
    operation = code_enum(Operation, f.operation)
    permission = code_enum(Permission, f.permission_type)
    if pattern_type == PatternType.UNKNOWN or resource_type == ResourceType.UNKNOWN:
        raise BadFilter("Unknown patternFilter.")
    if operation == Operation.UNKNOWN or permission == Permission.UNKNOWN:
        raise BadFilter("Unknown entryFilter.")
    return AclFilter(
        resource_type=resource_type,
        name=f.resource_name_filter,
        pattern_type=pattern_type,
        principal=f.principal_filter,
        host=f.host_filter,
        operation=operation,
        permission=permission,
    )
