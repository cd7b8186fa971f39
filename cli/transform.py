"""Transform commands (the Transforms service), modelled on Redpanda's ``rpk transform``:
deploy a WebAssembly module onto an input topic, list, describe (per input partition: state,
broker, committed offset, lag, error), pause, resume, delete, and the guests' log lines.
Their output (JSON with the fields of the gRPC messages, tables) is here too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from cli.client import Api, ApiError, Env, end_of_follow, explain, followed
from cli.options import cluster_option, confirm, delete_options, output_option
from cli.output import CliError, emit, emit_item, fields, progress, table
from cli.timeopt import TIME
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import transforms_pb2 as pb
from sluice_client.client import MAX_MESSAGE_BYTES

ADMIN_TIMEOUT = 60.0
DEPLOY_TIMEOUT = 120.0
"""A deploy sends the module, has it stored by the brokers and waits until all know it."""
LOGS_TIMEOUT = 120.0
FOLLOW_TIMEOUT = None
"""A followed log has no deadline (Ctrl-C ends it)."""
ERROR_CHARS = 120
"""A failed partition's error in the table (JSON and YAML carry all of it)."""


# ---------------------------------------------------------------------- output


def state_name(state: int) -> str:
    return pb.TransformState.Name(state)


def partition_state_name(state: int) -> str:
    return pb.TransformPartitionState.Name(state)


def transform_json(t: pb.Transform) -> dict[str, Any]:
    return {
        "cluster": t.cluster,
        "name": t.name,
        "input_topic": t.input_topic,
        "output_topics": list(t.output_topics),
        "env": dict(sorted(t.env.items())),
        "module_sha256": t.module_sha256,
        "module_size": t.module_size,
        "abi": t.abi,
        "version": t.version,
        "state": state_name(t.state),
        "partitions": [
            {
                "partition": p.partition,
                "state": partition_state_name(p.state),
                "broker": p.broker,
                "error": p.error,
                "committed_offset": p.committed_offset,
                "lag": p.lag,
                "processed": p.processed,
                "outputs": p.outputs,
            }
            for p in t.partitions
        ],
        "total_lag": t.total_lag,
    }


def transforms_json(reply: pb.ListTransformsResponse, cluster: str) -> dict[str, Any]:
    return {"cluster": cluster, "transforms": [transform_json(t) for t in reply.transforms]}


def module_text(t: pb.Transform) -> str:
    return f"{t.module_sha256[:12]} ({t.module_size:,} bytes, {t.abi} ABI)"


def transform_table(t: pb.Transform) -> str:
    env = ", ".join(f"{k}={v}" for k, v in sorted(t.env.items())) or "-"
    head = fields(
        [
            ("transform", t.name),
            ("cluster", t.cluster),
            ("state", state_name(t.state)),
            ("input topic", t.input_topic),
            ("output topics", ", ".join(t.output_topics)),
            ("variables", env),
            ("module", module_text(t)),
            ("version", t.version),
            ("total lag", t.total_lag),
        ]
    )
    if not t.partitions:
        return head
    rows = table(
        ["PARTITION", "STATE", "BROKER", "COMMITTED", "LAG", "ERROR"],
        [
            (
                p.partition,
                partition_state_name(p.state).removeprefix("PARTITION_"),
                p.broker if p.broker >= 0 else "-",
                p.committed_offset if p.committed_offset >= 0 else "-",
                p.lag if p.lag >= 0 else "?",
                one_line(p.error) or "-",
            )
            for p in t.partitions
        ],
    )
    return f"{head}\n\n{rows}"


def one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= ERROR_CHARS else flat[: ERROR_CHARS - 3] + "..."


def transforms_table(reply: pb.ListTransformsResponse) -> str:
    if not reply.transforms:
        return "no transforms"
    return table(
        ["NAME", "STATE", "INPUT", "OUTPUTS", "VERSION", "MODULE"],
        [
            (
                t.name,
                state_name(t.state),
                t.input_topic,
                ",".join(t.output_topics),
                t.version,
                module_text(t),
            )
            for t in reply.transforms
        ],
    )


def log_line_json(line: pb.TransformLogLine) -> dict[str, Any]:
    return {
        "timestamp_ms": line.timestamp_ms,
        "partition": line.partition,
        "stream": line.stream,
        "text": line.text,
    }


def log_line_text(line: pb.TransformLogLine) -> str:
    ts = Timestamp()
    ts.FromMilliseconds(line.timestamp_ms)
    when = ts.ToJsonString()  # RFC 3339 UTC with milliseconds
    return f"{when} partition {line.partition} {line.stream} | {line.text}"


# ---------------------------------------------------------------------- input


def read_module(path: str) -> bytes:
    """The module's bytes; a file that cannot be read is a usage error (exit 2)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise click.BadParameter(
            f"cannot read {path!r}: {exc.strerror or exc}", param_hint="--file"
        ) from None
    if len(data) > MAX_MESSAGE_BYTES:
        raise CliError(
            f"{path} is {len(data):,} bytes; the control plane takes modules of up to "
            f"{MAX_MESSAGE_BYTES:,} bytes (and the brokers up to transforms.module.max.bytes, "
            "10 MiB by default)",
            "build it smaller, e.g. strip debug info",
        )
    return data


def parse_vars(items: tuple[str, ...]) -> dict[str, str]:
    """``--var KEY=VALUE`` (the value as given, spaces included); malformed: exit 2."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--var")
        out[key] = value
    return out


def show(reply: pb.Transform, output: str) -> None:
    emit(output, transform_json(reply), lambda: transform_table(reply))


# ---------------------------------------------------------------------- commands


@click.command("deploy-transform")
@cluster_option
@click.option(
    "--name", required=True, metavar="N", help="Transform name (redeploying a name replaces it)."
)
@click.option(
    "--file",
    "path",
    required=True,
    type=click.Path(),  # no checks (read_module says what is wrong), but file completion
    metavar="FILE",
    help="The WebAssembly module (.wasm), read here and sent to the control plane.",
)
@click.option("--input-topic", required=True, metavar="T", help="Topic whose records it reads.")
@click.option(
    "--output-topic",
    "output_topics",
    multiple=True,
    required=True,
    metavar="O",
    help="Topic it writes to; repeatable (1 to 8; the first is the default output).",
)
@click.option(
    "--var",
    "variables",
    multiple=True,
    metavar="KEY=VALUE",
    help="Environment variable the guest sees; repeatable.",
)
@output_option
@click.pass_obj
def deploy_transform(
    env: Env,
    *,
    cluster: str,
    name: str,
    path: str,
    input_topic: str,
    output_topics: tuple[str, ...],
    variables: tuple[str, ...],
    output: str,
) -> None:
    """Deploy a WebAssembly transform of an input topic's records to output topics.

    The brokers validate the module (Redpanda's data-transforms ABI or Sluice's batch ABI)
    and the topics; a refused deploy changes nothing. Redeploying a name continues from its
    committed offsets."""
    request = pb.DeployTransformRequest(
        cluster=cluster,
        name=name,
        module=read_module(path),
        input_topic=input_topic,
        output_topics=list(output_topics),
        env=parse_vars(variables),
    )
    api = Api(env)
    show(api.call(api.transforms.DeployTransform, request, DEPLOY_TIMEOUT), output)


@click.command("list-transforms")
@cluster_option
@output_option
@click.pass_obj
def list_transforms(env: Env, *, cluster: str, output: str) -> None:
    """Transforms of a cluster, with their state."""
    api = Api(env)
    reply = api.call(
        api.transforms.ListTransforms, pb.ListTransformsRequest(cluster=cluster), ADMIN_TIMEOUT
    )
    emit(output, transforms_json(reply, cluster), lambda: transforms_table(reply))


@click.command("describe-transform")
@cluster_option
@click.argument("name")
@output_option
@click.pass_obj
def describe_transform(env: Env, *, cluster: str, name: str, output: str) -> None:
    """A transform: its definition and, per input partition, state, broker, committed
    offset, lag and error."""
    api = Api(env)
    reply = api.call(
        api.transforms.DescribeTransform,
        pb.TransformRef(cluster=cluster, name=name),
        ADMIN_TIMEOUT,
    )
    show(reply, output)


@click.command("pause-transform")
@cluster_option
@click.argument("name")
@output_option
@click.pass_obj
def pause_transform(env: Env, *, cluster: str, name: str, output: str) -> None:
    """Stop a transform on every partition (its committed offsets are kept)."""
    api = Api(env)
    reply = api.call(
        api.transforms.PauseTransform, pb.TransformRef(cluster=cluster, name=name), ADMIN_TIMEOUT
    )
    show(reply, output)


@click.command("resume-transform")
@cluster_option
@click.argument("name")
@output_option
@click.pass_obj
def resume_transform(env: Env, *, cluster: str, name: str, output: str) -> None:
    """Start a transform again from its committed offsets (failed partitions retry)."""
    api = Api(env)
    reply = api.call(
        api.transforms.ResumeTransform, pb.TransformRef(cluster=cluster, name=name), ADMIN_TIMEOUT
    )
    show(reply, output)


@click.command("delete-transform")
@cluster_option
@click.argument("name")
@delete_options
@output_option
@click.pass_obj
def delete_transform(
    env: Env, *, cluster: str, name: str, yes: bool, if_exists: bool, output: str
) -> None:
    """Stop a transform and remove it (its topics, committed offsets and logs stay)."""
    result = {"cluster": cluster, "name": name, "existed": True, "deleted": False}
    confirm(f"Delete transform {name!r} of cluster {cluster!r}?", yes)
    api = Api(env)
    try:
        api.try_call(
            api.transforms.DeleteTransform,
            pb.TransformRef(cluster=cluster, name=name),
            ADMIN_TIMEOUT,
        )
    except ApiError as exc:
        if exc.reason != epb.TRANSFORM_NOT_FOUND or not if_exists:
            raise explain(exc, env) from None
        progress(f"cloudctl: note: transform {name!r} does not exist; nothing to delete")
        emit(output, {**result, "existed": False}, f"transform {name!r} does not exist")
        return
    result["deleted"] = True
    emit(output, result, f"transform {name!r} deleted from cluster {cluster!r}")


@click.command("transform-logs")
@cluster_option
@click.argument("name")
@click.option(
    "--since",
    type=TIME,
    metavar="TIME",
    help="Lines from this time on: ISO 8601 (2026-11-25T08:00:00Z) or relative (-1h, -30m).",
)
@click.option("-f", "--follow", is_flag=True, help="Then print new lines as they come (Ctrl-C).")
@output_option
@click.pass_obj
def transform_logs(
    env: Env, *, cluster: str, name: str, since: Timestamp | None, follow: bool, output: str
) -> None:
    """The guest's stdout and stderr lines of a transform, oldest first.

    Each line names the input partition whose runner wrote it; a failed partition's error
    is logged too. Kept for the brokers' transforms.logs.retention.ms (7 days)."""
    request = pb.TransformLogsRequest(cluster=cluster, name=name, follow=follow)
    if since is not None:
        request.since_ms = since.ToMilliseconds()
    api = Api(env)
    stream = api.client.transforms.TransformLogs(
        request,
        metadata=api.client.metadata,
        timeout=FOLLOW_TIMEOUT if follow else LOGS_TIMEOUT,
    )
    try:
        for line in followed(stream):
            emit_item(output, log_line_json(line), log_line_text(line))
    except grpc.RpcError as exc:
        raise explain(ApiError.from_rpc(exc, api.endpoint), env) from None
    except KeyboardInterrupt:
        end_of_follow()  # followed() cancelled the call
    finally:
        api.close()


COMMANDS = [
    deploy_transform,
    list_transforms,
    describe_transform,
    pause_transform,
    resume_transform,
    delete_transform,
    transform_logs,
]
