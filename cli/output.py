"""Shared output: tables, stable JSON and YAML, progress lines and the one-line error.

stdout carries results only (a table, or JSON / YAML with ``-o json`` / ``-o yaml``); progress
and notes go to stderr. JSON output is stable: every key is always present, keys are sorted,
states are the MSK names ("ACTIVE"), times are RFC 3339 UTC, numbers are numbers. YAML
carries exactly the same data (``yaml.safe_load`` of it equals ``json.loads`` of the JSON).
``usage`` and ``invoice`` also print CSV (``-o csv``: a header of the JSON rows' field names,
then one line per row).
Commands that print a stream (consume, logs) print one JSON object per line, or one YAML
document per item.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import click

from proto.sluice.v1 import clusters_pb2, controlplane_pb2, topics_pb2
from sluice_client.client import broker_state_name, cluster_state_name


class CliError(click.ClickException):
    """A failure to report as ``cloudctl: error: MESSAGE (HINT)`` with exit code 1."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def line(self) -> str:
        hint = f" ({self.hint})" if self.hint else ""
        return f"cloudctl: error: {self.message}{hint}"


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True))


def yaml_text(value: Any) -> str:
    # only -o yaml needs PyYAML (its import is ~30 ms of CPU, paid by every command before)
    import yaml  # type: ignore[import-untyped]  # noqa: PLC0415 - PyYAML ships no types

    return yaml.safe_dump(value, sort_keys=True, default_flow_style=False, allow_unicode=True)


def emit(
    output: str,
    value: Any,
    text: Callable[[], str] | str,
    csv_rows: Callable[[], tuple[Sequence[str], Iterable[Sequence[object]]]] | None = None,
) -> None:
    """Print a result: ``value`` (JSON-able) as JSON or YAML, ``csv_rows`` (header and rows)
    as CSV for the commands that offer ``-o csv``, else ``text`` (a table)."""
    if output == "json":
        emit_json(value)
    elif output == "yaml":
        click.echo(yaml_text(value), nl=False)
    elif output == "csv" and csv_rows is not None:
        click.echo(csv_text(*csv_rows()), nl=False)
    else:
        click.echo(text() if callable(text) else text)


def csv_text(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """CSV (quoted where needed, lines end with \\n): a header line (the JSON field names),
    then one line per row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows(rows)
    return out.getvalue()


def emit_item(output: str, value: Any, text: str) -> None:
    """Print one item of a stream: a JSON line, a YAML document, or ``text``."""
    if output == "json":
        click.echo(json.dumps(value, sort_keys=True))
    elif output == "yaml":
        click.echo("---\n" + yaml_text(value), nl=False)
    else:
        click.echo(text)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def fields(pairs: Sequence[tuple[str, object]]) -> str:
    width = max(len(key) for key, _ in pairs) + 1
    return "\n".join(f"{(key + ':').ljust(width)}  {value}" for key, value in pairs)


def progress(message: str) -> None:
    click.echo(message, err=True)


def rfc3339(ts: Any) -> str:
    if not ts.seconds and not ts.nanos:
        return ""
    when = datetime.datetime.fromtimestamp(ts.seconds, tz=datetime.UTC)
    return when.isoformat().replace("+00:00", "Z")


def config_text(config: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(config.items())) or "(defaults)"


# ---------------------------------------------------------------------- clusters


def cluster_state(cluster: clusters_pb2.Cluster) -> str:
    return cluster_state_name(cluster.state)


def broker_state(broker: clusters_pb2.Broker) -> str:
    return broker_state_name(broker.state)


def object_store_json(cluster: clusters_pb2.Cluster) -> dict[str, str]:
    """A cluster's object store: endpoint and bucket ("" when it has none)."""
    store = cluster.object_store
    return {"endpoint": store.endpoint, "bucket": store.bucket}


def client_auth_name(value: int) -> str:
    """A client authentication mode as its enum name without prefix: ``NONE``, ``SCRAM``,
    ``TLS``."""
    return clusters_pb2.ClientAuth.Name(value).removeprefix("CLIENT_AUTH_")


def client_auth_text(cluster: clusters_pb2.Cluster) -> str:
    """``none, scram``: the modes as the command line names them."""
    return ", ".join(client_auth_name(m).lower() for m in cluster.client_auth) or "none"


def listeners_text(broker: clusters_pb2.Broker) -> str:
    """``none :9092, scram :9096`` (one listener per mode)."""
    return ", ".join(
        f"{client_auth_name(x.client_auth).lower()} :{x.port}" for x in broker.listeners
    )


def cluster_json(cluster: clusters_pb2.Cluster) -> dict[str, Any]:
    return {
        "name": cluster.name,
        "cluster_id": cluster.cluster_id,
        "state": cluster_state(cluster),
        "state_message": cluster.state_message,
        "operation": cluster.operation,
        "broker_count": cluster.broker_count,
        "broker_type": cluster.broker_type,
        "bootstrap_brokers": cluster.bootstrap_brokers,
        "client_auth": [client_auth_name(m) for m in cluster.client_auth],
        "brokers": [
            {
                "id": b.id,
                "host": b.host,
                "port": b.port,
                "address": f"{b.host}:{b.port}",
                "state": broker_state(b),
                "pid": b.pid,
                "restarts": b.restarts,
                "data_dir": b.data_dir,
                "log_path": b.log_path,
                "listeners": [
                    {
                        "client_auth": client_auth_name(x.client_auth),
                        "name": x.name,
                        "security_protocol": x.security_protocol,
                        "port": x.port,
                        "address": f"{b.host}:{x.port}",
                    }
                    for x in b.listeners
                ],
            }
            for b in cluster.brokers
        ],
        "log_dir": cluster.log_dir,
        "operation_id": cluster.operation_id,
        "config": dict(sorted(cluster.config.items())),
        "tags": dict(sorted(cluster.tags.items())),
        "storage_mode": storage_mode_name(cluster.storage_mode),
        "configuration_info": {
            "name": cluster.configuration_info.name,
            "revision": cluster.configuration_info.revision,
        },
        "object_store": object_store_json(cluster),
        "created_at": rfc3339(cluster.created_at),
        "updated_at": rfc3339(cluster.updated_at),
    }


def configuration_text(cluster: clusters_pb2.Cluster) -> str:
    info = cluster.configuration_info
    return f"{info.name} revision {info.revision}" if info.name else "-"


def storage_mode_name(mode: int) -> str:
    """``LOCAL`` / ``TIERED`` (MSK's names); "" when unset."""
    if mode == clusters_pb2.STORAGE_MODE_UNSPECIFIED:
        return ""
    return clusters_pb2.StorageMode.Name(mode).removeprefix("STORAGE_MODE_")


def running(cluster: clusters_pb2.Cluster) -> int:
    return sum(1 for b in cluster.brokers if b.state == clusters_pb2.BROKER_STATE_RUNNING)


def object_store_text(cluster: clusters_pb2.Cluster) -> str:
    found = object_store_json(cluster)
    if not found["bucket"]:
        return "(none)"
    return f"bucket {found['bucket']} at {found['endpoint'] or 'AWS S3'}"


def cluster_table(cluster: clusters_pb2.Cluster) -> str:
    state = cluster_state(cluster)
    if cluster.state_message:
        state += f" ({cluster.state_message})"
    head = fields(
        [
            ("name", cluster.name),
            ("cluster id", cluster.cluster_id),
            ("state", state),
            ("brokers", f"{running(cluster)}/{cluster.broker_count} running"),
            ("broker type", cluster.broker_type or "-"),
            ("bootstrap", cluster.bootstrap_brokers),
            ("client auth", client_auth_text(cluster)),
            ("config", config_text(cluster.config)),
            ("tags", config_text(cluster.tags) if cluster.tags else "(none)"),
            ("storage mode", storage_mode_name(cluster.storage_mode).lower() or "-"),
            ("configuration", configuration_text(cluster)),
            ("object store", object_store_text(cluster)),
            ("logs", f"{cluster.log_dir or '-'} (`cloudctl logs {cluster.name}`)"),
            ("created", rfc3339(cluster.created_at)),
        ]
        + (
            [("operation", f"{cluster.operation} {cluster.operation_id}")]
            if cluster.operation
            else []
        )
    )
    brokers = table(
        ["BROKER", "ADDRESS", "LISTENERS", "STATE", "PID", "RESTARTS"],
        [
            (
                b.id,
                f"{b.host}:{b.port}",
                listeners_text(b),
                broker_state(b),
                b.pid or "-",
                b.restarts,
            )
            for b in cluster.brokers
        ],
    )
    return f"{head}\n\n{brokers}"


def clusters_table(clusters: Sequence[clusters_pb2.Cluster]) -> str:
    return table(
        ["NAME", "STATE", "BROKERS", "BROKER TYPE", "BOOTSTRAP", "CREATED"],
        [
            (
                c.name,
                cluster_state(c),
                f"{running(c)}/{c.broker_count}",
                c.broker_type or "-",
                c.bootstrap_brokers,
                rfc3339(c.created_at),
            )
            for c in clusters
        ],
    )


# ---------------------------------------------------------------------- topics


def topic_json(topic: topics_pb2.Topic, *, detail: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "cluster": topic.cluster,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "partitions": topic.partitions,
        "replication_factor": topic.replication_factor,
        "internal": topic.internal,
        "hot_bytes": topic.hot_bytes,
        "hot_bytes_per_replica": topic.hot_bytes_per_replica,
        "tiered_bytes": topic.tiered_bytes,
        "tiered_segments": topic.tiered_segments,
    }
    if detail:
        out["config"] = dict(sorted(topic.config.items()))
        out["effective_config"] = dict(sorted(topic.effective_config.items()))
        out["partition_details"] = [
            {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "under_replicated": under_replicated(p),
                "offline": p.leader < 0,
                "remote_log_start_offset": remote_log_start(p),
                "tiered_bytes": p.tiered_bytes,
                "tiered_segments": p.tiered_segments,
                "hot_bytes": p.hot_bytes,
                "replica_hot_bytes": {str(k): v for k, v in sorted(p.replica_hot_bytes.items())},
            }
            for p in topic.partition_details
        ]
    return out


def remote_log_start(partition: topics_pb2.Partition) -> int:
    """The first offset the object store holds of the partition; -1 when it holds nothing."""
    if partition.HasField("remote_log_start_offset"):
        return partition.remote_log_start_offset
    return -1


def under_replicated(partition: topics_pb2.Partition) -> bool:
    """Some replica is not in the ISR (it is catching up, or its broker is down)."""
    return not set(partition.replicas) <= set(partition.isr)


def topic_table(topic: topics_pb2.Topic) -> str:
    lagging = [f"partition {p.partition}" for p in topic.partition_details if under_replicated(p)]
    head = fields(
        [
            ("topic", topic.name),
            ("cluster", topic.cluster),
            ("topic id", topic.topic_id),
            ("partitions", topic.partitions),
            ("replication factor", topic.replication_factor),
            ("under-replicated", ", ".join(lagging) or "none"),
            ("storage", storage_text(topic)),
            ("config", config_text(topic.config)),
        ]
    )
    tiered = any(remote_log_start(p) >= 0 for p in topic.partition_details)
    headers = ["PARTITION", "LEADER", "REPLICAS", "ISR", "HOT PER REPLICA"]
    if tiered:  # the remote tier's columns only for topics with data in it
        headers += ["REMOTE START", "TIERED"]
    rows = []
    for p in topic.partition_details:
        row: list[object] = [
            p.partition,
            p.leader if p.leader >= 0 else "none",
            ",".join(map(str, p.replicas)),
            ",".join(map(str, p.isr)),
            " ".join(f"{r}:{byte_size(p.replica_hot_bytes.get(r, 0))}" for r in p.replicas),
        ]
        if tiered:
            remote = remote_log_start(p) >= 0
            row += [
                remote_log_start(p) if remote else "-",
                f"{byte_size(p.tiered_bytes)} in {count(p.tiered_segments, 'segment')}"
                if remote
                else "-",
            ]
        rows.append(row)
    return f"{head}\n\n{table(headers, rows)}"


def storage_text(topic: topics_pb2.Topic) -> str:
    hot = (
        f"{byte_size(topic.hot_bytes_per_replica)} hot per replica, "
        f"{byte_size(topic.hot_bytes)} on all {topic.replication_factor} replicas (local disk)"
    )
    if not topic.tiered_segments:
        return hot
    segments = count(topic.tiered_segments, "segment")
    return f"{hot}, {byte_size(topic.tiered_bytes)} tiered ({segments} in the object store)"


def byte_size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def orphans_json(reply: topics_pb2.FindOrphansResponse) -> dict[str, Any]:
    return {
        "bucket": reply.bucket,
        "prefix": reply.prefix,
        "orphans": [
            {
                "key": o.key,
                "size": o.size,
                "reason": o.reason,
                "last_modified": rfc3339(o.last_modified),
            }
            for o in reply.orphans
        ],
        "count": len(reply.orphans),
        "total_bytes": reply.total_bytes,
        "scanned": reply.scanned,
        "too_young": reply.too_young,
        "deleted": reply.deleted,
    }


def orphans_text(reply: topics_pb2.FindOrphansResponse) -> str:
    found = count(len(reply.orphans), "orphaned object")
    where = f"s3://{reply.bucket}/{reply.prefix}"
    verb = "deleted" if reply.deleted and reply.orphans else "found"
    summary = (
        f"{found} {verb} ({byte_size(reply.total_bytes)}) among "
        f"{count(reply.scanned, 'object')} under {where}"
    )
    if reply.too_young:
        summary += (
            f"; {count(reply.too_young, 'younger object')} left out (--min-age-seconds: "
            "an upload may be in flight)"
        )
    if not reply.orphans:
        return summary
    rows = table(
        ["KEY", "SIZE", "REASON", "LAST MODIFIED"],
        [(o.key, o.size, o.reason, rfc3339(o.last_modified) or "-") for o in reply.orphans],
    )
    return f"{rows}\n\n{summary}"


def topics_table(topics: Sequence[topics_pb2.Topic]) -> str:
    return table(
        ["NAME", "PARTITIONS", "REPLICATION", "TOPIC ID", "HOT", "TIERED"],
        [
            (
                t.name,
                t.partitions,
                t.replication_factor,
                t.topic_id,
                byte_size(t.hot_bytes),
                byte_size(t.tiered_bytes) if t.tiered_segments else "-",
            )
            for t in topics
        ],
    )


# ---------------------------------------------------------------------- status


def status_object_store_json(status: controlplane_pb2.Status | None) -> dict[str, Any]:
    """The control plane's object store, as `cloudctl status -o json` shows it (every key
    present; empty values when there is none)."""
    store = controlplane_pb2.ObjectStoreStatus()
    if status is not None and status.HasField("object_store"):
        store = status.object_store
    return {
        "kind": store.kind,
        "endpoint": store.endpoint,
        "data_dir": store.data_dir,
        "pid": store.pid,
        "restarts": store.restarts,
        "answering": store.answering,
        "detail": store.detail,
    }


def status_json(
    home: str,
    running_pid: int | None,
    status: controlplane_pb2.Status | None,
    orphans: int = 0,
) -> dict[str, Any]:
    """``orphans``: broker processes found running while the control plane is not."""
    return {
        "running": status is not None,
        "home": home,
        "pid": status.pid if status is not None else running_pid or 0,
        "endpoint": status.endpoint if status is not None else "",
        "version": status.version if status is not None else "",
        "started_at": rfc3339(status.started_at) if status is not None else "",
        "clusters": status.clusters if status is not None else 0,
        "brokers_running": status.brokers_running if status is not None else orphans,
        "s3_endpoint": status.s3_endpoint if status is not None else "",
        "s3_note": status.s3_note if status is not None else "",
        "object_store": status_object_store_json(status),
    }


def fail(message: str, hint: str | None = None) -> None:
    raise CliError(message, hint)


def echo_err(message: str) -> None:
    print(message, file=sys.stderr)
