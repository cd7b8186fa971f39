"""``cloudctl use-cluster``: the cluster every ``--cluster`` defaults to, kept in
``$SLUICE_HOME/context.json`` (as kubectl's current context or rpk's profile);
``$SLUICE_CLUSTER`` wins over it, ``--cluster`` over both."""

from __future__ import annotations

import click

from cli.client import Api, Env
from cli.options import (
    CLUSTER_VARIABLE,
    chosen_cluster,
    complete_cluster,
    output_option,
    write_context,
)
from cli.output import emit, progress
from proto.sluice.v1 import clusters_pb2 as pb


@click.command("use-cluster")
@click.argument("name", required=False, shell_complete=complete_cluster)
@click.option("--clear", is_flag=True, help="Forget the chosen cluster.")
@output_option
@click.pass_obj
def use_cluster(env: Env, *, name: str | None, clear: bool, output: str) -> None:
    """Choose the cluster that --cluster defaults to; without NAME, say which it is.

    The choice is kept in $SLUICE_HOME/context.json; $SLUICE_CLUSTER wins over it."""
    if name and clear:
        raise click.UsageError("give NAME or --clear, not both")
    if clear:
        write_context(env, None)
        progress(f"cloudctl: note: no cluster chosen now ({env.home})")
    elif name:
        api = Api(env)  # a missing cluster is an error, as everywhere
        api.call(api.clusters.GetCluster, pb.GetClusterRequest(name=name))
        write_context(env, name)
    current, source = chosen_cluster(env)
    if name and current != name:
        progress(f"cloudctl: note: {CLUSTER_VARIABLE}={current} wins over `use-cluster {name}`")
    emit(
        output,
        {"cluster": current or "", "source": source},
        f"{current} (from {source})" if current else "no cluster chosen (use --cluster C)",
    )


COMMANDS = [use_cluster]
