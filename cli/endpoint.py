"""Private endpoint commands (the Endpoints service), as MSK's multi-VPC private connectivity
and Redpanda Cloud's private links: a named listener on every broker of a cluster, bound to
a loopback address of its own and advertised under its own name, so a client that bootstraps
through it learns only its addresses. Their output (JSON with the fields of the gRPC
messages, tables) is here too.

Creating or deleting one restarts the brokers one at a time (operation UPDATE_CONNECTIVITY);
``--wait`` shows that as cluster commands do (``cluster.wait_for``).
"""

from __future__ import annotations

from typing import Any

import click

from cli.client import Api, ApiError, Env, explain
from cli.cluster import CLIENT_AUTH, idle, wait_for
from cli.options import (
    cluster_option,
    confirm,
    delete_options,
    output_option,
    parse_settings,
    timeout_option,
    wait_option,
)
from cli.output import CliError, client_auth_name, emit, fields, progress, rfc3339, table
from proto.sluice.v1 import endpoints_pb2 as pb
from proto.sluice.v1 import endpoints_pb2_grpc as pb_grpc
from proto.sluice.v1 import errors_pb2 as epb


def state_name(value: int) -> str:
    return str(pb.PrivateEndpointState.Name(value)).removeprefix("PRIVATE_ENDPOINT_STATE_")


def endpoint_json(endpoint: pb.PrivateEndpoint) -> dict[str, Any]:
    return {
        "cluster": endpoint.cluster,
        "name": endpoint.name,
        "state": state_name(endpoint.state),
        "client_auth": client_auth_name(endpoint.client_auth),
        "listener_name": endpoint.listener_name,
        "security_protocol": endpoint.security_protocol,
        "address": endpoint.address,
        "allowed_principals": list(endpoint.allowed_principals),
        "brokers": [
            {"broker_id": b.broker_id, "port": b.port, "address": b.address}
            for b in endpoint.brokers
        ],
        "bootstrap_brokers": endpoint.bootstrap_brokers,
        "created_at": rfc3339(endpoint.created_at),
        "operation_id": endpoint.operation_id,
    }


def allowed_text(endpoint: pb.PrivateEndpoint) -> str:
    return ", ".join(endpoint.allowed_principals) or "every principal"


def endpoint_table(endpoint: pb.PrivateEndpoint) -> str:
    mode = client_auth_name(endpoint.client_auth).lower()
    pairs: list[tuple[str, object]] = [
        ("private endpoint", endpoint.name),
        ("cluster", endpoint.cluster),
        ("state", state_name(endpoint.state)),
        ("client auth", f"{mode} ({endpoint.security_protocol})"),
        ("listener", endpoint.listener_name),
        ("address", endpoint.address),
        ("allowed", allowed_text(endpoint)),
        ("bootstrap", endpoint.bootstrap_brokers or "-"),
        ("created", rfc3339(endpoint.created_at)),
    ]
    if endpoint.operation_id:
        pairs.append(("operation", endpoint.operation_id))
    brokers = table(["BROKER", "ADDRESS"], [(b.broker_id, b.address) for b in endpoint.brokers])
    return f"{fields(pairs)}\n\n{brokers}"


def endpoints_table(endpoints: list[pb.PrivateEndpoint]) -> str:
    if not endpoints:
        return "no private endpoints"
    return table(
        ["NAME", "STATE", "AUTH", "ADDRESS", "ALLOWED", "BOOTSTRAP"],
        [
            (
                e.name,
                state_name(e.state),
                client_auth_name(e.client_auth).lower(),
                e.address,
                allowed_text(e),
                e.bootstrap_brokers or "-",
            )
            for e in endpoints
        ],
    )


# ---------------------------------------------------------------------- calls


def _stub(api: Api) -> Any:
    return pb_grpc.EndpointsStub(api.client.channel)


def _started(endpoint: pb.PrivateEndpoint) -> None:
    if endpoint.operation_id:
        progress(
            f"operation {endpoint.operation_id} (UPDATE_CONNECTIVITY) started; follow it with "
            f"`cloudctl describe-operation {endpoint.operation_id}`"
        )


# ---------------------------------------------------------------------- commands


@click.command("create-private-endpoint")
@cluster_option
@click.argument("name")
@click.option(
    "--auth",
    type=click.Choice(list(CLIENT_AUTH)),
    default=None,
    help="How its clients authenticate: none (PLAINTEXT), scram (SASL_SSL, SCRAM-SHA-512) or "
    "tls (SSL, client certificates); one of the cluster's modes (default: its first).",
)
@click.option(
    "--allow-principal",
    "allowed",
    multiple=True,
    metavar="User:NAME",
    help="Admit only this principal (a SCRAM user, or User:<certificate subject>); "
    "repeatable. Default: every principal.",
)
@click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    hidden=True,
    help="Private endpoints have no settings: every key is refused.",
)
@wait_option
@timeout_option
@output_option
@click.pass_obj
def create_private_endpoint(
    env: Env,
    *,
    cluster: str,
    name: str,
    auth: str | None,
    allowed: tuple[str, ...],
    settings: tuple[str, ...],
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Create a private endpoint: a listener of its own on every broker, at an address of its own.

    The brokers restart one at a time to open it. Clients bootstrap through it with
    `cloudctl get-bootstrap-brokers C --endpoint NAME` and learn only its addresses; with
    --allow-principal every other principal is refused there, even with valid credentials.
    """
    if settings:
        key = next(iter(parse_settings(settings, "--config")))
        raise click.BadParameter(
            f"private endpoints have no settings (got {key!r})", param_hint="--config"
        )
    api = Api(env)
    stub = _stub(api)
    request = pb.CreatePrivateEndpointRequest(
        cluster=cluster, name=name, allowed_principals=list(allowed)
    )
    if auth is not None:
        request.client_auth = CLIENT_AUTH[auth]
    endpoint = api.call(stub.CreatePrivateEndpoint, request)
    if wait:
        wait_for(api, cluster, idle, timeout)
        endpoint = api.call(stub.GetPrivateEndpoint, _get(cluster, name))
        if endpoint.state != pb.PRIVATE_ENDPOINT_STATE_ACTIVE:
            raise CliError(
                f"private endpoint {name!r} of cluster {cluster!r} is {state_name(endpoint.state)}"
                " after its operation ended",
                f"see `cloudctl list-operations {cluster}`",
            )
    else:
        _started(endpoint)
    emit(output, endpoint_json(endpoint), lambda: endpoint_table(endpoint))


def _get(cluster: str, name: str) -> pb.GetPrivateEndpointRequest:
    return pb.GetPrivateEndpointRequest(cluster=cluster, name=name)


@click.command("list-private-endpoints")
@cluster_option
@output_option
@click.pass_obj
def list_private_endpoints(env: Env, *, cluster: str, output: str) -> None:
    """Private endpoints of a cluster: state, auth, address, admitted principals, bootstrap."""
    api = Api(env)
    request = pb.ListPrivateEndpointsRequest(cluster=cluster)
    reply = api.call(_stub(api).ListPrivateEndpoints, request)
    emit(
        output,
        {"cluster": cluster, "endpoints": [endpoint_json(e) for e in reply.endpoints]},
        lambda: endpoints_table(list(reply.endpoints)),
    )


@click.command("describe-private-endpoint")
@cluster_option
@click.argument("name")
@output_option
@click.pass_obj
def describe_private_endpoint(env: Env, *, cluster: str, name: str, output: str) -> None:
    """A private endpoint: its listener, address, admitted principals and broker addresses."""
    api = Api(env)
    endpoint = api.call(_stub(api).GetPrivateEndpoint, _get(cluster, name))
    emit(output, endpoint_json(endpoint), lambda: endpoint_table(endpoint))


@click.command("delete-private-endpoint")
@cluster_option
@click.argument("name")
@delete_options
@wait_option
@timeout_option
@output_option
@click.pass_obj
def delete_private_endpoint(
    env: Env,
    *,
    cluster: str,
    name: str,
    yes: bool,
    if_exists: bool,
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Delete a private endpoint: the brokers restart without its listener, one at a time.

    Its connections are dropped and new ones refused; the cluster's other listeners stay."""
    result: dict[str, Any] = {
        "cluster": cluster,
        "name": name,
        "existed": True,
        "deleted": False,
        "operation_id": "",
    }
    confirm(
        f"Delete private endpoint {name!r} of cluster {cluster!r}? Its clients are disconnected.",
        yes,
    )
    api = Api(env)
    stub = _stub(api)
    try:
        endpoint = api.try_call(
            stub.DeletePrivateEndpoint, pb.DeletePrivateEndpointRequest(cluster=cluster, name=name)
        )
    except ApiError as exc:
        if exc.reason != epb.ENDPOINT_NOT_FOUND or not if_exists:
            raise explain(exc, env) from None
        progress(f"cloudctl: note: private endpoint {name!r} does not exist; nothing to delete")
        emit(output, {**result, "existed": False}, f"private endpoint {name!r} does not exist")
        return
    result["operation_id"] = endpoint.operation_id
    if not wait:
        _started(endpoint)
        emit(output, result, f"private endpoint {name!r} of cluster {cluster!r} is being deleted")
        return
    wait_for(api, cluster, idle, timeout)
    try:
        left = api.try_call(stub.GetPrivateEndpoint, _get(cluster, name))
    except ApiError as exc:
        if exc.reason != epb.ENDPOINT_NOT_FOUND:
            raise explain(exc, env) from None
    else:
        raise CliError(
            f"private endpoint {name!r} of cluster {cluster!r} is {state_name(left.state)} "
            "after its operation ended",
            f"see `cloudctl list-operations {cluster}`",
        )
    result["deleted"] = True
    emit(output, result, f"private endpoint {name!r} deleted from cluster {cluster!r}")


COMMANDS = [
    create_private_endpoint,
    list_private_endpoints,
    describe_private_endpoint,
    delete_private_endpoint,
]
