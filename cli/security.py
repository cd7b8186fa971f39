"""User and ACL commands (the Users and Acls services): SCRAM users, as kafka-configs.sh and
MSK's BatchAssociateScramSecret give them, and Kafka ACLs, as kafka-acls.sh manages them.
Their output (JSON with the fields of the gRPC messages, tables) is here too.

A password is read from stdin only (``--password-stdin``; a prompt without echo on a
terminal), never taken as an option: a command line is visible to every user of the
machine. It is sent once to the control plane, which salts it; nothing prints it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli.client import Api, ApiError, Env, explain
from cli.options import cluster_option, confirm, delete_options, output_option, parse_settings
from cli.output import CliError, emit, fields, progress, table
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import security_pb2 as pb
from proto.sluice.v1 import security_pb2_grpc as pb_grpc

F = TypeVar("F", bound=Callable[..., Any])

ADMIN_TIMEOUT = 60.0
MECHANISMS = {"SCRAM-SHA-256": pb.SCRAM_SHA_256, "SCRAM-SHA-512": pb.SCRAM_SHA_512}
USER_SETTINGS = ("iterations",)
"""What ``create-user --config`` takes (kafka-configs.sh's key for the SCRAM iterations)."""
OPERATIONS = (
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
)
"""The operations an ACL names (Kafka's; kafka-acls' spellings such as DescribeConfigs or
describe-configs are accepted too)."""
CREATE_PATTERNS = ("literal", "prefixed")
FILTER_PATTERNS = ("literal", "prefixed", "any", "match")
RESOURCE_OPTIONS = "--topic T, --group G, --cluster-resource or --transactional-id X"
CLUSTER_RESOURCE = "kafka-cluster"


# ---------------------------------------------------------------------- names


def mechanism_name(number: int) -> str:
    return pb.ScramMechanism.Name(number).replace("_", "-")


def short_name(enum: Any, number: int, prefix: str) -> str:
    """An enum value as users read it: ``TOPIC`` for RESOURCE_TYPE_TOPIC."""
    return str(enum.Name(number)).removeprefix(prefix)


def acl_json(acl: pb.AclBinding) -> dict[str, Any]:
    return {
        "resource_type": short_name(pb.ResourceType, acl.resource_type, "RESOURCE_TYPE_"),
        "resource_name": acl.resource_name,
        "pattern_type": short_name(pb.PatternType, acl.pattern_type, "PATTERN_TYPE_"),
        "principal": acl.principal,
        "host": acl.host,
        "operation": short_name(pb.AclOperation, acl.operation, "ACL_OPERATION_"),
        "permission": short_name(pb.AclPermission, acl.permission, "ACL_PERMISSION_"),
    }


def acls_table(acls: list[pb.AclBinding]) -> str:
    rows = [acl_json(a) for a in acls]
    return table(
        ["PRINCIPAL", "PERMISSION", "OPERATION", "HOST", "RESOURCE", "NAME", "PATTERN"],
        [
            [
                r["principal"],
                r["permission"],
                r["operation"],
                r["host"],
                r["resource_type"],
                r["resource_name"],
                r["pattern_type"],
            ]
            for r in rows
        ],
    )


def user_json(user: pb.User) -> dict[str, Any]:
    return {
        "cluster": user.cluster,
        "name": user.name,
        "credentials": [
            {"mechanism": mechanism_name(c.mechanism), "iterations": c.iterations}
            for c in user.credentials
        ],
    }


def users_table(users: list[pb.User]) -> str:
    return table(
        ["NAME", "MECHANISM", "ITERATIONS"],
        [[u.name, mechanism_name(c.mechanism), c.iterations] for u in users for c in u.credentials],
    )


# ---------------------------------------------------------------------- calls


def _stubs(api: Api) -> tuple[Any, Any]:
    channel = api.client.channel
    return pb_grpc.UsersStub(channel), pb_grpc.AclsStub(channel)


def _explain(exc: ApiError, env: Env) -> CliError:
    """The errors of users told apart by their reason; the others as every command."""
    cluster = exc.metadata.get("cluster", "CLUSTER")
    user = exc.metadata.get("user", "NAME")
    if exc.reason == epb.USER_NOT_FOUND:
        return CliError(exc.message, f"list users with `cloudctl list-users --cluster {cluster}`")
    if exc.reason == epb.USER_ALREADY_EXISTS:
        return CliError(
            exc.message,
            f"delete it first with `cloudctl delete-user --cluster {cluster} {user}`, or give "
            "another --mechanism",
        )
    return explain(exc, env)


def _call(api: Api, method: Callable[..., Any], request: Any) -> Any:
    try:
        return api.try_call(method, request, ADMIN_TIMEOUT)
    except ApiError as exc:
        raise _explain(exc, api.env) from None


# ---------------------------------------------------------------------- users


def read_password(password_stdin: bool) -> str:
    """The password: one line of stdin (its line end dropped), or typed at a prompt that
    does not echo, twice, when stdin is a terminal."""
    if not password_stdin:
        raise click.UsageError(
            "give the password on stdin with --password-stdin (never as an option: a "
            "command line is visible to every user of the machine)"
        )
    if sys.stdin.isatty():
        typed: str = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
        password = typed
    else:
        text = sys.stdin.read()
        password = text.removesuffix("\n").removesuffix("\r")
        if "\n" in password:
            raise click.UsageError("stdin holds more than one line: give only the password")
    if not password:
        raise click.UsageError("the password is empty: give it on stdin")
    return password


@click.command("create-user")
@cluster_option
@click.argument("name")
@click.option(
    "--mechanism",
    type=click.Choice(list(MECHANISMS), case_sensitive=False),
    default="SCRAM-SHA-512",
    show_default=True,
    help="SASL/SCRAM mechanism the user logs in with.",
)
@click.option(
    "--iterations",
    type=int,
    metavar="N",
    help="PBKDF2 iterations of the credential, 4096-16384 (default 4096).",
)
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from stdin (a prompt without echo on a terminal); required.",
)
@click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="iterations=N (kafka-configs' name; the same as --iterations); repeatable.",
)
@output_option
@click.pass_obj
def create_user(
    env: Env,
    *,
    cluster: str,
    name: str,
    mechanism: str,
    iterations: int | None,
    password_stdin: bool,
    settings: tuple[str, ...],
    output: str,
) -> None:
    """Create a SASL/SCRAM user: clients log in as NAME with its password.

    The password comes from stdin only (`echo "$PW" | cloudctl create-user ... --password-stdin`),
    salted by the control plane; the brokers keep only the SCRAM keys derived from it."""
    config = parse_settings(settings, "--config")
    unknown = sorted(set(config) - set(USER_SETTINGS))
    if unknown:
        raise click.BadParameter(
            f"unknown user setting {unknown[0]!r} (known: {', '.join(USER_SETTINGS)})",
            param_hint="--config",
        )
    if "iterations" in config:
        try:
            from_config = int(config["iterations"])
        except ValueError:
            raise click.BadParameter(
                f"iterations must be a number, got {config['iterations']!r}",
                param_hint="--config",
            ) from None
        if iterations is not None and iterations != from_config:
            raise click.UsageError("--iterations and --config iterations= disagree")
        iterations = from_config
    password = read_password(password_stdin)
    request = pb.CreateUserRequest(
        cluster=cluster, name=name, mechanism=MECHANISMS[mechanism.upper()], password=password
    )
    if iterations is not None:
        request.iterations = iterations
    api = Api(env)
    users, _ = _stubs(api)
    user = _call(api, users.CreateUser, request)
    credentials = ", ".join(
        f"{mechanism_name(c.mechanism)} ({c.iterations} iterations)" for c in user.credentials
    )
    emit(
        output,
        user_json(user),
        lambda: fields([("user", user.name), ("cluster", cluster), ("credentials", credentials)]),
    )


@click.command("list-users")
@cluster_option
@output_option
@click.pass_obj
def list_users(env: Env, *, cluster: str, output: str) -> None:
    """SCRAM users of a cluster with their mechanisms and iterations (never a password)."""
    api = Api(env)
    users, _ = _stubs(api)
    reply = _call(api, users.ListUsers, pb.ListUsersRequest(cluster=cluster))
    emit(
        output,
        {"cluster": cluster, "users": [user_json(u) for u in reply.users]},
        lambda: users_table(list(reply.users)),
    )


@click.command("delete-user")
@cluster_option
@click.argument("name")
@delete_options
@output_option
@click.pass_obj
def delete_user(
    env: Env, *, cluster: str, name: str, yes: bool, if_exists: bool, output: str
) -> None:
    """Delete a SCRAM user (every mechanism): it can no longer log in.

    Its ACLs stay (delete them with `cloudctl delete-acl --principal User:NAME`)."""
    result: dict[str, Any] = {
        "cluster": cluster,
        "name": name,
        "existed": True,
        "deleted": False,
        "mechanisms": [],
    }
    confirm(f"Delete user {name!r} of cluster {cluster!r}? Its clients can no longer log in.", yes)
    api = Api(env)
    users, _ = _stubs(api)
    try:
        reply = api.try_call(
            users.DeleteUser, pb.DeleteUserRequest(cluster=cluster, name=name), ADMIN_TIMEOUT
        )
    except ApiError as exc:
        if exc.reason != epb.USER_NOT_FOUND or not if_exists:
            raise _explain(exc, env) from None
        progress(f"cloudctl: note: user {name!r} does not exist; nothing to delete")
        emit(output, {**result, "existed": False}, f"user {name!r} does not exist")
        return
    result["deleted"] = True
    result["mechanisms"] = [mechanism_name(m) for m in reply.deleted]
    emit(output, result, f"user {name!r} deleted from cluster {cluster!r}")


# ---------------------------------------------------------------------- ACLs


class OperationName(click.ParamType):
    """An ACL operation: Kafka's name in any case, with - or _ (``describe-configs``), or
    kafka-acls' CamelCase (``DescribeConfigs``)."""

    name = "operation"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "OP"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip()
        if re.fullmatch(r"[A-Z][a-z]+(?:[A-Z][a-z]+)+", text):  # DescribeConfigs
            text = re.sub(r"(?<!^)(?=[A-Z])", "_", text)
        normal = text.upper().replace("-", "_")
        if normal not in OPERATIONS:
            self.fail(f"{value!r} is not an ACL operation (one of: {', '.join(OPERATIONS)})")
        return normal


def acl_options(*, create: bool) -> Callable[[F], F]:
    """The resource, principal, host, operation, pattern and permission options of
    create-acl (a binding) and of list-acls / delete-acl (a filter)."""

    def decorate(func: F) -> F:
        def say(binding: str, selection: str) -> str:
            return binding if create else selection

        options = [
            click.option(
                "--topic",
                metavar="T",
                help=say("On topic T (`*`: every topic).", "ACLs of topic T."),
            ),
            click.option(
                "--group",
                metavar="G",
                help=say("On consumer group G (`*`: every group).", "ACLs of group G."),
            ),
            click.option(
                "--cluster-resource",
                is_flag=True,
                help=say("On the cluster itself (kafka-cluster).", "ACLs of the cluster itself."),
            ),
            click.option(
                "--transactional-id",
                metavar="X",
                help=say("On transactional id X (`*`: every one).", "ACLs of transactional id X."),
            ),
            click.option(
                "--principal",
                metavar="User:NAME",
                required=create,
                help=say("Who: User:NAME (User:* is every user).", "ACLs of this principal."),
            ),
            click.option(
                "--operation",
                type=OperationName(),
                required=create,
                help=say("What: ", "ACLs of this operation: ") + ", ".join(OPERATIONS) + ".",
            ),
            click.option(
                "--pattern",
                type=click.Choice(
                    CREATE_PATTERNS if create else FILTER_PATTERNS, case_sensitive=False
                ),
                default="literal" if create else "any",
                show_default=True,
                help="literal: the name itself; prefixed: every name starting with it"
                + say(".", "; any: both, of this name; match: every ACL that applies to it."),
            ),
            click.option(
                "--host",
                metavar="H",
                help=say("The client address it applies to (default: *).", "ACLs of host H."),
            ),
            click.option(
                "--deny",
                is_flag=True,
                help=say("A DENY ACL (DENY beats ALLOW); default ALLOW.", "DENY ACLs only."),
            ),
        ]
        if not create:
            options.append(click.option("--allow", is_flag=True, help="ALLOW ACLs only."))
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def resource_of(
    topic: str | None, group: str | None, cluster_resource: bool, transactional_id: str | None
) -> tuple[pb.ResourceType, str | None]:
    """The resource type and name the options give (UNSPECIFIED, None: none given); more
    than one is a usage error."""
    given = [
        (flag, rtype, name)
        for flag, rtype, name in (
            ("--topic", pb.RESOURCE_TYPE_TOPIC, topic),
            ("--group", pb.RESOURCE_TYPE_GROUP, group),
            (
                "--cluster-resource",
                pb.RESOURCE_TYPE_CLUSTER,
                CLUSTER_RESOURCE if cluster_resource else None,
            ),
            ("--transactional-id", pb.RESOURCE_TYPE_TRANSACTIONAL_ID, transactional_id),
        )
        if name is not None
    ]
    if len(given) > 1:
        raise click.UsageError(
            f"give one resource: {RESOURCE_OPTIONS} (got {', '.join(g[0] for g in given)})"
        )
    if not given:
        return pb.RESOURCE_TYPE_UNSPECIFIED, None
    return given[0][1], given[0][2]


PATTERNS: dict[str, pb.PatternType] = {
    "any": pb.PATTERN_TYPE_ANY,
    "match": pb.PATTERN_TYPE_MATCH,
    "literal": pb.PATTERN_TYPE_LITERAL,
    "prefixed": pb.PATTERN_TYPE_PREFIXED,
}
OPERATION_CODES: dict[str, pb.AclOperation] = {
    name.removeprefix("ACL_OPERATION_"): value
    for name, value in pb.AclOperation.items()
    if value != pb.ACL_OPERATION_UNSPECIFIED
}
"""Kafka's operation names (READ, WRITE, ...) to the API's enum."""


def pattern_of(name: str) -> pb.PatternType:
    return PATTERNS[name.lower()]


def acl_filter(
    *,
    topic: str | None,
    group: str | None,
    cluster_resource: bool,
    transactional_id: str | None,
    principal: str | None,
    operation: str | None,
    pattern: str,
    host: str | None,
    deny: bool,
    allow: bool,
) -> pb.AclFilter:
    if deny and allow:
        raise click.UsageError("give --allow or --deny, not both")
    rtype, name = resource_of(topic, group, cluster_resource, transactional_id)
    selected = pb.AclFilter(
        resource_type=rtype,
        pattern_type=pattern_of(pattern),
        operation=OPERATION_CODES[operation] if operation else pb.ACL_OPERATION_ANY,
        permission=pb.ACL_PERMISSION_DENY
        if deny
        else pb.ACL_PERMISSION_ALLOW
        if allow
        else pb.ACL_PERMISSION_ANY,
    )
    if name is not None:
        selected.resource_name = name
    if principal is not None:
        selected.principal = principal
    if host is not None:
        selected.host = host
    return selected


def filter_text(selected: pb.AclFilter) -> str:
    """A filter as a sentence: ``TOPIC 'orders' (ANY pattern), principal User:bob``."""
    parts = []
    if selected.resource_type != pb.RESOURCE_TYPE_UNSPECIFIED:
        kind = short_name(pb.ResourceType, selected.resource_type, "RESOURCE_TYPE_")
        parts.append(f"{kind} {selected.resource_name!r}")
    parts.append(f"pattern {short_name(pb.PatternType, selected.pattern_type, 'PATTERN_TYPE_')}")
    if selected.HasField("principal"):
        parts.append(f"principal {selected.principal}")
    if selected.operation != pb.ACL_OPERATION_ANY:
        parts.append(
            f"operation {short_name(pb.AclOperation, selected.operation, 'ACL_OPERATION_')}"
        )
    if selected.permission != pb.ACL_PERMISSION_ANY:
        parts.append(short_name(pb.AclPermission, selected.permission, "ACL_PERMISSION_"))
    if selected.HasField("host"):
        parts.append(f"host {selected.host}")
    return ", ".join(parts)


@click.command("create-acl")
@cluster_option
@acl_options(create=True)
@click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    hidden=True,
    help="ACLs have no settings: every key is refused.",
)
@output_option
@click.pass_obj
def create_acl(
    env: Env,
    *,
    cluster: str,
    topic: str | None,
    group: str | None,
    cluster_resource: bool,
    transactional_id: str | None,
    principal: str,
    operation: str,
    pattern: str,
    host: str | None,
    deny: bool,
    settings: tuple[str, ...],
    output: str,
) -> None:
    """Allow (or with --deny, deny) a principal an operation on one resource.

    Exactly one of --topic, --group, --cluster-resource, --transactional-id. The operation
    must be one the resource has (kafka-acls' rule); READ, WRITE, DELETE and ALTER imply
    DESCRIBE, and DENY beats ALLOW."""
    if settings:
        key = next(iter(parse_settings(settings, "--config")))
        raise click.BadParameter(f"ACLs have no settings (got {key!r})", param_hint="--config")
    rtype, name = resource_of(topic, group, cluster_resource, transactional_id)
    if name is None:
        raise click.UsageError(f"You must provide at least one resource: {RESOURCE_OPTIONS}")
    binding = pb.AclBinding(
        resource_type=rtype,
        resource_name=name,
        pattern_type=pattern_of(pattern),
        principal=principal,
        host=host if host is not None else "*",
        operation=OPERATION_CODES[operation],
        permission=pb.ACL_PERMISSION_DENY if deny else pb.ACL_PERMISSION_ALLOW,
    )
    api = Api(env)
    _, acls = _stubs(api)
    created = _call(api, acls.CreateAcl, pb.CreateAclRequest(cluster=cluster, acl=binding))
    emit(output, {"cluster": cluster, **acl_json(created)}, lambda: acls_table([created]))


@click.command("list-acls")
@cluster_option
@acl_options(create=False)
@output_option
@click.pass_obj
def list_acls(env: Env, *, cluster: str, output: str, **options: Any) -> None:
    """ACLs of a cluster, all or those the options select.

    --pattern any (the default) selects ACLs of the name given, literal or prefixed; match
    selects every ACL that applies to it (the `*` wildcard and prefixes included)."""
    selected = acl_filter(**options)
    api = Api(env)
    _, acls = _stubs(api)
    reply = _call(api, acls.ListAcls, pb.ListAclsRequest(cluster=cluster, filter=selected))
    emit(
        output,
        {"cluster": cluster, "acls": [acl_json(a) for a in reply.acls]},
        lambda: acls_table(list(reply.acls)),
    )


@click.command("delete-acl")
@cluster_option
@acl_options(create=False)
@delete_options
@output_option
@click.pass_obj
def delete_acl(
    env: Env, *, cluster: str, yes: bool, if_exists: bool, output: str, **options: Any
) -> None:
    """Delete the ACLs the options select (a resource or --principal at least).

    Nothing selected is an error unless --if-exists. --pattern match deletes every ACL that
    applies to the resource: use it with care."""
    selected = acl_filter(**options)
    if selected.resource_type == pb.RESOURCE_TYPE_UNSPECIFIED and not selected.HasField(
        "principal"
    ):
        raise click.UsageError(
            f"say which ACLs to delete: a resource ({RESOURCE_OPTIONS}) or --principal"
        )
    described = filter_text(selected)
    confirm(f"Delete the ACLs of cluster {cluster!r} selected by {described}?", yes)
    api = Api(env)
    _, acls = _stubs(api)
    reply = _call(api, acls.DeleteAcls, pb.DeleteAclsRequest(cluster=cluster, filter=selected))
    deleted = [acl_json(a) for a in reply.deleted]
    result = {"cluster": cluster, "existed": bool(deleted), "deleted": deleted}
    if not deleted:
        if not if_exists:
            raise CliError(
                f"no ACL of cluster {cluster!r} matches {described}; nothing was deleted",
                f"list them with `cloudctl list-acls --cluster {cluster}`, or add --if-exists",
            )
        progress(f"cloudctl: note: no ACL matches {described}; nothing to delete")
        emit(output, result, "no ACL deleted")
        return
    emit(
        output, result, lambda: f"{len(deleted)} ACL(s) deleted\n" + acls_table(list(reply.deleted))
    )


COMMANDS = [create_user, list_users, delete_user, create_acl, list_acls, delete_acl]
