"""Consumer-group commands (the Groups service): list, describe with lag, reset offsets,
delete; the same rules as kafka-consumer-groups.sh (offsets are reset, and groups deleted,
only while no consumer is in the group)."""

from __future__ import annotations

import datetime

import click
from google.protobuf.timestamp_pb2 import Timestamp

from cli.client import Api, ApiError, Env, explain
from cli.formats import group_json, group_table, groups_json, groups_table, reset_json, reset_table
from cli.options import cluster_option, confirm, delete_options, output_option
from cli.output import emit, progress
from cli.timeopt import TIME
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import groups_pb2 as pb

ADMIN_TIMEOUT = 60.0


@click.command("list-groups")
@cluster_option
@output_option
@click.pass_obj
def list_groups(env: Env, *, cluster: str, output: str) -> None:
    """Consumer groups of a cluster, with their state and coordinator."""
    api = Api(env)
    reply = api.call(api.groups.ListGroups, pb.ListGroupsRequest(cluster=cluster), ADMIN_TIMEOUT)
    emit(output, groups_json(reply, cluster), lambda: groups_table(reply))


@click.command("describe-group")
@cluster_option
@click.argument("group")
@output_option
@click.pass_obj
def describe_group(env: Env, *, cluster: str, group: str, output: str) -> None:
    """A consumer group: state, members, and per partition its offset, end and lag.

    Members show their client id, host and assigned partitions; lag is the end offset (high
    watermark) minus the committed offset."""
    api = Api(env)
    reply = api.call(
        api.groups.DescribeGroup,
        pb.DescribeGroupRequest(cluster=cluster, group_id=group),
        ADMIN_TIMEOUT,
    )
    emit(output, group_json(reply), lambda: group_table(reply))


@click.command("reset-offsets")
@cluster_option
@click.argument("group")
@click.option(
    "--topic", "topics", multiple=True, required=True, help="Topic (every partition); repeatable."
)
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the end offset.")
@click.option("--to-offset", type=int, metavar="N", help="To offset N (within the log).")
@click.option(
    "--to-datetime",
    type=TIME,
    metavar="TIME",
    help="To the first record at or after TIME: ISO 8601 or relative (-1h).",
)
@click.option(
    "--shift-by", type=int, metavar="N", help="The committed offset plus N (N < 0: back)."
)
@click.option("--dry-run", is_flag=True, help="Show the new offsets, commit nothing.")
@output_option
@click.pass_obj
def reset_offsets(
    env: Env,
    *,
    cluster: str,
    group: str,
    topics: tuple[str, ...],
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: Timestamp | None,
    shift_by: int | None,
    dry_run: bool,
    output: str,
) -> None:
    """Set a consumer group's committed offsets of the partitions of --topic.

    Exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by. New
    offsets stay within [log start, end], as kafka-consumer-groups does. Refused while the
    group has members: stop its consumers first."""
    request = pb.ResetOffsetsRequest(
        cluster=cluster, group_id=group, topics=list(topics), dry_run=dry_run
    )
    given = [
        name
        for name, value in (
            ("--to-earliest", to_earliest),
            ("--to-latest", to_latest),
            ("--to-offset", to_offset is not None),
            ("--to-datetime", to_datetime is not None),
            ("--shift-by", shift_by is not None),
        )
        if value
    ]
    if len(given) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
            f"--shift-by (got {', '.join(given) or 'none'})"
        )
    if to_earliest:
        request.to_earliest = True
    elif to_latest:
        request.to_latest = True
    elif to_offset is not None:
        request.to_offset = to_offset
    elif to_datetime is not None:
        when: datetime.datetime = to_datetime.ToDatetime(datetime.UTC)
        request.to_timestamp_ms = int(when.timestamp() * 1000)
    elif shift_by is not None:
        request.shift_by = shift_by
    api = Api(env)
    reply = api.call(api.groups.ResetOffsets, request, ADMIN_TIMEOUT)
    emit(output, reset_json(reply), lambda: reset_table(reply))


@click.command("delete-group")
@cluster_option
@click.argument("group")
@delete_options
@output_option
@click.pass_obj
def delete_group(
    env: Env, *, cluster: str, group: str, yes: bool, if_exists: bool, output: str
) -> None:
    """Delete a consumer group and its committed offsets (refused while it has members)."""
    result = {"cluster": cluster, "group_id": group, "existed": True, "deleted": False}
    confirm(f"Delete consumer group {group!r} of cluster {cluster!r} and its offsets?", yes)
    api = Api(env)
    try:
        api.try_call(
            api.groups.DeleteGroup,
            pb.DeleteGroupRequest(cluster=cluster, group_id=group),
            ADMIN_TIMEOUT,
        )
    except ApiError as exc:
        if exc.reason != epb.GROUP_NOT_FOUND or not if_exists:
            raise explain(exc, env) from None
        progress(f"cloudctl: note: consumer group {group!r} does not exist; nothing to delete")
        emit(output, {**result, "existed": False}, f"consumer group {group!r} does not exist")
        return
    result["deleted"] = True
    emit(output, result, f"consumer group {group!r} deleted from cluster {cluster!r}")


COMMANDS = [list_groups, describe_group, reset_offsets, delete_group]
