"""``sluice_user`` and ``sluice_acl``: SCRAM users and Kafka ACLs of a cluster (the Users
and Acls services), as Redpanda's ``redpanda_user`` and ``redpanda_acl``.

The password is sensitive: Terraform hides it in plans, the provider never logs it, and the
control plane salts it and forgets it. It cannot be read back, so a password changed outside
Terraform is not seen as drift; a new password (or iteration count) in the configuration
re-sets the credential in place (removed, then created again: a moment without it).

ACLs exist only on a secured cluster (a `scram` or `tls` mode: the brokers then run an
authorizer). An ACL has no name: its import id is its fields,
``CLUSTER/RESOURCE_TYPE/PATTERN/RESOURCE_NAME/PRINCIPAL/HOST/OPERATION/PERMISSION`` (a ``/``
or ``%`` inside a name written ``%2F`` / ``%25``), e.g.
``main/TOPIC/LITERAL/orders/User:alice/*/READ/ALLOW``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from tf.schema import Attribute, Schema
from tf.types import Number, String
from tf.utils import Diagnostics

from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import security_pb2 as pb
from sluice_client.client import ApiError
from terraform.api import Api, ProviderError
from terraform.common import (
    Deadline,
    ResourceBase,
    State,
    Timeouts,
    blank,
    create_busy,
    given,
    id_parts,
    known,
    retry_busy,
)

MECHANISMS: dict[str, Any] = {"SCRAM-SHA-256": pb.SCRAM_SHA_256, "SCRAM-SHA-512": pb.SCRAM_SHA_512}
MECHANISM_NAME = {v: k for k, v in MECHANISMS.items()}
ITERATIONS = (4096, 16384)
"""Kafka's bounds of the PBKDF2 iterations of a SCRAM credential."""
GONE = (epb.CLUSTER_NOT_FOUND, epb.USER_NOT_FOUND)


def _enum(enum: Any, prefix: str, skip: tuple[str, ...]) -> dict[str, Any]:
    """The values of a protobuf enum as users write them (``TOPIC`` for
    RESOURCE_TYPE_TOPIC), without the filter-only ones."""
    names = {n.removeprefix(prefix): v for n, v in enum.items()}
    return {n: v for n, v in names.items() if n not in ("UNSPECIFIED", *skip)}


RESOURCE_TYPES = _enum(pb.ResourceType, "RESOURCE_TYPE_", ("ANY",))
PATTERNS = _enum(pb.PatternType, "PATTERN_TYPE_", ("ANY", "MATCH"))
OPERATIONS = _enum(pb.AclOperation, "ACL_OPERATION_", ("ANY",))
PERMISSIONS = _enum(pb.AclPermission, "ACL_PERMISSION_", ("ANY",))


def _id(description: str) -> Attribute:
    return Attribute("id", String(), description=description, computed=True)


def _cluster() -> Attribute:
    return Attribute(
        "cluster",
        String(),
        description="Name of the cluster; a new one replaces the resource.",
        required=True,
        requires_replace=True,
    )


def _one_of(diags: Diagnostics, config: State, field: str, allowed: Any) -> None:
    value = config.get(field)
    if known(value) and value not in allowed:
        diags.add_error(
            f"Invalid {field} {value!r}",
            f"Use one of: {', '.join(allowed)}.",
            path=[field],
        )


# ---------------------------------------------------------------------- users


class UserResource(ResourceBase):
    NAME = "user"
    TIMEOUTS = Timeouts(create=5 * 60, update=5 * 60, delete=5 * 60)
    SCHEMA = Schema(
        version=0,
        description="A SCRAM user of a cluster (Redpanda's `redpanda_user`, MSK's SCRAM "
        "secret). Import id: `CLUSTER/NAME` (the password cannot be read back: the first "
        "apply after an import sets it again, unless `lifecycle { ignore_changes = "
        "[password] }`).",
        attributes=[
            _id("`CLUSTER/NAME`."),
            _cluster(),
            Attribute(
                "name",
                String(),
                description="User name clients log in with (principal `User:NAME`).",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "password",
                String(),
                description="Password; sensitive (hidden in plans, never logged, salted by the "
                "control plane and never returned). A new one is set in place.",
                required=True,
                sensitive=True,
            ),
            Attribute(
                "mechanism",
                String(),
                description="`SCRAM-SHA-512` (default) or `SCRAM-SHA-256`; a new one replaces "
                "the user.",
                optional=True,
                computed=True,
                requires_replace=True,
            ),
            Attribute(
                "iterations",
                Number(),
                description=f"PBKDF2 iterations, {ITERATIONS[0]} (default) to {ITERATIONS[1]}; "
                "changed in place (the credential is set again).",
                optional=True,
                computed=True,
            ),
        ],
        block_types=[TIMEOUTS.block()],
    )

    def check(self, diags: Diagnostics, config: State) -> None:
        _one_of(diags, config, "mechanism", MECHANISMS)
        count = config.get("iterations")
        if known(count) and not ITERATIONS[0] <= count <= ITERATIONS[1]:
            diags.add_error(
                f"iterations must be between {ITERATIONS[0]} and {ITERATIONS[1]}, not {count}",
                "Kafka refuses other counts; leave it out for 4096.",
                path=["iterations"],
            )

    def state_of(self, user: pb.User, mechanism: int, prior: State | None) -> State | None:
        """The state of ``user``'s credential of ``mechanism`` (its only one when 0); None
        when it has none."""
        found = [c for c in user.credentials if c.mechanism == mechanism or not mechanism]
        if not found:
            return None
        prior = prior or {}
        state = blank(self.SCHEMA)
        state.update(
            id=f"{user.cluster}/{user.name}",
            cluster=user.cluster,
            name=user.name,
            password=prior.get("password"),
            mechanism=MECHANISM_NAME.get(found[0].mechanism, str(found[0].mechanism)),
            iterations=found[0].iterations,
            timeouts=prior.get("timeouts"),
        )
        return state

    def find(self, api: Api, cluster: str, name: str) -> pb.User | None:
        try:
            reply = api.call(api.users.ListUsers, pb.ListUsersRequest(cluster=cluster))
        except ApiError as exc:
            if exc.reason == epb.CLUSTER_NOT_FOUND:
                return None
            raise
        return next((u for u in reply.users if u.name == name), None)

    def _set(self, api: Api, state: State, deadline: Deadline) -> pb.User:
        request = pb.CreateUserRequest(
            cluster=state["cluster"],
            name=state["name"],
            mechanism=MECHANISMS[given(state, "mechanism") or "SCRAM-SHA-512"],
            password=state["password"],
        )
        if known(state.get("iterations")):
            request.iterations = int(state["iterations"])
        user = create_busy(api, deadline, lambda: api.call(api.users.CreateUser, request))
        if user is None:
            user = self.find(api, request.cluster, request.name)
        if user is None:
            raise ProviderError(
                f"User {request.name!r} vanished while it was created",
                "Something deleted it meanwhile; apply again.",
            )
        return user

    def do_create(self, planned: State) -> State:
        api = self.api()
        deadline = Deadline(self.TIMEOUTS.of(planned, "create"), "create")
        user = self._set(api, planned, deadline)
        mechanism = MECHANISMS[given(planned, "mechanism") or "SCRAM-SHA-512"]
        state = self.state_of(user, mechanism, planned)
        if state is None:
            raise ProviderError(
                f"User {planned['name']!r} has no credential after its creation",
                "Apply again; `cloudctl list-users` shows the cluster's users.",
            )
        return state

    def do_read(self, current: State) -> State | None:
        user = self.find(self.api(), current["cluster"], current["name"])
        if user is None:
            return None
        mechanism = MECHANISMS.get(current.get("mechanism") or "", 0)
        return self.state_of(user, mechanism, current) or self.state_of(user, 0, current)

    def do_update(self, current: State, planned: State) -> State:
        api = self.api()
        deadline = Deadline(self.TIMEOUTS.of(planned, "update"), "update")
        mechanism = MECHANISMS[current["mechanism"]]
        if (planned["password"], planned.get("iterations")) != (
            current.get("password"),
            current.get("iterations"),
        ):
            self._remove(api, current, deadline)
            user = self._set(api, planned, deadline)
            return self.state_of(user, mechanism, planned) or planned
        return {**current, "timeouts": planned.get("timeouts")}

    def _remove(self, api: Api, state: State, deadline: Deadline) -> None:
        request = pb.DeleteUserRequest(
            cluster=state["cluster"],
            name=state["name"],
            mechanism=MECHANISMS.get(state.get("mechanism") or "", 0),
        )
        try:
            retry_busy(api, deadline, lambda: api.call(api.users.DeleteUser, request))
        except ApiError as exc:
            if exc.reason not in GONE:
                raise

    def do_delete(self, current: State) -> None:
        deadline = Deadline(self.TIMEOUTS.of(current, "delete"), "delete")
        self._remove(self.api(), current, deadline)

    def do_import(self, id_: str) -> State | None:
        cluster, name = id_parts(id_, ("cluster", "name"), "sluice_user")
        user = self.find(self.api(), cluster, name)
        return None if user is None else self.state_of(user, 0, None)


# ---------------------------------------------------------------------- ACLs

ACL_FIELDS = (
    "resource_type",
    "resource_pattern_type",
    "resource_name",
    "principal",
    "host",
    "operation",
    "permission_type",
)
"""The fields of an ACL's import id after the cluster, in order."""


def _choice(name: str, allowed: dict[str, Any], description: str, default: str = "") -> Attribute:
    text = f"{description} One of: {', '.join(allowed)}."
    if default:
        text += f" Default `{default}`."
    return Attribute(
        name,
        String(),
        description=text + " A new value replaces the ACL.",
        required=not default,
        optional=bool(default),
        computed=bool(default),
        requires_replace=True,
    )


def acl_id(state: State) -> str:
    return "/".join([state["cluster"], *(quote(str(state[f]), safe=":*=,@") for f in ACL_FIELDS)])


class AclResource(ResourceBase):
    NAME = "acl"
    TIMEOUTS = Timeouts(create=5 * 60, update=5 * 60, delete=5 * 60)
    SCHEMA = Schema(
        version=0,
        description="A Kafka ACL of a secured cluster (Redpanda's `redpanda_acl`). Import id: "
        "`CLUSTER/RESOURCE_TYPE/PATTERN/RESOURCE_NAME/PRINCIPAL/HOST/OPERATION/PERMISSION`, "
        "e.g. `main/TOPIC/LITERAL/orders/User:alice/*/READ/ALLOW` (`%2F` for a `/` in a name).",
        attributes=[
            _id("The import id (the ACL's fields, see above)."),
            _cluster(),
            _choice("resource_type", RESOURCE_TYPES, "What the ACL is about."),
            Attribute(
                "resource_name",
                String(),
                description="The resource's name (`kafka-cluster` for CLUSTER; `*`: every "
                "resource of the type). A new value replaces the ACL.",
                required=True,
                requires_replace=True,
            ),
            _choice(
                "resource_pattern_type",
                PATTERNS,
                "How `resource_name` matches: the name itself, or every name it prefixes.",
                "LITERAL",
            ),
            Attribute(
                "principal",
                String(),
                description="`User:NAME` (`User:CN=...` for a TLS client; `User:*` every "
                "user). A new value replaces the ACL.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "host",
                String(),
                description="Client IP address, `*` (default) for every host. A new value "
                "replaces the ACL.",
                optional=True,
                computed=True,
                requires_replace=True,
            ),
            _choice("operation", OPERATIONS, "The operation allowed or denied."),
            _choice("permission_type", PERMISSIONS, "Allow or deny.", "ALLOW"),
        ],
        block_types=[TIMEOUTS.block()],
    )

    def check(self, diags: Diagnostics, config: State) -> None:
        _one_of(diags, config, "resource_type", RESOURCE_TYPES)
        _one_of(diags, config, "resource_pattern_type", PATTERNS)
        _one_of(diags, config, "operation", OPERATIONS)
        _one_of(diags, config, "permission_type", PERMISSIONS)

    def binding(self, state: State) -> pb.AclBinding:
        return pb.AclBinding(
            resource_type=RESOURCE_TYPES[state["resource_type"]],
            resource_name=state["resource_name"],
            pattern_type=PATTERNS[given(state, "resource_pattern_type") or "LITERAL"],
            principal=state["principal"],
            host=given(state, "host") or "*",
            operation=OPERATIONS[state["operation"]],
            permission=PERMISSIONS[given(state, "permission_type") or "ALLOW"],
        )

    def exact(self, binding: pb.AclBinding) -> pb.AclFilter:
        return pb.AclFilter(
            resource_type=binding.resource_type,
            resource_name=binding.resource_name,
            pattern_type=binding.pattern_type,
            principal=binding.principal,
            host=binding.host,
            operation=binding.operation,
            permission=binding.permission,
        )

    def state_of(self, cluster: str, acl: pb.AclBinding, prior: State | None) -> State:
        state = blank(self.SCHEMA)
        state.update(
            cluster=cluster,
            resource_type=pb.ResourceType.Name(acl.resource_type).removeprefix("RESOURCE_TYPE_"),
            resource_name=acl.resource_name,
            resource_pattern_type=pb.PatternType.Name(acl.pattern_type).removeprefix(
                "PATTERN_TYPE_"
            ),
            principal=acl.principal,
            host=acl.host,
            operation=pb.AclOperation.Name(acl.operation).removeprefix("ACL_OPERATION_"),
            permission_type=pb.AclPermission.Name(acl.permission).removeprefix("ACL_PERMISSION_"),
            timeouts=(prior or {}).get("timeouts"),
        )
        state["id"] = acl_id(state)
        return state

    def find(self, api: Api, cluster: str, binding: pb.AclBinding) -> pb.AclBinding | None:
        request = pb.ListAclsRequest(cluster=cluster, filter=self.exact(binding))
        try:
            reply = api.call(api.acls.ListAcls, request)
        except ApiError as exc:
            if exc.reason == epb.CLUSTER_NOT_FOUND:
                return None
            raise
        return next(iter(reply.acls), None)

    def do_create(self, planned: State) -> State:
        api = self.api()
        deadline = Deadline(self.TIMEOUTS.of(planned, "create"), "create")
        request = pb.CreateAclRequest(cluster=planned["cluster"], acl=self.binding(planned))
        acl = retry_busy(api, deadline, lambda: api.call(api.acls.CreateAcl, request))
        return self.state_of(planned["cluster"], acl, planned)

    def do_read(self, current: State) -> State | None:
        acl = self.find(self.api(), current["cluster"], self.binding(current))
        return None if acl is None else self.state_of(current["cluster"], acl, current)

    def do_update(self, current: State, planned: State) -> State:
        return {**current, "timeouts": planned.get("timeouts")}  # every field replaces

    def do_delete(self, current: State) -> None:
        api = self.api()
        deadline = Deadline(self.TIMEOUTS.of(current, "delete"), "delete")
        request = pb.DeleteAclsRequest(
            cluster=current["cluster"], filter=self.exact(self.binding(current))
        )
        try:
            retry_busy(api, deadline, lambda: api.call(api.acls.DeleteAcls, request))
        except ApiError as exc:
            if exc.reason != epb.CLUSTER_NOT_FOUND:
                raise

    def do_import(self, id_: str) -> State | None:
        parts = [unquote(p) for p in id_parts(id_, ("cluster", *ACL_FIELDS), "sluice_acl")]
        fields = dict(zip(("cluster", *ACL_FIELDS), parts, strict=True))
        for field, allowed in (
            ("resource_type", RESOURCE_TYPES),
            ("resource_pattern_type", PATTERNS),
            ("operation", OPERATIONS),
            ("permission_type", PERMISSIONS),
        ):
            fields[field] = fields[field].upper()
            if fields[field] not in allowed:
                raise ProviderError(
                    f"Invalid {field} {parts[ACL_FIELDS.index(field) + 1]!r} in import id {id_!r}",
                    f"Use one of: {', '.join(allowed)}.",
                )
        acl = self.find(self.api(), fields["cluster"], self.binding(fields))
        return None if acl is None else self.state_of(fields["cluster"], acl, None)
