"""Cluster commands: create, describe, list, bootstrap brokers, scale, configure, delete.

``--wait`` polls the cluster and prints each state change to stderr; stdout gets the final
result only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import click

from cli.client import Api, ApiError, Env, explain
from cli.output import (
    CliError,
    cluster_json,
    cluster_state,
    cluster_table,
    clusters_table,
    emit_json,
    output_option,
    progress,
    running,
)
from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import errors_pb2 as epb

POLL_INTERVAL = 0.2

wait_option = click.option(
    "--wait", is_flag=True, help="Wait until the operation is done, showing progress on stderr."
)
timeout_option = click.option(
    "--timeout",
    default=300.0,
    show_default=True,
    help="Seconds --wait waits before giving up (the operation goes on).",
)


def parse_settings(items: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        out[key.strip()] = value.strip()
    return out


def show(cluster: pb.Cluster, output: str) -> None:
    if output == "json":
        emit_json(cluster_json(cluster))
    else:
        click.echo(cluster_table(cluster))


def wait_for(
    api: Api,
    name: str,
    done: Callable[[pb.Cluster], bool],
    timeout: float,
    *,
    gone_is_done: bool = False,
) -> pb.Cluster | None:
    """Poll until ``done(cluster)``; print state changes to stderr; FAILED is an error."""
    started = time.monotonic()
    last = None
    while True:
        try:
            cluster = api.try_call(api.clusters.GetCluster, pb.GetClusterRequest(name=name), 10)
        except ApiError as exc:
            if gone_is_done and exc.reason == epb.CLUSTER_NOT_FOUND:
                progress(f"[{time.monotonic() - started:5.1f}s] {name}: deleted")
                return None
            raise explain(exc, api.env) from None
        state = cluster_state(cluster)
        line = f"{state} {running(cluster)}/{cluster.broker_count} brokers running"
        if cluster.state_message:
            line += f": {cluster.state_message}"
        if line != last:
            progress(f"[{time.monotonic() - started:5.1f}s] {name}: {line}")
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
        if time.monotonic() - started > timeout:
            raise CliError(
                f"cluster {name!r} is still {state} after {timeout:.0f}s",
                f"the operation goes on; follow it with `cloudctl describe-cluster {name}`",
            )
        time.sleep(POLL_INTERVAL)


def idle(cluster: pb.Cluster) -> bool:
    return cluster.state == pb.CLUSTER_STATE_ACTIVE and not cluster.operation


@click.command("create-cluster")
@click.argument("name")
@click.option(
    "--brokers", "broker_count", type=int, help="Number of brokers (default 3).", default=None
)
@click.option(
    "--config", "settings", multiple=True, metavar="KEY=VALUE", help="Broker setting; repeatable."
)
@wait_option
@timeout_option
@output_option
@click.pass_obj
def create_cluster(
    env: Env,
    *,
    name: str,
    broker_count: int | None,
    settings: tuple[str, ...],
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Create a cluster of NAME with its own brokers."""
    config = parse_settings(settings, "--config")
    api = Api(env)
    request = pb.CreateClusterRequest(name=name, config=config)
    if broker_count is not None:
        request.broker_count = broker_count
    cluster = api.call(api.clusters.CreateCluster, request)
    if wait:
        cluster = wait_for(api, name, idle, timeout)
    show(cluster, output)


@click.command("describe-cluster")
@click.argument("name")
@output_option
@click.pass_obj
def describe_cluster(env: Env, *, name: str, output: str) -> None:
    """State, brokers, bootstrap servers and config of a cluster."""
    api = Api(env)
    cluster = api.call(api.clusters.GetCluster, pb.GetClusterRequest(name=name))
    show(cluster, output)


@click.command("list-clusters")
@output_option
@click.pass_obj
def list_clusters(env: Env, *, output: str) -> None:
    """Every cluster with its state."""
    api = Api(env)
    reply = api.call(api.clusters.ListClusters, pb.ListClustersRequest())
    if output == "json":
        emit_json({"clusters": [cluster_json(c) for c in reply.clusters]})
    else:
        click.echo(clusters_table(reply.clusters))


@click.command("get-bootstrap-brokers")
@click.argument("name")
@click.pass_obj
def get_bootstrap_brokers(env: Env, *, name: str) -> None:
    """Print host:port[,host:port...] of the cluster's brokers, and nothing else."""
    api = Api(env)
    reply = api.call(api.clusters.GetBootstrapBrokers, pb.GetBootstrapBrokersRequest(name=name))
    click.echo(reply.bootstrap_brokers)


@click.command("update-broker-count")
@click.argument("name")
@click.option("--brokers", "broker_count", type=int, required=True, help="New number of brokers.")
@wait_option
@timeout_option
@output_option
@click.pass_obj
def update_broker_count(
    env: Env, *, name: str, broker_count: int, wait: bool, timeout: float, output: str
) -> None:
    """Add or remove brokers.

    New brokers start empty (existing partitions stay where they are). Removing brokers (the
    highest ids) first moves their partitions to the brokers that stay; the voters of the
    metadata quorum (brokers 0-2, or broker 0 in a cluster created with fewer than 3) stay.
    """
    api = Api(env)
    cluster = api.call(
        api.clusters.UpdateBrokerCount,
        pb.UpdateBrokerCountRequest(name=name, broker_count=broker_count),
    )
    if wait:
        cluster = wait_for(api, name, idle, timeout)
    show(cluster, output)


@click.command("update-cluster-config")
@click.argument("name")
@click.option(
    "--set", "settings", multiple=True, metavar="KEY=VALUE", help="Broker setting; repeatable."
)
@click.option(
    "--remove", multiple=True, metavar="KEY", help="Return a setting to its default; repeatable."
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
    remove: tuple[str, ...],
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Change broker settings; applied by a rolling restart, one broker at a time."""
    if not settings and not remove:
        raise click.UsageError("give --set KEY=VALUE or --remove KEY")
    api = Api(env)
    cluster = api.call(
        api.clusters.UpdateClusterConfig,
        pb.UpdateClusterConfigRequest(
            name=name, config=parse_settings(settings, "--set"), remove=list(remove)
        ),
    )
    if wait:
        cluster = wait_for(api, name, idle, timeout)
    show(cluster, output)


@click.command("delete-cluster")
@click.argument("name")
@wait_option
@timeout_option
@click.pass_obj
def delete_cluster(env: Env, *, name: str, wait: bool, timeout: float) -> None:
    """Stop a cluster's brokers and remove their data. Deleting a missing cluster is a no-op."""
    api = Api(env)
    try:
        api.try_call(api.clusters.DeleteCluster, pb.DeleteClusterRequest(name=name), 30)
    except ApiError as exc:
        if exc.reason != epb.CLUSTER_NOT_FOUND:
            raise explain(exc, api.env) from None
        progress(f"cluster {name!r} does not exist; nothing to delete")
        return
    if wait:
        wait_for(api, name, lambda c: False, timeout, gone_is_done=True)
        click.echo(f"cluster {name!r} deleted")
    else:
        click.echo(f"cluster {name!r} is being deleted")


COMMANDS = [
    create_cluster,
    describe_cluster,
    list_clusters,
    get_bootstrap_brokers,
    update_broker_count,
    update_cluster_config,
    delete_cluster,
]
