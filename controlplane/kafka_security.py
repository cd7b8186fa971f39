"""The security requests of the Kafka protocol that the control plane sends (the Users and
Acls APIs): DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) for SCRAM
users, DescribeAcls (29), CreateAcls (30) and DeleteAcls (31) for ACLs. Each function sends
one request through an :class:`~controlplane.kafka.Admin` (one broker; how it connects and
authenticates is the Admin's) and raises :class:`~controlplane.kafka.KafkaResponseError` for
an error code. The values carry Kafka's codes (``org.apache.kafka.common.acl``,
``...resource``, ``ScramMechanism``).

Passwords (KIP-554): AlterUserScramCredentials carries a salt and the salted password,
never the password. :func:`upsert_credential` draws a random salt (:data:`SALT_BYTES`) and
computes RFC 5802's Hi() (PBKDF2 with the mechanism's HMAC over the password's UTF-8
bytes, as Kafka's ScramFormatter) in a thread; the password goes nowhere else: not in a log
line, an exception or a return value.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.alter_user_scram_credentials.v0 import request as alter_scram
from kio.schema.create_acls.v3 import request as create_acls
from kio.schema.delete_acls.v3 import request as delete_acls
from kio.schema.describe_acls.v3 import request as describe_acls
from kio.schema.describe_user_scram_credentials.v0 import request as describe_scram
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from controlplane.kafka import Admin, KafkaResponseError
from dataplane.authorizer.acl import Operation, PatternType, Permission, ResourceType

MIN_ITERATIONS = 4096
"""Kafka's least SCRAM iteration count (ScramMechanism.minIterations)."""
MAX_ITERATIONS = 16384
"""Kafka's largest (ScramControlManager.MAX_ITERATIONS): the brokers refuse more."""
DEFAULT_ITERATIONS = 4096
"""Iterations of a credential created without a count (kafka-configs.sh's default)."""
SALT_BYTES = 32
"""Random bytes of each credential's salt."""
CLUSTER_RESOURCE = "kafka-cluster"
"""The name of the one CLUSTER resource."""
WILDCARD_HOST = "*"

E = TypeVar("E", bound=enum.IntEnum)


class ScramMechanism(enum.IntEnum):
    """Kafka's SCRAM mechanism types."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def kafka_name(self) -> str:
        """``SCRAM-SHA-256``: the SASL mechanism name clients configure."""
        return self.name.replace("_", "-")

    @property
    def digest(self) -> str:
        return "sha256" if self == ScramMechanism.SCRAM_SHA_256 else "sha512"


def _operations(names: str) -> tuple[Operation, ...]:
    return tuple(sorted(Operation[name] for name in names.split()))


SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: _operations(
        "ALL READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS"
    ),
    ResourceType.GROUP: _operations("ALL READ DELETE DESCRIBE"),
    ResourceType.CLUSTER: _operations(
        "ALL CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE"
    ),
    ResourceType.TRANSACTIONAL_ID: _operations("ALL WRITE DESCRIBE"),
    ResourceType.DELEGATION_TOKEN: _operations("ALL DESCRIBE"),
    ResourceType.USER: _operations("ALL CREATE_TOKENS DESCRIBE_TOKENS"),
}
"""The operations each resource type has, ALL included (Kafka's AclEntry.supportedOperations,
which kafka-acls.sh checks an ACL against), in code order."""


def code_of(kind: type[E], code: int) -> E:
    """``kind`` of a protocol code; a code this version does not know is UNKNOWN (0)."""
    try:
        return kind(int(code))
    except ValueError:
        return kind(0)


@dataclass(frozen=True, order=True)
class Acl:
    """One ACL: a resource pattern and an access control entry. Ordered as listed."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def __str__(self) -> str:
        return (
            f"{self.permission.name} {self.principal} {self.operation.name} from "
            f"{self.host} on {self.resource_type.name} {self.pattern_type.name} "
            f"{self.resource_name!r}"
        )


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select; None names, principals and hosts, and the
    ANY values, select everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    @classmethod
    def exactly(cls, acl: Acl) -> AclFilter:
        """The filter that selects ``acl`` and nothing else."""
        return cls(
            acl.resource_type,
            acl.resource_name,
            acl.pattern_type,
            acl.principal,
            acl.host,
            acl.operation,
            acl.permission,
        )


@dataclass(frozen=True)
class Credential:
    mechanism: ScramMechanism
    iterations: int


# ---------------------------------------------------------------------- users


def salted_password(
    password: str, salt: bytes, iterations: int, mechanism: ScramMechanism
) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.digest, password.encode(), salt, iterations)


async def describe_credentials(
    admin: Admin, names: Sequence[str] | None = None
) -> dict[str, tuple[Credential, ...]]:
    """The SCRAM credentials of ``names`` (None: of every user), by user name. A user
    without credentials is left out (Kafka answers RESOURCE_NOT_FOUND for it)."""
    request = describe_scram.DescribeUserScramCredentialsRequest(
        users=None if names is None else tuple(describe_scram.UserName(name=n) for n in names)
    )
    response = await admin.call(request)
    if response.error_code != ErrorCode.none:
        raise KafkaResponseError(
            response.error_code, response.error_message, "describe SCRAM credentials"
        )
    out: dict[str, tuple[Credential, ...]] = {}
    for result in response.results:
        if result.error_code == ErrorCode.resource_not_found:
            continue
        if result.error_code != ErrorCode.none:
            raise KafkaResponseError(
                result.error_code, result.error_message, f"describe user {result.user!r}"
            )
        known = [
            Credential(ScramMechanism(int(i.mechanism)), int(i.iterations))
            for i in result.credential_infos
            if int(i.mechanism) in ScramMechanism._value2member_map_
        ]
        out[str(result.user)] = tuple(sorted(known, key=lambda c: c.mechanism))
    return out


async def upsert_credential(
    admin: Admin, name: str, mechanism: ScramMechanism, password: str, iterations: int
) -> None:
    """Create or replace ``name``'s credential of ``mechanism``: a new random salt, the
    salted password computed here (off the event loop), both sent; the password is not."""
    salt = secrets.token_bytes(SALT_BYTES)
    salted = await asyncio.to_thread(salted_password, password, salt, iterations, mechanism)
    request = alter_scram.AlterUserScramCredentialsRequest(
        deletions=(),
        upsertions=(
            alter_scram.ScramCredentialUpsertion(
                name=name,
                mechanism=i8(int(mechanism)),
                iterations=i32(iterations),
                salt=salt,
                salted_password=salted,
            ),
        ),
    )
    await _alter(admin, request, f"set the {mechanism.kafka_name} credential of {name!r}")


async def delete_credential(admin: Admin, name: str, mechanism: ScramMechanism) -> None:
    """Remove ``name``'s credential of ``mechanism`` (RESOURCE_NOT_FOUND when it has none).
    One mechanism per request: Kafka refuses a user named twice in one request."""
    request = alter_scram.AlterUserScramCredentialsRequest(
        deletions=(alter_scram.ScramCredentialDeletion(name=name, mechanism=i8(int(mechanism))),),
        upsertions=(),
    )
    await _alter(admin, request, f"delete the {mechanism.kafka_name} credential of {name!r}")


async def _alter(admin: Admin, request: Any, what: str) -> None:
    response = await admin.call(request)
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise KafkaResponseError(result.error_code, result.error_message, what)


# ---------------------------------------------------------------------- ACLs


def _acl(  # noqa: PLR0917 - the seven fields of an ACL, in the protocol's order
    rtype: int, name: str, ptype: int, principal: str, host: str, op: int, perm: int
) -> Acl:
    return Acl(
        code_of(ResourceType, rtype),
        str(name),
        code_of(PatternType, ptype),
        str(principal),
        str(host),
        code_of(Operation, op),
        code_of(Permission, perm),
    )


async def describe(admin: Admin, selected: AclFilter) -> list[Acl]:
    """The ACLs ``selected`` selects, sorted."""
    request = describe_acls.DescribeAclsRequest(
        resource_type_filter=i8(int(selected.resource_type)),
        resource_name_filter=selected.resource_name,
        pattern_type_filter=i8(int(selected.pattern_type)),
        principal_filter=selected.principal,
        host_filter=selected.host,
        operation=i8(int(selected.operation)),
        permission_type=i8(int(selected.permission)),
    )
    response = await admin.call(request)
    if response.error_code != ErrorCode.none:
        raise KafkaResponseError(response.error_code, response.error_message, "describe ACLs")
    return sorted(
        _acl(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    )


async def create(admin: Admin, acl: Acl) -> None:
    """Add one ACL (the broker checks it; one identical to an existing ACL is kept once)."""
    request = create_acls.CreateAclsRequest(
        creations=(
            create_acls.AclCreation(
                resource_type=i8(int(acl.resource_type)),
                resource_name=acl.resource_name,
                resource_pattern_type=i8(int(acl.pattern_type)),
                principal=acl.principal,
                host=acl.host,
                operation=i8(int(acl.operation)),
                permission_type=i8(int(acl.permission)),
            ),
        )
    )
    response = await admin.call(request)
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise KafkaResponseError(result.error_code, result.error_message, "create ACL")


async def delete(admin: Admin, selected: AclFilter) -> list[Acl]:
    """Delete the ACLs ``selected`` selects; the ones deleted, sorted."""
    request = delete_acls.DeleteAclsRequest(
        filters=(
            delete_acls.DeleteAclsFilter(
                resource_type_filter=i8(int(selected.resource_type)),
                resource_name_filter=selected.resource_name,
                pattern_type_filter=i8(int(selected.pattern_type)),
                principal_filter=selected.principal,
                host_filter=selected.host,
                operation=i8(int(selected.operation)),
                permission_type=i8(int(selected.permission)),
            ),
        )
    )
    response = await admin.call(request)
    deleted: list[Acl] = []
    for result in response.filter_results:
        if result.error_code != ErrorCode.none:
            raise KafkaResponseError(result.error_code, result.error_message, "delete ACLs")
        for m in result.matching_acls:
            if m.error_code != ErrorCode.none:
                raise KafkaResponseError(m.error_code, m.error_message, "delete ACL")
            deleted.append(
                _acl(
                    m.resource_type,
                    m.resource_name,
                    m.pattern_type,
                    m.principal,
                    m.host,
                    m.operation,
                    m.permission_type,
                )
            )
    return sorted(set(deleted))
