"""``cloudctl logs NAME [--broker N] [--since TIME] [--tail N] [--follow]``: the brokers' log
files, read through the control plane (the Logs service), merged by time; ``--follow``
prints new lines as they are written, until Ctrl-C."""

from __future__ import annotations

import click
import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from cli.client import Api, ApiError, Env, end_of_follow, explain, followed
from cli.formats import log_line_json, log_line_text
from cli.options import cluster_argument, output_option
from cli.output import emit_item, progress
from cli.timeopt import TIME
from proto.sluice.v1 import logs_pb2 as pb

FOLLOW_TIMEOUT = None
"""A followed log has no deadline (Ctrl-C ends it)."""
READ_TIMEOUT = 120.0


@click.command("logs")
@cluster_argument
@click.option("--broker", "broker_id", type=int, help="One broker's log (default: every broker).")
@click.option(
    "--since",
    type=TIME,
    metavar="TIME",
    help="Lines from this time on: ISO 8601 (2026-11-25T08:00:00Z) or relative (-1h, -30m).",
)
@click.option(
    "--tail", "tail_lines", type=click.IntRange(min=0), default=0, help="Only the last N lines."
)
@click.option("-f", "--follow", is_flag=True, help="Then print new lines as they come (Ctrl-C).")
@output_option
@click.pass_obj
def logs(
    env: Env,
    *,
    name: str,
    broker_id: int | None,
    since: Timestamp | None,
    tail_lines: int,
    follow: bool,
    output: str,
) -> None:
    """Log lines of a cluster's brokers, merged by time.

    With several brokers each line starts with `broker-N | `; `describe-cluster NAME` names
    the files."""
    request = pb.ReadLogsRequest(cluster=name, follow=follow, tail_lines=tail_lines)
    if broker_id is not None:
        request.broker_id = broker_id
    if since is not None:
        request.since.CopyFrom(since)
    api = Api(env)
    stream = api.client.logs.ReadLogs(
        request,
        metadata=api.client.metadata,
        timeout=FOLLOW_TIMEOUT if follow else READ_TIMEOUT,
    )
    prefix = broker_id is None
    try:
        for chunk in followed(stream):
            if chunk.omitted:
                progress(
                    f"cloudctl: note: {chunk.omitted} earlier line(s) left out (--tail, or the "
                    "control plane's logs.max.lines); narrow with --since"
                )
            for line in chunk.lines:
                emit_item(output, log_line_json(line), log_line_text(line, prefix))
    except grpc.RpcError as exc:
        raise explain(ApiError.from_rpc(exc, api.endpoint), env) from None
    except KeyboardInterrupt:
        end_of_follow()  # followed() cancelled the call
    finally:
        api.close()


COMMANDS = [logs]
