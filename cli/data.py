"""``cloudctl produce`` / ``consume``: terminal conveniences over a real Kafka client.

The control plane gives the bootstrap brokers and checks that the topic exists; records then
flow directly between this process and the brokers (confluent-kafka, i.e. librdkafka).
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

import click

from cli.client import Api, Env
from cli.output import CliError, progress
from proto.sluice.v1 import clusters_pb2, topics_pb2

cluster_option = click.option("--cluster", required=True, help="Cluster name.")
QUIET = 3  # librdkafka log level: errors only


def _connect(env: Env, cluster: str, topic: str) -> tuple[str, int]:
    """(bootstrap servers, partition count); a missing cluster or topic is a clear error."""
    api = Api(env)
    try:
        bootstrap = api.call(
            api.clusters.GetBootstrapBrokers, clusters_pb2.GetBootstrapBrokersRequest(name=cluster)
        ).bootstrap_brokers
        described = api.call(
            api.topics.DescribeTopic, topics_pb2.DescribeTopicRequest(cluster=cluster, name=topic)
        )
    finally:
        api.close()
    return bootstrap, described.partitions


@click.command()
@cluster_option
@click.argument("topic")
@click.option("--key-separator", help="Split each line at the first SEP into key and value.")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.pass_obj
def produce(env: Env, *, cluster: str, topic: str, key_separator: str | None, acks: str) -> None:
    """Send each line of stdin to TOPIC as one record."""
    from confluent_kafka import KafkaException, Producer

    bootstrap, _ = _connect(env, cluster, topic)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "enable.idempotence": acks == "all",
            "linger.ms": 5,
            "log_level": QUIET,
        }
    )
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    sep = key_separator.encode() if key_separator else None
    count = 0
    try:
        for raw in sys.stdin.buffer:
            line = raw.rstrip(b"\r\n")
            key: bytes | None = None
            if sep is not None and sep in line:
                key, line = line.split(sep, 1)
            while True:
                try:
                    producer.produce(topic, value=line, key=key, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            count += 1
            producer.poll(0)
        left = producer.flush(60)
    except KafkaException as exc:
        raise CliError(f"produce to {topic!r} failed: {exc}") from None
    except KeyboardInterrupt:
        left = producer.flush(10)
    if left:
        raise CliError(
            f"{left} of {count} records were not acknowledged within 60s",
            f"check the cluster with `cloudctl describe-cluster {cluster}`",
        )
    if failures:
        raise CliError(f"{len(failures)} of {count} records failed: {failures[0]}")
    progress(f"produced {count} record(s) to {topic}")


@click.command()
@cluster_option
@click.argument("topic")
@click.option("--group", help="Consumer group (default: none; read every partition).")
@click.option(
    "--offset",
    type=click.Choice(["beginning", "end"]),
    default="beginning",
    show_default=True,
    help="Where to start (with --group: only when the group has no committed offset).",
)
@click.option("-n", "--count", "limit", type=int, help="Exit after this many records.")
@click.option(
    "-e", "--exit", "exit_at_end", is_flag=True, help="Exit at the end of every partition."
)
@click.option("--key-separator", help="Print KEY<SEP>VALUE instead of VALUE.")
@click.pass_obj
def consume(
    env: Env,
    *,
    cluster: str,
    topic: str,
    group: str | None,
    offset: str,
    limit: int | None,
    exit_at_end: bool,
    key_separator: str | None,
) -> None:
    """Print the records of TOPIC, one per line, until Ctrl-C (or -n / -e)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

    bootstrap, partitions = _connect(env, cluster, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"cloudctl-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": group is not None,
            "auto.offset.reset": "earliest" if offset == "beginning" else "latest",
            "enable.partition.eof": exit_at_end,
            "log_level": QUIET,
        }
    )
    if group:
        consumer.subscribe([topic])
    else:
        start = OFFSET_BEGINNING if offset == "beginning" else OFFSET_END
        consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
    out = sys.stdout.buffer
    sep = key_separator.encode() if key_separator else None
    seen = 0
    at_end: set[int] = set()
    try:
        while limit is None or seen < limit:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(int(msg.partition() or 0))
                    if exit_at_end and len(at_end) >= partitions:
                        break
                    continue
                if error.fatal():
                    raise CliError(f"consume from {topic!r} failed: {error}")
                progress(f"cloudctl: warning: {error}")
                continue
            at_end.discard(int(msg.partition() or 0))
            value = msg.value() or b""
            if sep is not None:
                value = (msg.key() or b"") + sep + value
            out.write(value + b"\n")
            out.flush()
            seen += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    progress(f"consumed {seen} record(s) from {topic}")


COMMANDS = [produce, consume]
