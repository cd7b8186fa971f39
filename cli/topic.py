"""Topic commands: create, list, describe, add partitions, alter config, delete, find
orphaned remote objects (through the control plane)."""

from __future__ import annotations

import click

from cli.client import Api, ApiError, Env, explain
from cli.options import (
    cluster_option,
    config_option,
    confirm,
    delete_options,
    output_option,
    parse_settings,
)
from cli.output import (
    emit,
    orphans_json,
    orphans_text,
    progress,
    topic_json,
    topic_table,
    topics_table,
)
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import topics_pb2 as pb

ADMIN_TIMEOUT = 60.0


def show(topic: pb.Topic, output: str) -> None:
    emit(output, topic_json(topic, detail=True), lambda: topic_table(topic))


@click.command("create-topic")
@cluster_option
@click.argument("topic")
@click.option("--partitions", type=int, help="Partition count (default: num.partitions).")
@click.option(
    "--replication-factor",
    type=int,
    help="Replication factor (default: 3, or the broker count when smaller; with 3, "
    "min.insync.replicas=2 unless --config sets it).",
)
@config_option("Topic")
@output_option
@click.pass_obj
def create_topic(
    env: Env,
    *,
    cluster: str,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    settings: tuple[str, ...],
    output: str,
) -> None:
    """Create TOPIC in a cluster (as MSK: 3 replicas, min.insync.replicas=2)."""
    request = pb.CreateTopicRequest(
        cluster=cluster, name=topic, config=parse_settings(settings, "--config")
    )
    if partitions is not None:
        request.partitions = partitions
    if replication_factor is not None:
        request.replication_factor = replication_factor
    api = Api(env)
    show(api.call(api.topics.CreateTopic, request, ADMIN_TIMEOUT), output)


@click.command("list-topics")
@cluster_option
@click.option("--internal", is_flag=True, help="Include internal topics (__consumer_offsets).")
@output_option
@click.pass_obj
def list_topics(env: Env, *, cluster: str, internal: bool, output: str) -> None:
    """Topics of a cluster."""
    api = Api(env)
    reply = api.call(
        api.topics.ListTopics,
        pb.ListTopicsRequest(cluster=cluster, include_internal=internal),
        ADMIN_TIMEOUT,
    )
    emit(
        output,
        {"topics": [topic_json(t, detail=False) for t in reply.topics]},
        lambda: topics_table(reply.topics),
    )


@click.command("describe-topic")
@cluster_option
@click.argument("topic")
@output_option
@click.pass_obj
def describe_topic(env: Env, *, cluster: str, topic: str, output: str) -> None:
    """Partitions (leader, replicas, ISR, hot bytes per replica), storage and config of a
    topic."""
    api = Api(env)
    reply = api.call(
        api.topics.DescribeTopic,
        pb.DescribeTopicRequest(cluster=cluster, name=topic),
        ADMIN_TIMEOUT,
    )
    show(reply, output)


@click.command("delete-topic")
@cluster_option
@click.argument("topic")
@delete_options
@output_option
@click.pass_obj
def delete_topic(
    env: Env, *, cluster: str, topic: str, yes: bool, if_exists: bool, output: str
) -> None:
    """Delete a topic and its data (local and tiered)."""
    result = {"cluster": cluster, "topic": topic, "existed": True, "deleted": False}
    confirm(f"Delete topic {topic!r} of cluster {cluster!r} and all its records?", yes)
    api = Api(env)
    try:
        api.try_call(
            api.topics.DeleteTopic,
            pb.DeleteTopicRequest(cluster=cluster, name=topic),
            ADMIN_TIMEOUT,
        )
    except ApiError as exc:
        if exc.reason != epb.TOPIC_NOT_FOUND or not if_exists:
            raise explain(exc, env) from None
        progress(f"cloudctl: note: topic {topic!r} does not exist; nothing to delete")
        emit(output, {**result, "existed": False}, f"topic {topic!r} does not exist")
        return
    result["deleted"] = True
    emit(output, result, f"topic {topic!r} deleted from cluster {cluster!r}")


@click.command("add-partitions")
@cluster_option
@click.argument("topic")
@click.option(
    "--total",
    type=click.IntRange(min=1),
    required=True,
    help="The new partition count (more than now).",
)
@output_option
@click.pass_obj
def add_partitions(env: Env, *, cluster: str, topic: str, total: int, output: str) -> None:
    """Raise a topic's partition count to --total.

    Kafka never removes partitions; keyed records may map to other partitions from now on."""
    api = Api(env)
    reply = api.call(
        api.topics.AddPartitions,
        pb.AddPartitionsRequest(cluster=cluster, name=topic, total=total),
        ADMIN_TIMEOUT,
    )
    show(reply, output)


@click.command("alter-topic-config")
@cluster_option
@click.argument("topic")
@config_option("Topic", alias=True)
@click.option(
    "--remove", multiple=True, metavar="KEY", help="Return a setting to its default; repeatable."
)
@output_option
@click.pass_obj
def alter_topic_config(
    env: Env,
    *,
    cluster: str,
    topic: str,
    settings: tuple[str, ...],
    legacy_settings: tuple[str, ...],
    remove: tuple[str, ...],
    output: str,
) -> None:
    """Set or remove topic-level settings."""
    if not settings and not legacy_settings and not remove:
        raise click.UsageError("give --config KEY=VALUE or --remove KEY")
    if legacy_settings:
        progress("cloudctl: note: --set is deprecated; use --config KEY=VALUE")
    api = Api(env)
    reply = api.call(
        api.topics.AlterTopicConfig,
        pb.AlterTopicConfigRequest(
            cluster=cluster,
            name=topic,
            config={
                **parse_settings(legacy_settings, "--set"),
                **parse_settings(settings, "--config"),
            },
            remove=list(remove),
        ),
        ADMIN_TIMEOUT,
    )
    show(reply, output)


@click.command("find-orphans")
@cluster_option
@click.option("--delete", is_flag=True, help="Remove what is found (asks first on a terminal).")
@click.option("-y", "--yes", is_flag=True, help="With --delete: do not ask.")
@click.option(
    "--min-age-seconds",
    type=click.IntRange(min=0),
    default=300,
    show_default=True,
    help="Leave out younger objects (an upload may be in flight before its record shows).",
)
@output_option
@click.pass_obj
def find_orphans(
    env: Env, *, cluster: str, delete: bool, yes: bool, min_age_seconds: int, output: str
) -> None:
    """Objects in the cluster's bucket that no tiered-segment record names.

    Reasons: "unknown segment" (e.g. an upload a dead leader left), "unparseable" (not a
    segment key), "deleted topic" (its cleanup is not pending). --delete removes exactly the
    objects listed."""
    if delete:
        confirm(f"Delete the orphaned objects found in the bucket of cluster {cluster!r}?", yes)
    api = Api(env)
    reply = api.call(
        api.topics.FindOrphans,
        pb.FindOrphansRequest(cluster=cluster, delete=delete, min_age_seconds=min_age_seconds),
        ADMIN_TIMEOUT,
    )
    emit(output, orphans_json(reply), lambda: orphans_text(reply))


COMMANDS = [
    create_topic,
    list_topics,
    describe_topic,
    add_partitions,
    alter_topic_config,
    delete_topic,
    find_orphans,
]
