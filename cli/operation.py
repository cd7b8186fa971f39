"""``cloudctl list-operations [NAME]`` and ``describe-operation ID``: the history of every
cluster operation (create, update, scale, reboot, heal, delete), as MSK's
ListClusterOperations; kept by the control plane, across its restarts and after a cluster
is deleted."""

from __future__ import annotations

import click

from cli.client import Api, Env
from cli.formats import operation_json, operation_table, operations_table
from cli.options import complete_cluster, output_option
from cli.output import CliError, emit
from proto.sluice.v1 import operations_pb2 as pb


@click.command("list-operations")
@click.argument("name", required=False, shell_complete=complete_cluster)
@output_option
@click.pass_obj
def list_operations(env: Env, *, name: str | None, output: str) -> None:
    """Operations of cluster NAME (also of deleted clusters of that name), or of every
    cluster; oldest first."""
    api = Api(env)
    reply = api.call(api.operations.ListOperations, pb.ListOperationsRequest(cluster=name or ""))
    ops = list(reply.operations)
    emit(
        output,
        {"operations": [operation_json(op) for op in ops]},
        lambda: operations_table(ops) if ops else "no operations",
    )


@click.command("describe-operation")
@click.argument("operation_id", metavar="ID")
@click.option(
    "--cluster",
    metavar="C",
    help="The cluster the operation belongs to (checked when given; the ID alone is enough).",
)
@output_option
@click.pass_obj
def describe_operation(env: Env, *, operation_id: str, cluster: str | None, output: str) -> None:
    """One operation: type, state, what was asked, start, end, last step and error."""
    api = Api(env)
    op = api.call(api.operations.GetOperation, pb.GetOperationRequest(id=operation_id))
    if cluster is not None and op.cluster != cluster:
        raise CliError(
            f"operation {operation_id!r} is of cluster {op.cluster!r}, not {cluster!r}",
            f"list the operations of {cluster!r} with `cloudctl list-operations {cluster}`",
        )
    emit(output, operation_json(op), lambda: operation_table(op))


COMMANDS = [list_operations, describe_operation]
