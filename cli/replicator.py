"""Replicator commands (the Replicators service): MirrorMaker 2 run by the control plane
between two clusters, as MSK Replicator. Replicators are of the installation (they join two
clusters): NAME is their argument, `--source` / `--target` name the clusters. Their output
(JSON with the fields of the gRPC messages, tables) is here too.
"""

from __future__ import annotations

import time
from typing import Any

import click

from cli.client import Api, ApiError, Env, explain
from cli.options import (
    complete_cluster,
    confirm,
    delete_options,
    output_option,
    parse_settings,
    timeout_option,
    wait_option,
)
from cli.output import CliError, emit, fields, progress, rfc3339, table
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import replicators_pb2 as pb
from proto.sluice.v1 import replicators_pb2_grpc as pb_grpc

POLICIES = {"prefixed": pb.TOPIC_NAME_POLICY_PREFIXED, "identical": pb.TOPIC_NAME_POLICY_IDENTICAL}
POLICY_CLASSES = {
    "DefaultReplicationPolicy": "prefixed",
    "IdentityReplicationPolicy": "identical",
}
"""MirrorMaker's replication.policy.class values (the short or the full class name)."""
CONFIG_KEYS = (
    "topics",
    "groups",
    "sync.group.offsets.enabled",
    "replication.policy.class",
    "source.cluster.alias",
)
"""The MirrorMaker settings `--config` takes: those the Replicators API carries."""
POLL_SECONDS = 1.0


def state_name(value: int) -> str:
    return pb.ReplicatorState.Name(value).removeprefix("REPLICATOR_STATE_")


def policy_name(value: int) -> str:
    name = pb.TopicNamePolicy.Name(value).removeprefix("TOPIC_NAME_POLICY_")
    return "PREFIXED" if name == "UNSPECIFIED" else name


def replicator_json(found: pb.Replicator) -> dict[str, Any]:
    return {
        "name": found.name,
        "source_cluster": found.source_cluster,
        "source_bootstrap": found.source_bootstrap,
        "source_alias": found.source_alias,
        "target_cluster": found.target_cluster,
        "topics": found.topics,
        "groups": found.groups,
        "sync_group_offsets": found.sync_group_offsets,
        "topic_name_policy": policy_name(found.topic_name_policy),
        "state": state_name(found.state),
        "state_message": found.state_message,
        "partitions": [
            {
                "source_topic": p.source_topic,
                "target_topic": p.target_topic,
                "partition": p.partition,
                "lag": p.lag,
            }
            for p in found.partitions
        ],
        "total_lag": found.total_lag,
        "restarts": found.restarts,
        "created_at": rfc3339(found.created_at),
    }


def source_text(found: pb.Replicator) -> str:
    return found.source_cluster or f"{found.source_bootstrap} (external)"


def replicator_table(found: pb.Replicator) -> str:
    head = fields(
        [
            ("replicator", found.name),
            ("state", state_name(found.state)),
            ("message", found.state_message or "-"),
            ("source", f"{source_text(found)} as {found.source_alias}"),
            ("target", found.target_cluster),
            ("topics", found.topics),
            (
                "groups",
                f"{found.groups} (offsets synced: {'yes' if found.sync_group_offsets else 'no'})",
            ),
            ("topic names", policy_name(found.topic_name_policy).lower()),
            ("restarts", found.restarts),
            ("total lag", found.total_lag),
            ("created", rfc3339(found.created_at)),
        ]
    )
    if not found.partitions:
        return f"{head}\n\nno replicated partitions (yet)"
    rows = [
        (p.source_topic, p.partition, p.target_topic, p.lag if p.lag >= 0 else "-")
        for p in found.partitions
    ]
    return f"{head}\n\n" + table(["SOURCE TOPIC", "PARTITION", "TARGET TOPIC", "LAG"], rows)


def replicators_table(found: list[pb.Replicator]) -> str:
    if not found:
        return "no replicators"
    return table(
        ["NAME", "STATE", "SOURCE", "TARGET", "TOPICS", "RESTARTS"],
        [
            (
                r.name,
                state_name(r.state),
                source_text(r),
                r.target_cluster,
                r.topics,
                r.restarts,
            )
            for r in found
        ],
    )


def _stub(api: Api) -> Any:
    return pb_grpc.ReplicatorsStub(api.client.channel)


def _truth(text: str, key: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise click.BadParameter(f"{key} is true or false, got {text!r}", param_hint="--config")
    return lowered == "true"


def apply_config(request: pb.CreateReplicatorRequest, settings: dict[str, str]) -> None:
    """MirrorMaker's own names for what the options set (`--config topics=orders.*`)."""
    for key, value in settings.items():
        if key == "topics":
            request.topics = value
        elif key == "groups":
            request.groups = value
        elif key == "sync.group.offsets.enabled":
            request.sync_group_offsets = _truth(value, key)
        elif key == "source.cluster.alias":
            request.source_alias = value
        elif key == "replication.policy.class":
            short = value.rpartition(".")[2]
            if short not in POLICY_CLASSES:
                raise click.BadParameter(
                    f"replication.policy.class is DefaultReplicationPolicy or "
                    f"IdentityReplicationPolicy, got {value!r}",
                    param_hint="--config",
                )
            request.topic_name_policy = POLICIES[POLICY_CLASSES[short]]
        else:
            raise click.BadParameter(
                f"{key!r}: a replicator takes the MirrorMaker settings {', '.join(CONFIG_KEYS)} "
                "(the Replicators API carries no others)",
                param_hint="--config",
            )


def wait_running(api: Api, name: str, timeout: float) -> pb.Replicator:
    """Poll until RUNNING, showing each state change on stderr; FAILED is an error."""
    started = time.monotonic()
    last = ""
    while True:
        reply = api.call(_stub(api).ListReplicators, pb.ListReplicatorsRequest())
        found = next((r for r in reply.replicators if r.name == name), None)
        if found is None:
            raise CliError(f"replicator {name!r} was deleted while waiting")
        line = state_name(found.state) + (f": {found.state_message}" if found.state_message else "")
        if line != last:
            progress(f"[{time.monotonic() - started:5.1f}s] {name}: {line}")
            last = line
        if found.state == pb.REPLICATOR_STATE_RUNNING:
            return found
        if found.state == pb.REPLICATOR_STATE_FAILED:
            raise CliError(
                f"replicator {name!r} FAILED: {found.state_message}",
                f"the control plane restarts it with backoff; follow it with "
                f"`cloudctl describe-replicator {name}`",
            )
        if time.monotonic() - started > timeout:
            raise CliError(
                f"replicator {name!r} is not RUNNING after {timeout:.0f} s ({line})",
                f"it goes on; follow it with `cloudctl describe-replicator {name}`",
            )
        time.sleep(POLL_SECONDS)


@click.command("create-replicator")
@click.argument("name")
@click.option(
    "--source",
    default="",
    metavar="CLUSTER",
    shell_complete=complete_cluster,
    help="Source cluster of this control plane.",
)
@click.option(
    "--source-bootstrap",
    default="",
    metavar="HOST:PORT[,…]",
    help="Bootstrap servers of an external source (any Kafka, plaintext) instead of --source.",
)
@click.option(
    "--target",
    required=True,
    metavar="CLUSTER",
    shell_complete=complete_cluster,
    help="Target cluster of this control plane.",
)
@click.option("--topics", default="", metavar="REGEX", help="Topics to copy (default: all).")
@click.option(
    "--groups",
    default="",
    metavar="REGEX",
    help="Consumer groups whose offsets are checkpointed (default: all).",
)
@click.option(
    "--sync-group-offsets",
    is_flag=True,
    help="Commit the groups' translated offsets on the target (groups without members there).",
)
@click.option(
    "--topic-name-policy",
    type=click.Choice(sorted(POLICIES)),
    default=None,
    help="prefixed: SOURCE.topic on the target (default); identical: the same name.",
)
@click.option(
    "--source-alias",
    default="",
    metavar="ALIAS",
    help="The source's alias (prefix of copied topics; default: its cluster name, or source).",
)
@click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help=f"MirrorMaker's name for one of the above ({', '.join(CONFIG_KEYS)}); repeatable.",
)
@wait_option
@timeout_option
@output_option
@click.pass_obj
def create_replicator(
    env: Env,
    *,
    name: str,
    source: str,
    source_bootstrap: str,
    target: str,
    topics: str,
    groups: str,
    sync_group_offsets: bool,
    topic_name_policy: str | None,
    source_alias: str,
    settings: tuple[str, ...],
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Copy topics, configs and group offsets from one cluster to another (MirrorMaker 2)."""
    if bool(source) == bool(source_bootstrap):
        raise click.UsageError("give exactly one of --source CLUSTER and --source-bootstrap")
    request = pb.CreateReplicatorRequest(
        name=name, source_cluster=source, source_bootstrap=source_bootstrap, target_cluster=target
    )
    apply_config(request, parse_settings(settings, "--config"))
    if topics:
        request.topics = topics
    if groups:
        request.groups = groups
    if sync_group_offsets:
        request.sync_group_offsets = True
    if topic_name_policy:
        request.topic_name_policy = POLICIES[topic_name_policy]
    if source_alias:
        request.source_alias = source_alias
    api = Api(env)
    found = api.call(_stub(api).CreateReplicator, request)
    if wait:
        found = wait_running(api, name, timeout)
    emit(output, replicator_json(found), lambda: replicator_table(found))


@click.command("describe-replicator")
@click.argument("name")
@output_option
@click.pass_obj
def describe_replicator(env: Env, *, name: str, output: str) -> None:
    """A replicator's state and, per replicated partition, its lag."""
    api = Api(env)
    found = api.call(_stub(api).DescribeReplicator, pb.DescribeReplicatorRequest(name=name))
    emit(output, replicator_json(found), lambda: replicator_table(found))


@click.command("list-replicators")
@output_option
@click.pass_obj
def list_replicators(env: Env, *, output: str) -> None:
    """Every replicator with its state (no lag: describe-replicator shows it)."""
    api = Api(env)
    reply = api.call(_stub(api).ListReplicators, pb.ListReplicatorsRequest())
    found = list(reply.replicators)
    emit(
        output,
        {"replicators": [replicator_json(r) for r in found]},
        lambda: replicators_table(found),
    )


@click.command("delete-replicator")
@click.argument("name")
@delete_options
@output_option
@click.pass_obj
def delete_replicator(env: Env, *, name: str, yes: bool, if_exists: bool, output: str) -> None:
    """Stop a replicator (the topics it copied stay on the target)."""
    confirm(f"Delete replicator {name!r} (the copied topics stay)?", yes)
    api = Api(env)
    result = {"name": name, "existed": True, "deleted": True}
    try:
        api.try_call(_stub(api).DeleteReplicator, pb.DeleteReplicatorRequest(name=name), 60)
    except ApiError as exc:
        if exc.reason != epb.REPLICATOR_NOT_FOUND or not if_exists:
            raise explain(exc, env) from None
        progress(f"cloudctl: note: replicator {name!r} does not exist; nothing to delete")
        emit(
            output,
            {**result, "existed": False, "deleted": False},
            f"replicator {name!r} does not exist",
        )
        return
    emit(output, result, f"replicator {name!r} deleted")


COMMANDS = [create_replicator, describe_replicator, list_replicators, delete_replicator]
