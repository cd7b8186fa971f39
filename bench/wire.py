"""Kafka wire bits for the raw-protocol benchmarks: frames encoded with kio, magic v2 batches.

Independent of ``dataplane``: the benchmarks are a client, and must not share the code under
test. Frames are encoded once and re-sent; only the correlation id is patched.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import time
from typing import Any

import crc32c
from kio.index import load_response_schema
from kio.schema.metadata.v4.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.request_header.v1.header import RequestHeader
from kio.serial import entity_reader, entity_writer

SIZE = struct.Struct(">i")
PRODUCE_VERSION = 7


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record_batch(values: list[bytes], timestamp_ms: int | None = None) -> bytes:
    """One uncompressed magic v2 batch, no producer id, keys null, no headers."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    records = bytearray()
    for delta, value in enumerate(values):
        body = (
            b"\x00"  # attributes
            + _varint(0)  # timestamp delta
            + _varint(delta)  # offset delta
            + _varint(-1)  # key: null
            + _varint(len(value))
            + value
            + _varint(0)  # headers
        )
        records += _varint(len(body)) + body
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes: no compression, CreateTime
            len(values) - 1,  # lastOffsetDelta
            ts,
            ts,
            -1,  # producerId
            -1,  # producerEpoch
            -1,  # baseSequence
            len(values),
        )
        + records
    )
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leaderEpoch + magic + crc + rest
    return struct.pack(">qiibI", 0, batch_length, -1, 2, crc) + after_crc


def encode_frame(request: Any, correlation_id: int = 1, client_id: str = "sluice-bench") -> bytes:
    header = RequestHeader(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, header)
    entity_writer(type(request))(buf, request)
    body = buf.getvalue()
    return SIZE.pack(len(body)) + body


def produce_frame(topic: str, batch: bytes, acks: int = 1, partition: int = 0) -> bytes:
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,  # type: ignore[arg-type]
        timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
        topic_data=(
            TopicProduceData(
                name=topic,  # type: ignore[arg-type]
                partition_data=(PartitionProduceData(index=partition, records=batch),),  # type: ignore[arg-type]
            ),
        ),
    )
    return encode_frame(request)


def decode_response(request_type: Any, frame: bytes) -> tuple[int, Any]:
    """(correlation id, response) of a response frame without its size prefix."""
    cls = load_response_schema(request_type.__api_key__, request_type.__version__)
    correlation = SIZE.unpack_from(frame, 0)[0]
    offset = 4 + (1 if cls.__header_schema__.__flexible__ else 0)
    response, _ = entity_reader(cls)(frame, offset)
    return correlation, response


def produce_errors(frame: bytes) -> list[int]:
    """Error codes of every partition in a Produce v7 response frame."""
    _, response = decode_response(ProduceRequest, frame)
    return [int(p.error_code) for t in response.responses for p in t.partition_responses]


def _read_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return bytes(out)


def request(bootstrap: str, req: Any, timeout: float = 10) -> Any:
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(encode_frame(req))
        size = SIZE.unpack(_read_exact(sock, 4))[0]
        return decode_response(type(req), _read_exact(sock, size))[1]


def metadata_auto_create(bootstrap: str, topic: str) -> int:
    """Metadata v4 for ``topic`` with auto-creation allowed; returns the topic's error code."""
    response = request(
        bootstrap,
        MetadataRequest(
            topics=(MetadataRequestTopic(name=topic),),  # type: ignore[arg-type]
            allow_auto_topic_creation=True,
        ),
    )
    return int(response.topics[0].error_code)
