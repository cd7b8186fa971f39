"""What the remote tier holds, asked of any broker with DescribeRemoteLog (API key 32001).

One blocking connection, one request (``wire.client.BlockingConnection``; the schema and
its JSON payloads are ``wire.internal``'s). The planner (driver side) calls
:func:`describe_remote_log` once per query plan; nothing here is kept on a data source
object, so nothing unpicklable travels to executors.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from tiered.remote_segment import COPY_FINISHED, RemoteSegment
from wire.client import BlockingConnection
from wire.internal import DescribeRemoteLogRequest
from wire.sasl import ClientSecurity

CLIENT_ID = "sluice-spark"


class RemoteLogError(Exception):
    """No broker answered DescribeRemoteLog, or one answered with an error."""


@dataclass(frozen=True)
class RemotePartition:
    """The remote tier of one topic partition."""

    log_start_offset: int
    segments: tuple[RemoteSegment, ...]
    """Readable (``copy_finished``) segments, by base offset."""


@dataclass(frozen=True)
class RemoteLog:
    cluster_id: str
    topic_ids: dict[str, str]
    partitions: dict[tuple[str, int], RemotePartition]

    def of(self, topic: str, partition: int) -> RemotePartition | None:
        return self.partitions.get((topic, partition))


def parse_payload(doc: dict[str, Any]) -> RemoteLog:
    """The response document as values; segments not ``copy_finished`` are left out."""
    partitions: dict[tuple[str, int], RemotePartition] = {}
    topic_ids: dict[str, str] = {}
    for topic, body in (doc.get("topics") or {}).items():
        topic_ids[topic] = str(body.get("topic_id", ""))
        for number, part in (body.get("partitions") or {}).items():
            segments = sorted(
                (
                    RemoteSegment.from_dict(raw)
                    for raw in part.get("segments", [])
                    if raw.get("state") == COPY_FINISHED
                ),
                key=lambda s: (s.base_offset, s.end_offset),
            )
            partitions[(topic, int(number))] = RemotePartition(
                int(part.get("log_start_offset", 0)), tuple(segments)
            )
    return RemoteLog(str(doc.get("cluster_id", "")), topic_ids, partitions)


def ask_broker(
    host: str,
    port: int,
    topics: Sequence[str] | None,
    timeout: float,
    security: ClientSecurity | None = None,
) -> RemoteLog:
    """DescribeRemoteLog of one broker; OSError when it cannot be reached (or refuses the
    credentials)."""
    request = DescribeRemoteLogRequest(
        payload=json.dumps(
            {"version": 1, "topics": None if topics is None else list(topics)}
        ).encode()
    )
    with BlockingConnection(
        host, port, client_id=CLIENT_ID, timeout=timeout, security=security
    ) as connection:
        response = connection.request(request)
    if response.error_code != ErrorCode.none:
        detail = f": {response.error_message}" if response.error_message else ""
        raise RemoteLogError(f"DescribeRemoteLog: {response.error_code.name}{detail}")
    return parse_payload(json.loads(response.payload))


def split_servers(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port[,host:port…]`` (an optional ``PLAINTEXT://`` style scheme is dropped)."""
    out = []
    for raw in bootstrap.split(","):
        item = raw.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"kafka.bootstrap.servers: bad address {item!r} (host:port)")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("kafka.bootstrap.servers is empty")
    return out


def describe_remote_log(
    bootstrap: str,
    topics: Sequence[str] | None,
    timeout: float = 10.0,
    security: ClientSecurity | None = None,
) -> RemoteLog:
    """Ask the bootstrap brokers in turn until one answers (through the listener the
    ``kafka.*`` options secure: ``security``)."""
    errors = []
    for host, port in split_servers(bootstrap):
        try:
            return ask_broker(host, port, topics, timeout, security)
        except (OSError, ValueError) as exc:
            errors.append(f"{host}:{port}: {exc}")
    raise RemoteLogError("no broker answered DescribeRemoteLog: " + "; ".join(errors))
