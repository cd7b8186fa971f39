"""``cloudctl produce`` / ``consume``: terminal conveniences over a real Kafka client.

The control plane gives the bootstrap brokers and checks that the topic exists; records then
flow directly between this process and the brokers (confluent-kafka, i.e. librdkafka).
"""

from __future__ import annotations

import datetime
import sys
import uuid
from typing import Any

import click
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from cli.client import Api, Env
from cli.options import cluster_option, output_option
from cli.output import CliError, emit, emit_item, progress
from proto.sluice.v1 import clusters_pb2, topics_pb2
from sluice_client.client import LISTENER_OF

QUIET = 3  # librdkafka log level: errors only
client_config_option = click.option(
    "--client-config",
    "client_config",
    type=click.Path(exists=True, dir_okay=False, readable=True),
    help="A file of librdkafka client properties (KEY=VALUE lines, # comments), e.g. "
    "security.protocol=SASL_SSL, sasl.mechanism=SCRAM-SHA-512, sasl.username, "
    "sasl.password, ssl.ca.location (from `cloudctl get-ca-cert`): for a cluster created "
    "with --client-auth scram or tls. Its security.protocol picks the listener.",
)


def read_client_config(path: str | None) -> dict[str, str]:
    """KEY=VALUE lines of a client properties file (as Kafka's --command-config); the
    secrets stay in the file, never on the command line."""
    if path is None:
        return {}
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as lines:
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(
                    f"line {number}: expected KEY=VALUE", param_hint="--client-config"
                )
            out[key.strip()] = value.strip()
    protocol = out.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in LISTENER_OF:
        raise click.BadParameter(
            f"security.protocol {protocol!r}: expected one of {', '.join(LISTENER_OF)}",
            param_hint="--client-config",
        )
    return out


def _on_error(error: KafkaError, cluster: str, topic: str, group: str | None) -> None:
    """A consumer's error: CliError when it ends the consume, else a warning."""
    if error.fatal():
        raise CliError(f"consume from {topic!r} failed: {error}")
    refused = _refusal(error.code(), cluster, topic, group)
    if refused is not None:
        raise refused
    if error.code() != KafkaError.GROUP_AUTHORIZATION_FAILED:  # without --group: our own
        progress(f"cloudctl: warning: {error}")


def _refusal(code: int, cluster: str, topic: str, group: str | None) -> CliError | None:
    """The error that ends a consume the cluster's ACLs refuse (librdkafka would retry it
    for ever, as a warning)."""
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return CliError(
            f"not authorized to read topic {topic!r} (TOPIC_AUTHORIZATION_FAILED)",
            f"grant it: `cloudctl create-acl --cluster {cluster} --principal User:NAME "
            f"--operation read --topic {topic}`",
        )
    if code == KafkaError.GROUP_AUTHORIZATION_FAILED and group is not None:
        return CliError(
            f"not authorized to use group {group!r} (GROUP_AUTHORIZATION_FAILED)",
            f"grant it: `cloudctl create-acl --cluster {cluster} --principal User:NAME "
            f"--operation read --group {group}`",
        )
    return None


def _connect(
    env: Env, cluster: str, topic: str, client: dict[str, str] | None = None
) -> tuple[str, int]:
    """(bootstrap servers, partition count) of the listener the client configuration's
    security.protocol goes to (default: the cluster's first); a missing cluster, listener
    or topic is a clear error."""
    api = Api(env)
    protocol = (client or {}).get("security.protocol")
    mode = LISTENER_OF[protocol.upper()] if protocol else clusters_pb2.CLIENT_AUTH_UNSPECIFIED
    try:
        reply = api.call(
            api.clusters.GetBootstrapBrokers,
            clusters_pb2.GetBootstrapBrokersRequest(name=cluster, client_auth=mode),
        )
        secured = reply.client_auth in (
            clusters_pb2.CLIENT_AUTH_SCRAM,
            clusters_pb2.CLIENT_AUTH_TLS,
        )
        if secured and "security.protocol" not in (client or {}):
            raise CliError(
                f"cluster {cluster!r} takes authenticated clients only",
                "pass --client-config FILE with security.protocol (SASL_SSL or SSL) and the "
                "credentials, see `cloudctl produce --help`",
            )
        bootstrap = reply.bootstrap_brokers
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
@client_config_option
@output_option
@click.pass_obj
def produce(
    env: Env,
    *,
    cluster: str,
    topic: str,
    key_separator: str | None,
    acks: str,
    client_config: str | None,
    output: str,
) -> None:
    """Send each line of stdin to TOPIC as one record (idempotent with acks=all)."""
    client = read_client_config(client_config)
    bootstrap, _ = _connect(env, cluster, topic, client)
    producer = Producer(
        {
            **client,
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
    summary = f"produced {count} record(s) to {topic}"
    if output == "table":
        progress(summary)  # stdout stays free for the records' producer of a pipe
    else:
        emit(output, {"cluster": cluster, "topic": topic, "produced": count}, summary)


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
@client_config_option
@output_option
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
    client_config: str | None,
    output: str,
) -> None:
    """Print the records of TOPIC, one per line, until Ctrl-C (or -n / -e).

    -o json prints one JSON object per record (topic, partition, offset, timestamp, key,
    value), -o yaml one YAML document per record."""
    client = read_client_config(client_config)
    bootstrap, partitions = _connect(env, cluster, topic, client)
    consumer = Consumer(
        {
            **client,
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
                _on_error(error, cluster, topic, group)
                continue
            at_end.discard(int(msg.partition() or 0))
            if output != "table":
                emit_item(output, record_json(msg), "")
                seen += 1
                continue
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


def record_json(msg: Any) -> dict[str, Any]:
    key, value = msg.key(), msg.value()
    _, millis = msg.timestamp()
    when = datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.UTC)
    return {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "key": None if key is None else key.decode(errors="replace"),
        "value": None if value is None else value.decode(errors="replace"),
    }


COMMANDS = [produce, consume]
