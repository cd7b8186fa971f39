"""Kafka's authorization semantics (dataplane/authorizer): patterns, wildcards, DENY over
ALLOW, implied operations, super users, allow.everyone.if.no.acl.found, authorize-by-type
(KIP-679), authorized-operations bit fields, CreateAcls validation and the filters of
DescribeAcls and DeleteAcls."""

from __future__ import annotations

import pytest

from dataplane.authorizer import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclFilter,
    Authorizer,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(
    rtype: ResourceType,
    name: str,
    op: Operation,
    *,
    principal: str = ALICE,
    permission: Permission = ALLOW,
    pattern: PatternType = LIT,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, permission)
    )


def test_literal_prefixed_and_wildcard_names() -> None:
    auth = Authorizer(
        [
            acl(T, "orders", Op.READ),
            acl(T, "logs-", Op.WRITE, pattern=PRE),
            acl(T, "*", Op.DESCRIBE, principal=BOB),
        ]
    )
    assert auth.authorize(ALICE, HOST, Op.READ, T, "orders")
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "orders-2"), "literal is exact"
    assert auth.authorize(ALICE, HOST, Op.WRITE, T, "logs-app")
    assert not auth.authorize(ALICE, HOST, Op.WRITE, T, "log"), "prefix shorter than the name"
    assert auth.authorize(BOB, HOST, Op.DESCRIBE, T, "anything")
    assert not auth.authorize(BOB, HOST, Op.READ, T, "orders")
    assert not auth.authorize(ALICE, HOST, Op.READ, G, "orders"), "another resource type"


def test_deny_beats_allow_and_all() -> None:
    auth = Authorizer(
        [
            acl(T, "*", Op.ALL),
            acl(T, "secret", Op.READ, permission=DENY),
            acl(T, "audit-", Op.ALL, permission=DENY, pattern=PRE),
        ]
    )
    assert auth.authorize(ALICE, HOST, Op.READ, T, "orders")
    assert auth.authorize(ALICE, HOST, Op.ALTER_CONFIGS, T, "orders"), "ALL allows every op"
    assert not auth.authorize(ALICE, HOST, Op.READ, T, "secret")
    assert auth.authorize(ALICE, HOST, Op.WRITE, T, "secret"), "the DENY is of READ only"
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE, T, "secret"), "denying READ keeps DESCRIBE"
    assert not auth.authorize(ALICE, HOST, Op.DESCRIBE, T, "audit-x"), "DENY ALL denies all"


@pytest.mark.parametrize("implying", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_operations_that_imply_describe(implying: Operation) -> None:
    auth = Authorizer([acl(T, "t", implying)])
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE, T, "t")
    assert not auth.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, T, "t")


def test_alter_configs_implies_describe_configs_only() -> None:
    auth = Authorizer([acl(T, "t", Op.ALTER_CONFIGS)])
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, T, "t")
    assert not auth.authorize(ALICE, HOST, Op.DESCRIBE, T, "t")
    assert not Authorizer([acl(T, "t", Op.DESCRIBE)]).authorize(ALICE, HOST, Op.READ, T, "t")


def test_principal_and_host_wildcards() -> None:
    auth = Authorizer(
        [
            acl(T, "t", Op.READ, principal="User:*"),
            acl(T, "t", Op.WRITE, host="10.0.0.1"),
        ]
    )
    assert auth.authorize(BOB, HOST, Op.READ, T, "t")
    assert not auth.authorize(ALICE, HOST, Op.WRITE, T, "t"), "another host"
    assert auth.authorize(ALICE, "10.0.0.1", Op.WRITE, T, "t")


def test_super_users_and_no_acl_found() -> None:
    acls = [acl(T, "guarded", Op.READ)]
    strict = Authorizer(acls, super_users=["User:admin"])
    open_ = Authorizer(acls, allow_if_no_acl=True)
    assert strict.authorize("User:admin", HOST, Op.DELETE, T, "guarded")
    assert not strict.authorize(BOB, HOST, Op.READ, T, "unguarded"), "secured: no ACL, no access"
    assert open_.authorize(BOB, HOST, Op.READ, T, "unguarded"), "no ACL applies to it"
    assert not open_.authorize(BOB, HOST, Op.READ, T, "guarded"), "an ACL applies, for alice"


def test_authorize_any_for_idempotent_producers() -> None:
    """KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on
    some topic; a DENY that covers every allowed topic leaves none."""
    assert Authorizer([acl(T, "orders", Op.WRITE)]).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert not Authorizer([acl(T, "orders", Op.READ)]).authorize_any(ALICE, HOST, Op.WRITE, T)
    covered = Authorizer(
        [
            acl(T, "logs-app", Op.WRITE),
            acl(T, "logs-", Op.WRITE, permission=DENY, pattern=PRE),
        ]
    )
    assert not covered.authorize_any(ALICE, HOST, Op.WRITE, T)
    partly = Authorizer(
        [
            acl(T, "logs-", Op.WRITE, pattern=PRE),
            acl(T, "logs-app", Op.WRITE, permission=DENY),
        ]
    )
    assert partly.authorize_any(ALICE, HOST, Op.WRITE, T), "other logs- topics remain"
    everything = Authorizer(
        [acl(T, "orders", Op.WRITE), acl(T, "*", Op.ALL, permission=DENY)],
    )
    assert not everything.authorize_any(ALICE, HOST, Op.WRITE, T)


def test_authorized_operations_bits() -> None:
    auth = Authorizer([acl(T, "t", Op.WRITE), acl(G, "g", Op.READ)])
    topic_bits = auth.authorized_operations(ALICE, HOST, T, "t")
    assert topic_bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)
    assert auth.authorized_operations(ALICE, HOST, G, "g") == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert auth.authorized_operations(BOB, HOST, T, "t") == 0


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(ResourceType.ANY, "t", Op.READ), "Invalid resourceType ANY"),
        (acl(T, "t", Op.READ, pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(T, "t", Op.ANY), "Invalid operation ANY"),
        (acl(T, "t", Op.READ, permission=Permission.ANY), "Invalid permissionType ANY"),
        (acl(C, "my-cluster", Op.ALTER), CLUSTER_NAME),
        (acl(T, "t", Op.READ, principal="alice"), "Could not parse principal"),
        (acl(T, "", Op.READ), "should not be empty"),
    ],
)
def test_create_validation(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAcl, match=message):
        binding.validate()


def test_valid_bindings_pass() -> None:
    acl(C, CLUSTER_NAME, Op.IDEMPOTENT_WRITE).validate()
    acl(T, "logs-", Op.READ, pattern=PRE, permission=DENY).validate()


def test_filters_of_describe_and_delete() -> None:
    stored = [
        lit := acl(T, "orders", Op.READ),
        star := acl(T, "*", Op.DESCRIBE, principal=BOB),
        pre := acl(T, "ord", Op.WRITE, pattern=PRE),
        other := acl(T, "payments", Op.READ, permission=DENY),
        group := acl(G, "orders", Op.READ),
    ]

    def select(f: AclFilter) -> list[AclBinding]:
        return [b for b in stored if f.matches(b)]

    assert select(AclFilter()) == stored
    assert select(AclFilter(resource_type=T, name="orders")) == [lit]  # ANY: exact names
    assert select(AclFilter(resource_type=T, name="orders", pattern_type=PatternType.MATCH)) == [
        lit,
        star,
        pre,
    ]
    assert select(AclFilter(pattern_type=PRE)) == [pre]
    assert select(AclFilter(permission=DENY)) == [other]
    assert select(AclFilter(principal=BOB)) == [star]
    assert select(AclFilter(resource_type=G)) == [group]
    assert select(AclFilter(operation=Op.WRITE, resource_type=T)) == [pre]
