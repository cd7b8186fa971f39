"""The broker's access control over its metadata image: off without an authorizer, super
users, and decisions that follow the ACL records as they are applied (the decision cache
is dropped when the ACLs change)."""

from __future__ import annotations

from dataplane.authorizer import Operation, ResourceType
from dataplane.cluster import records as r
from dataplane.cluster.image import MetadataImage
from dataplane.config import BrokerConfig
from dataplane.config.security_table import STANDARD_AUTHORIZER
from dataplane.security.access import AccessControl

READ, WRITE, DESCRIBE = Operation.READ, Operation.WRITE, Operation.DESCRIBE
TOPIC = ResourceType.TOPIC


def _access(**settings: str) -> tuple[AccessControl, MetadataImage]:
    config = BrokerConfig.build(data_dir="/tmp/x", listen="127.0.0.1:9092", overrides=settings)
    image = MetadataImage(node_id=0, cluster_id="c")
    return AccessControl(config, image), image


def _acl(acl_id: str, op: Operation, name: str, permission: int = 3) -> r.Acl:
    return r.Acl(acl_id, int(TOPIC), name, 3, "User:alice", "*", int(op), permission)


def test_without_an_authorizer_everything_is_allowed() -> None:
    access, _ = _access()
    assert access.allowed("User:alice", "127.0.0.1", WRITE, TOPIC, "t")
    assert access.operations("User:alice", "127.0.0.1", TOPIC, "t") == 3576


def test_decisions_follow_the_acls_as_they_change() -> None:
    access, image = _access(
        **{"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin;User:ops"}
    )
    assert not access.allowed("User:alice", "h", READ, TOPIC, "t")
    assert access.allowed("User:ops", "h", READ, TOPIC, "t")
    assert access.allowed(None, "h", READ, TOPIC, "t"), "the broker's own requests"
    image.apply(1, r.encode([_acl("a", READ, "t")]))
    assert access.allowed("User:alice", "h", READ, TOPIC, "t")
    assert access.allowed("User:alice", "h", DESCRIBE, TOPIC, "t"), "READ implies DESCRIBE"
    assert not access.allowed("User:alice", "h", WRITE, TOPIC, "t")
    image.apply(2, r.encode([_acl("d", READ, "t", permission=2)]))  # a DENY
    assert not access.allowed("User:alice", "h", READ, TOPIC, "t")
    image.apply(3, r.encode([r.RemoveAcl("d"), r.RemoveAcl("a")]))
    assert not access.allowed("User:alice", "h", DESCRIBE, TOPIC, "t")
