"""Cluster commands: create, describe, list, bootstrap brokers, scale, configure, change how
clients authenticate, reboot a broker, delete. A cluster command takes the cluster NAME as
its argument.

``--wait`` polls the cluster and prints each state change to stderr; stdout gets the final
result only. A control plane that restarts meanwhile does not end the wait: it reconnects
(wherever the control plane now listens) and waits on until its own deadline.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import click

from cli.client import Api, ApiError, Env, explain
from cli.configuration import parse_reference
from cli.options import (
    cluster_argument,
    config_option,
    configuration_option,
    confirm,
    delete_options,
    output_option,
    parse_settings,
    tag_option,
    timeout_option,
    wait_option,
)
from cli.output import (
    CliError,
    client_auth_name,
    cluster_json,
    cluster_state,
    cluster_table,
    clusters_table,
    emit,
    progress,
    running,
)
from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import errors_pb2 as epb

F = TypeVar("F", bound=Callable[..., Any])

POLL_INTERVAL = 0.2
UNREACHABLE = (epb.CONTROL_PLANE_UNAVAILABLE,)
CLIENT_AUTH = {
    "none": pb.CLIENT_AUTH_NONE,
    "scram": pb.CLIENT_AUTH_SCRAM,
    "tls": pb.CLIENT_AUTH_TLS,
}
"""``--client-auth`` / ``--auth`` values: MSK's client_authentication modes (each its own
listener on every broker): PLAINTEXT, SASL_SSL with SCRAM-SHA-512, SSL with client
certificates."""
STORAGE_MODE = {
    "": pb.STORAGE_MODE_UNSPECIFIED,
    "local": pb.STORAGE_MODE_LOCAL,
    "tiered": pb.STORAGE_MODE_TIERED,
}


def client_auth_option(*, required: bool) -> Callable[[F], F]:
    """``--client-auth none|scram|tls``, repeatable."""
    default = "" if required else " (default: none)"
    return click.option(
        "--client-auth",
        "client_auth",
        multiple=True,
        required=required,
        type=click.Choice(list(CLIENT_AUTH)),
        help="How clients authenticate, one listener per mode: none (PLAINTEXT), scram "
        "(SASL_SSL, SCRAM-SHA-512), tls (SSL with client certificates); repeatable, the "
        f"first is the default bootstrap string{default}.",
    )


def show(cluster: pb.Cluster, output: str) -> None:
    emit(output, cluster_json(cluster), lambda: cluster_table(cluster))


def _lost(exc: ApiError) -> bool:
    """The control plane went away (restarting): keep waiting."""
    return exc.reason in UNREACHABLE or exc.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def wait_for(
    api: Api,
    name: str,
    done: Callable[[pb.Cluster], bool],
    timeout: float,
    *,
    gone_is_done: bool = False,
) -> pb.Cluster | None:
    """Poll until ``done(cluster)``; print state changes to stderr; FAILED is an error.

    A control plane that stops answering (restarting) is waited for, up to the deadline."""
    started = time.monotonic()
    last = None
    lost = False

    def elapsed() -> str:
        return f"[{time.monotonic() - started:5.1f}s] {name}:"

    while True:
        try:
            cluster = api.try_call(api.clusters.GetCluster, pb.GetClusterRequest(name=name), 10)
        except ApiError as exc:
            if gone_is_done and exc.reason == epb.CLUSTER_NOT_FOUND:
                progress(f"{elapsed()} deleted")
                return None
            if not _lost(exc):
                raise explain(exc, api.env) from None
            if not lost:
                progress(
                    f"{elapsed()} the control plane does not answer ({exc.code.name}); "
                    "waiting for it (it may be restarting)"
                )
                lost = True
            _check_deadline(started, timeout, name, "the control plane is not answering")
            time.sleep(1.0)
            _reconnect(api)
            continue
        if lost:
            progress(f"{elapsed()} the control plane answers again")
            lost = False
        state = cluster_state(cluster)
        line = f"{state} {running(cluster)}/{cluster.broker_count} brokers running"
        if cluster.state_message:
            line += f": {cluster.state_message}"
        if line != last:
            progress(f"{elapsed()} {line}")
            last = line
        if done(cluster):
            return cluster
        if cluster.state == pb.CLUSTER_STATE_FAILED:
            # a failed scale-in is final (the cluster keeps its brokers); start failures retry
            scale_in = cluster.state_message.startswith("scale-in")
            retrying = "" if scale_in else "the control plane keeps retrying; "
            raise CliError(
                f"cluster {name!r} FAILED: {cluster.state_message}",
                f"{retrying}inspect it with `cloudctl describe-cluster {name}`",
            )
        _check_deadline(started, timeout, name, f"still {state}")
        time.sleep(POLL_INTERVAL)


def _check_deadline(started: float, timeout: float, name: str, what: str) -> None:
    if time.monotonic() - started > timeout:
        raise CliError(
            f"cluster {name!r}: {what} after {timeout:.0f}s (--timeout)",
            f"the operation goes on; follow it with `cloudctl describe-cluster {name}`",
        )


def _reconnect(api: Api) -> None:
    with contextlib.suppress(CliError):  # not running yet (no endpoint file): polled again
        api.reconnect()


def idle(cluster: pb.Cluster) -> bool:
    return cluster.state == pb.CLUSTER_STATE_ACTIVE and not cluster.operation


def _settings(settings: tuple[str, ...], legacy: tuple[str, ...] = ()) -> dict[str, str]:
    if legacy:
        progress("cloudctl: note: --set is deprecated; use --config KEY=VALUE")
    return {**parse_settings(legacy, "--set"), **parse_settings(settings, "--config")}


def finish(api: Api, cluster: pb.Cluster, wait: bool, timeout: float, output: str) -> None:
    """Print the cluster; with ``wait``, once its operation is done."""
    if wait:
        cluster = wait_for(api, cluster.name, idle, timeout) or cluster
    elif cluster.operation_id:
        progress(
            f"operation {cluster.operation_id} ({cluster.operation}) started; follow it with "
            f"`cloudctl describe-operation {cluster.operation_id}`"
        )
    show(cluster, output)


@click.command("create-cluster")
@cluster_argument
@click.option(
    "--brokers", "broker_count", type=int, help="Number of brokers (default 3).", default=None
)
@click.option(
    "--broker-type",
    default="",
    metavar="TYPE",
    help="Instance type of the brokers, MSK's names, e.g. kafka.t3.small, kafka.m7g.large, "
    "express.m7g.large, serverless (default kafka.m5.large; an unknown name gets the list). "
    "What the cluster's broker-hours are metered and billed as; the brokers are the same.",
)
@click.option(
    "--storage-mode",
    type=click.Choice(["local", "tiered"]),
    default=None,
    help="tiered: topics may move closed segments to the object store (remote.storage.enable); "
    "local: local disks only (default: tiered when the control plane has an object store).",
)
@tag_option
@configuration_option(
    "Start with the settings of this configuration revision (default revision: the latest); "
    "--config wins where both set a key."
)
@client_auth_option(required=False)
@config_option("Broker")
@wait_option
@timeout_option
@output_option
@click.pass_obj
def create_cluster(
    env: Env,
    *,
    name: str,
    broker_count: int | None,
    broker_type: str,
    storage_mode: str | None,
    tags: tuple[str, ...],
    configuration: str | None,
    client_auth: tuple[str, ...],
    settings: tuple[str, ...],
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Create a cluster of NAME with its own brokers.

    With --client-auth scram or tls, clients trust `cloudctl get-ca-cert NAME`; SCRAM users
    are created in the cluster, TLS clients need a certificate of the same CA.
    """
    config = _settings(settings)
    api = Api(env)
    request = pb.CreateClusterRequest(
        name=name,
        config=config,
        client_auth=[CLIENT_AUTH[m] for m in client_auth],
        broker_type=broker_type,
        tags=parse_settings(tags, "--tag"),
        storage_mode=STORAGE_MODE[storage_mode or ""],
    )
    if broker_count is not None:
        request.broker_count = broker_count
    if configuration is not None:
        name_, revision = parse_reference(configuration)
        request.configuration_info.CopyFrom(pb.ConfigurationInfo(name=name_, revision=revision))
    finish(api, api.call(api.clusters.CreateCluster, request), wait, timeout, output)


@click.command("describe-cluster")
@cluster_argument
@output_option
@click.pass_obj
def describe_cluster(env: Env, *, name: str, output: str) -> None:
    """State, brokers, bootstrap servers, config and log files of a cluster."""
    api = Api(env)
    show(api.call(api.clusters.GetCluster, pb.GetClusterRequest(name=name)), output)


@click.command("list-clusters")
@output_option
@click.pass_obj
def list_clusters(env: Env, *, output: str) -> None:
    """Every cluster with its state."""
    api = Api(env)
    reply = api.call(api.clusters.ListClusters, pb.ListClustersRequest())
    emit(
        output,
        {"clusters": [cluster_json(c) for c in reply.clusters]},
        lambda: clusters_table(reply.clusters),
    )


def _private_endpoint(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--endpoint`` after get-bootstrap-brokers names a private endpoint; a HOST:PORT value
    (an endpoint's name never has a colon) is the control plane's address, as the global
    option everywhere else, so scripts that put it there keep working."""
    if value is None or ":" not in value:
        return value
    env = ctx.obj if isinstance(ctx.obj, Env) else Env.from_environ()
    ctx.obj = replace(env, endpoint_override=value)
    return None


@click.command("get-bootstrap-brokers")
@cluster_argument
@click.option(
    "--auth",
    type=click.Choice(list(CLIENT_AUTH)),
    default=None,
    help="The listener: none, scram or tls (default: the cluster's first mode).",
)
@click.option(
    "--endpoint",
    "--private-endpoint",
    "private_endpoint",
    metavar="NAME",
    callback=_private_endpoint,
    help="The listener of this private endpoint instead (see create-private-endpoint). A "
    "HOST:PORT value is the control plane's address, as the global --endpoint.",
)
@output_option
@click.pass_obj
def get_bootstrap_brokers(
    env: Env, *, name: str, auth: str | None, private_endpoint: str | None, output: str
) -> None:
    """Print host:port[,host:port...] of the cluster's brokers, and nothing else.

    JSON also lists every listener with MSK's names: BootstrapBrokerString (none),
    BootstrapBrokerStringTls (tls), BootstrapBrokerStringSaslScram (scram); "" for a mode
    the cluster does not have. With --endpoint NAME: a private endpoint's listener.
    """
    api = Api(env)
    request = pb.GetBootstrapBrokersRequest(name=name, endpoint=private_endpoint or "")
    if auth is not None:
        request.client_auth = CLIENT_AUTH[auth]
    reply = api.call(api.clusters.GetBootstrapBrokers, request)
    emit(
        output,
        {
            "bootstrap_brokers": reply.bootstrap_brokers,
            "endpoint": reply.endpoint,
            "addresses": list(reply.addresses),
            "client_auth": client_auth_name(reply.client_auth),
            "BootstrapBrokerString": reply.bootstrap_broker_string,
            "BootstrapBrokerStringTls": reply.bootstrap_broker_string_tls,
            "BootstrapBrokerStringSaslScram": reply.bootstrap_broker_string_sasl_scram,
        },
        reply.bootstrap_brokers,
    )


@click.command("get-ca-cert")
@cluster_argument
@output_option
@click.pass_obj
def get_ca_cert(env: Env, *, name: str, output: str) -> None:
    """Print the PEM bundle of the CA that signs the cluster's TLS certificates.

    Clients trust it with ssl.ca.location (librdkafka) or a truststore (Java):
    cloudctl get-ca-cert NAME > ca.pem
    """
    api = Api(env)
    reply = api.call(api.clusters.GetCaCert, pb.GetCaCertRequest(name=name))
    doc = {"cluster": name, "pem": reply.pem, "sha256_fingerprint": reply.sha256_fingerprint}
    emit(output, doc, reply.pem.rstrip("\n"))


@click.command("update-broker-count")
@cluster_argument
@click.option("--brokers", "broker_count", type=int, required=True, help="New number of brokers.")
@config_option("Broker")
@wait_option
@timeout_option
@output_option
@click.pass_obj
def update_broker_count(
    env: Env,
    *,
    name: str,
    broker_count: int,
    settings: tuple[str, ...],
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Add or remove brokers (and change broker settings in the same operation).

    New brokers start empty (existing partitions stay where they are). Removing brokers (the
    highest ids) first moves their partitions to the brokers that stay; the voters of the
    metadata quorum (brokers 0-2, or broker 0 in a cluster created with fewer than 3) stay.
    """
    api = Api(env)
    request = pb.UpdateBrokerCountRequest(
        name=name, broker_count=broker_count, config=_settings(settings)
    )
    finish(api, api.call(api.clusters.UpdateBrokerCount, request), wait, timeout, output)


@click.command("update-cluster-config")
@cluster_argument
@config_option("Broker", alias=True)
@click.option(
    "--remove", multiple=True, metavar="KEY", help="Return a setting to its default; repeatable."
)
@configuration_option(
    "Move to this configuration revision (default revision: the latest): the settings the "
    "cluster had from its previous revision are replaced, the others kept. Not with "
    "--config or --remove."
)
@wait_option
@timeout_option
@output_option
@click.pass_obj
def update_cluster_config(
    env: Env,
    *,
    name: str,
    settings: tuple[str, ...],
    legacy_settings: tuple[str, ...],
    remove: tuple[str, ...],
    configuration: str | None,
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Change broker settings; applied by a rolling restart, one broker at a time."""
    explicit = settings or legacy_settings or remove
    if configuration is not None and explicit:
        raise click.UsageError("give --configuration, or --config/--remove: not both")
    api = Api(env)
    if configuration is not None:
        name_, revision = parse_reference(configuration)
        moved = pb.UpdateClusterConfigurationRequest(
            name=name, configuration_info=pb.ConfigurationInfo(name=name_, revision=revision)
        )
        cluster = api.call(api.clusters.UpdateClusterConfiguration, moved)
        finish(api, cluster, wait, timeout, output)
        return
    if not explicit:
        raise click.UsageError("give --config KEY=VALUE, --remove KEY or --configuration NAME")
    config = _settings(settings, legacy_settings)
    request = pb.UpdateClusterConfigRequest(name=name, config=config, remove=list(remove))
    finish(api, api.call(api.clusters.UpdateClusterConfig, request), wait, timeout, output)


@click.command("tag-cluster")
@cluster_argument
@tag_option
@click.option("--remove", multiple=True, metavar="KEY", help="Remove a tag; repeatable.")
@output_option
@click.pass_obj
def tag_cluster(
    env: Env, *, name: str, tags: tuple[str, ...], remove: tuple[str, ...], output: str
) -> None:
    """Add, change (--tag KEY=VALUE) or remove (--remove KEY) tags; nothing restarts."""
    if not tags and not remove:
        raise click.UsageError("give --tag KEY=VALUE or --remove KEY")
    api = Api(env)
    current = api.call(api.clusters.GetCluster, pb.GetClusterRequest(name=name))
    wanted = {k: v for k, v in current.tags.items() if k not in remove}
    wanted.update(parse_settings(tags, "--tag"))
    request = pb.UpdateClusterTagsRequest(name=name, tags=wanted)
    show(api.call(api.clusters.UpdateClusterTags, request), output)


@click.command("update-cluster-security")
@cluster_argument
@client_auth_option(required=True)
@config_option("Broker")
@wait_option
@timeout_option
@output_option
@click.pass_obj
def update_cluster_security(
    env: Env,
    *,
    name: str,
    client_auth: tuple[str, ...],
    settings: tuple[str, ...],
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Change how clients authenticate: the modes given are the cluster's from now on.

    The brokers restart with the new listeners, one at a time (as MSK's UpdateSecurity). The
    first secured mode of a cluster also makes its brokers authenticate to each other: they
    restart together, once (a few seconds without service; no acknowledged record is lost).
    Existing listeners keep their ports.
    """
    api = Api(env)
    request = pb.UpdateClusterSecurityRequest(
        name=name, client_auth=[CLIENT_AUTH[m] for m in client_auth], config=_settings(settings)
    )
    finish(api, api.call(api.clusters.UpdateClusterSecurity, request), wait, timeout, output)


@click.command("reboot-broker")
@cluster_argument
@click.option("--broker", "broker_id", type=int, required=True, help="Id of the broker.")
@wait_option
@timeout_option
@output_option
@click.pass_obj
def reboot_broker(
    env: Env, *, name: str, broker_id: int, wait: bool, timeout: float, output: str
) -> None:
    """Restart one broker, rolling-safe (as MSK's RebootBroker).

    The broker is stopped once every partition's ISR is full (a controlled shutdown: its
    leaderships move first) and started again with its data; the reboot is done when the ISR
    of every partition is full again. Clients retry through the leadership changes.
    """
    api = Api(env)
    request = pb.RebootBrokerRequest(name=name, broker_id=broker_id)
    finish(api, api.call(api.clusters.RebootBroker, request), wait, timeout, output)


@click.command("delete-cluster")
@cluster_argument
@delete_options
@wait_option
@timeout_option
@output_option
@click.pass_obj
def delete_cluster(
    env: Env,
    *,
    name: str,
    yes: bool,
    if_exists: bool,
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Stop a cluster's brokers and remove their data, logs and bucket."""
    api = Api(env)
    result: dict[str, Any] = {"name": name, "existed": True, "deleted": False, "operation_id": ""}
    try:
        found = api.try_call(api.clusters.GetCluster, pb.GetClusterRequest(name=name), 10)
    except ApiError as exc:
        if exc.reason != epb.CLUSTER_NOT_FOUND or not if_exists:
            raise explain(exc, api.env) from None
        progress(f"cloudctl: note: cluster {name!r} does not exist; nothing to delete")
        emit(output, {**result, "existed": False}, f"cluster {name!r} does not exist")
        return
    brokers = len(found.brokers)
    confirm(f"Delete cluster {name!r}, its {brokers} broker(s) and all their data?", yes)
    cluster = api.call(api.clusters.DeleteCluster, pb.DeleteClusterRequest(name=name), 30)
    result["operation_id"] = cluster.operation_id
    if wait:
        wait_for(api, name, lambda c: False, timeout, gone_is_done=True)
        result["deleted"] = True
        emit(output, result, f"cluster {name!r} deleted")
    else:
        emit(output, result, f"cluster {name!r} is being deleted")


COMMANDS = [
    create_cluster,
    describe_cluster,
    list_clusters,
    get_bootstrap_brokers,
    get_ca_cert,
    update_broker_count,
    update_cluster_config,
    update_cluster_security,
    tag_cluster,
    reboot_broker,
    delete_cluster,
]
