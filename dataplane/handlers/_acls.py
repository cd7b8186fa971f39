"""Shared by the ACL APIs (CreateAcls, DescribeAcls, DeleteAcls): metadata records to and
from ``dataplane.authorizer`` values, and request filters with Kafka's checks."""

from __future__ import annotations

from typing import Any

from dataplane.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from dataplane.cluster import records as r


def _enum(kind: Any, code: int) -> Any:
    try:
        return kind(int(code))
    except ValueError:
        return kind(0)  # UNKNOWN: the checks below refuse it


def _binding(  # noqa: PLR0917 - the seven fields of an ACL, in the protocol's order
    rtype: int, name: str, ptype: int, principal: str, host: str, op: int, perm: int
) -> AclBinding:
    return AclBinding(
        ResourcePattern(_enum(ResourceType, rtype), name, _enum(PatternType, ptype)),
        AccessControlEntry(principal, host, _enum(Operation, op), _enum(Permission, perm)),
    )


def binding_of(acl: r.Acl) -> AclBinding:
    return _binding(
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission,
    )


def binding_of_creation(creation: Any) -> AclBinding:
    return _binding(
        creation.resource_type,
        creation.resource_name,
        creation.resource_pattern_type,
        creation.principal,
        creation.host,
        creation.operation,
        creation.permission_type,
    )


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
    resource_type = _enum(ResourceType, f.resource_type_filter)
    pattern_type = _enum(PatternType, f.pattern_type_filter)
    operation = _enum(Operation, f.operation)
    permission = _enum(Permission, f.permission_type)
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
