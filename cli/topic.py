"""Topic commands: create, list, describe, delete, alter config, find orphaned remote objects
(through the control plane)."""

from __future__ import annotations

import click

from cli.client import Api, Env
from cli.cluster import parse_settings
from cli.output import (
    emit_json,
    orphans_json,
    orphans_text,
    output_option,
    topic_json,
    topic_table,
    topics_table,
)
from proto.sluice.v1 import topics_pb2 as pb

ADMIN_TIMEOUT = 60.0

cluster_option = click.option("--cluster", required=True, help="Cluster name.")


def show(topic: pb.Topic, output: str) -> None:
    if output == "json":
        emit_json(topic_json(topic, detail=True))
    else:
        click.echo(topic_table(topic))


@click.command("create-topic")
@cluster_option
@click.argument("topic")
@click.option("--partitions", type=int, help="Partition count (default: num.partitions).")
@click.option("--replication-factor", type=int, help="Replication factor (default 1).")
@click.option(
    "--config", "settings", multiple=True, metavar="KEY=VALUE", help="Topic setting; repeatable."
)
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
    """Create TOPIC in a cluster."""
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
    if output == "json":
        emit_json({"topics": [topic_json(t, detail=False) for t in reply.topics]})
    else:
        click.echo(topics_table(reply.topics))


@click.command("describe-topic")
@cluster_option
@click.argument("topic")
@output_option
@click.pass_obj
def describe_topic(env: Env, *, cluster: str, topic: str, output: str) -> None:
    """Partitions, leaders and config of a topic."""
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
@click.pass_obj
def delete_topic(env: Env, *, cluster: str, topic: str) -> None:
    """Delete a topic and its data."""
    api = Api(env)
    api.call(
        api.topics.DeleteTopic, pb.DeleteTopicRequest(cluster=cluster, name=topic), ADMIN_TIMEOUT
    )
    click.echo(f"topic {topic!r} deleted from cluster {cluster!r}")


@click.command("alter-topic-config")
@cluster_option
@click.argument("topic")
@click.option(
    "--set", "settings", multiple=True, metavar="KEY=VALUE", help="Topic setting; repeatable."
)
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
    remove: tuple[str, ...],
    output: str,
) -> None:
    """Set or remove topic-level settings."""
    if not settings and not remove:
        raise click.UsageError("give --set KEY=VALUE or --remove KEY")
    api = Api(env)
    reply = api.call(
        api.topics.AlterTopicConfig,
        pb.AlterTopicConfigRequest(
            cluster=cluster,
            name=topic,
            config=parse_settings(settings, "--set"),
            remove=list(remove),
        ),
        ADMIN_TIMEOUT,
    )
    show(reply, output)


@click.command("find-orphans")
@cluster_option
@click.option("--delete", is_flag=True, help="Remove what is found.")
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
    env: Env, *, cluster: str, delete: bool, min_age_seconds: int, output: str
) -> None:
    """Objects in the cluster's bucket that no tiered-segment record names.

    Reasons: "unknown segment" (e.g. an upload a dead leader left), "unparseable" (not a
    segment key), "deleted topic" (its cleanup is not pending). --delete removes exactly the
    objects listed."""
    api = Api(env)
    reply = api.call(
        api.topics.FindOrphans,
        pb.FindOrphansRequest(cluster=cluster, delete=delete, min_age_seconds=min_age_seconds),
        ADMIN_TIMEOUT,
    )
    if output == "json":
        emit_json(orphans_json(reply))
    else:
        click.echo(orphans_text(reply))


COMMANDS = [
    create_topic,
    list_topics,
    describe_topic,
    delete_topic,
    alter_topic_config,
    find_orphans,
]
