"""What the remote tier holds, asked of any broker with DescribeRemoteLog (API key 32001).

A small synchronous Kafka-protocol client: one TCP connection, one request, framed as any
flexible Kafka request and encoded by kio (the schemas are ``tiered.remote_log_api``'s)::

    request  := size:int32 RequestHeader(v2) DescribeRemoteLogRequest(v0)
    response := size:int32 correlation_id:int32 tagged_fields DescribeRemoteLogResponse(v0)

The payloads are JSON (see ``tiered/remote_log_api.py``). The planner (driver side) calls
:func:`describe_remote_log` once per query plan; nothing here is kept on a data source
object, so nothing unpicklable travels to executors.
"""

from __future__ import annotations

import io
import json
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from tiered.remote_log_api import DescribeRemoteLogRequest, DescribeRemoteLogResponse
from tiered.remote_segment import COPY_FINISHED, RemoteSegment

CLIENT_ID = "sluice-spark"
MAX_FRAME = 256 * 1024 * 1024


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


def _request_frame(topics: Sequence[str] | None, correlation: int) -> bytes:
    request = DescribeRemoteLogRequest(
        payload=json.dumps(
            {"version": 1, "topics": None if topics is None else list(topics)}
        ).encode()
    )
    header_cls = DescribeRemoteLogRequest.__header_schema__
    header = header_cls(
        request_api_key=DescribeRemoteLogRequest.__api_key__,
        request_api_version=DescribeRemoteLogRequest.__version__,
        correlation_id=i32(correlation),
        client_id=CLIENT_ID,
    )
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header)
    entity_writer(DescribeRemoteLogRequest)(buf, request)
    body = buf.getvalue()
    return struct.pack(">i", len(body)) + body


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        got = sock.recv(min(size - len(chunks), 1 << 20))
        if not got:
            raise OSError("connection closed by the broker")
        chunks += got
    return bytes(chunks)


def ask_broker(host: str, port: int, topics: Sequence[str] | None, timeout: float) -> RemoteLog:
    """DescribeRemoteLog of one broker; OSError when it cannot be reached."""
    correlation = 1
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_request_frame(topics, correlation))
        (size,) = struct.unpack(">i", _read_exactly(sock, 4))
        if not 4 <= size <= MAX_FRAME:
            raise OSError(f"bad response frame size {size}")
        frame = _read_exactly(sock, size)
    (got,) = struct.unpack_from(">i", frame, 0)
    if got != correlation:
        raise OSError(f"correlation id {got} does not match request {correlation}")
    # response header v1: correlation id, then (empty) tagged fields
    response, _ = entity_reader(DescribeRemoteLogResponse)(frame, 5)
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
    bootstrap: str, topics: Sequence[str] | None, timeout: float = 10.0
) -> RemoteLog:
    """Ask the bootstrap brokers in turn until one answers."""
    errors = []
    for host, port in split_servers(bootstrap):
        try:
            return ask_broker(host, port, topics, timeout)
        except (OSError, ValueError) as exc:
            errors.append(f"{host}:{port}: {exc}")
    raise RemoteLogError("no broker answered DescribeRemoteLog: " + "; ".join(errors))
