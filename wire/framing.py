"""Kafka request and response framing on top of the kio schemas.

A request frame on the wire::

    size        int32   bytes that follow
    api_key     int16   \
    api_version int16    | request header (v1; v2 adds tagged fields for flexible versions)
    correlation int32    |
    client_id   string  /
    body                 the request of that key and version

A response frame is ``size int32 | correlation int32 | [tagged fields] | body``. Flexible
responses carry header v1 (with tagged fields), except ApiVersions which always uses v0
so that a client can parse it before it knows what the broker supports.

Decoding is kio's native reader (about a microsecond). Encoding collects the pieces in
a list, so record data fetched from disk is never copied into a new buffer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.constants import EntityType

from wire import internal
from wire.errors import InvalidRequest
from wire.request_bounds import check_counts

MALFORMED: tuple[type[Exception], ...] = (SerialError, KeyError, ValueError)
"""What kio's readers raise on malformed bytes: its DecodeErrors (a short buffer, a null
where none may be, bad UTF-8, a negative length), KeyError for a tagged field it does not
know, ValueError for a value outside an enum (an error code)."""
FRAME_PREFIX = struct.Struct(">hhi")
SIZE = struct.Struct(">i")
CORRELATION = struct.Struct(">i")


class ChunkBuffer:
    """A write target for kio writers that keeps references instead of copying."""

    __slots__ = ("chunks", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = [b""]
        self.size = 0

    def write(self, data: bytes) -> int:
        self.chunks.append(data)
        self.size += len(data)
        return len(data)


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body a handler encoded itself (the hot Produce and Fetch answers): bytes,
    or chunks (anything with a length that the connection writes: bytes, views, a file
    region of the broker's)."""

    body: bytes | list[Any]
    flexible_header: bool


@dataclass(frozen=True, slots=True)
class RequestFrameHeader:
    api_key: int
    api_version: int
    correlation_id: int


def peek_header(frame: bytes | bytearray | memoryview) -> RequestFrameHeader:
    api_key, api_version, correlation_id = FRAME_PREFIX.unpack_from(frame, 0)
    return RequestFrameHeader(api_key, api_version, correlation_id)


def kio_versions(api_key: int) -> tuple[int, int] | None:
    """The versions of ``api_key`` there are schemas for: kio's, or Sluice's own APIs'."""
    own = internal.versions(api_key)
    if own is not None:
        return own
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = sorted(schema_name_map[name])
    return versions[0], versions[-1]


@cache
def request_codec(api_key: int, api_version: int) -> tuple[Any, Any, type]:
    """(header reader, body reader, request type) of one API version: kio's readers, without
    the count check of ``decode_request`` (bench/bench_request_decode.py times both)."""
    own = internal.schemas(api_key, api_version)
    request_type: Any = own[0] if own is not None else load_request_schema(api_key, api_version)
    header_reader = entity_reader(request_type.__header_schema__)
    body_reader = entity_reader(request_type)
    return header_reader, body_reader, request_type


def decode_request(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[Any, Any]:
    """(request header, request body). Raises InvalidRequest on malformed input.

    Bytes after the body are ignored, as Apache Kafka ignores them: librdkafka 2.x sends
    three extra bytes after a Metadata v13 request for all topics. Array counts are
    checked against the bytes that follow before kio reads the body (``request_bounds``:
    kio would reserve memory for any count, and an impossible one aborts the process).
    """
    header_reader, body_reader, request_type = request_codec(api_key, api_version)
    try:
        header, used = header_reader(frame, 0)
        check_counts(frame, used, request_type)
        body, _ = body_reader(frame, used)
    except MALFORMED as exc:
        raise InvalidRequest(
            f"malformed API {api_key} v{api_version} request: {type(exc).__name__}: {exc}"
        ) from exc
    return header, body


@cache
def response_type(api_key: int, api_version: int) -> type:
    own = internal.schemas(api_key, api_version)
    return own[1] if own is not None else load_response_schema(api_key, api_version)


@cache
def response_module(api_key: int, api_version: int) -> ModuleType:
    return load_payload_module(api_key, api_version, EntityType.response)


@cache
def _response_writer(cls: Any) -> Any:
    return entity_writer(cls)


def encode_response(correlation_id: int, response: Any) -> list[bytes]:
    """Frame ``response`` for the wire; returns chunks for ``transport.writelines``."""
    if isinstance(response, EncodedResponse):
        tagged = b"\x00" if response.flexible_header else b""
        body = response.body
        pieces = body if isinstance(body, list) else [body]
        size = 4 + len(tagged) + sum(len(piece) for piece in pieces)
        return [SIZE.pack(size) + CORRELATION.pack(correlation_id) + tagged, *pieces]
    cls: Any = type(response)
    buffer = ChunkBuffer()
    buffer.write(CORRELATION.pack(correlation_id))
    if cls.__header_schema__.__flexible__:
        buffer.write(b"\x00")  # empty tagged fields of header v1
    _response_writer(cls)(buffer, response)
    buffer.chunks[0] = SIZE.pack(buffer.size)
    return buffer.chunks


@cache
def field_names(cls: Any) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


@cache
def entity_fields(api_key: int, name: str) -> frozenset[str]:
    """The fields entity ``name`` of API ``api_key``'s responses has in any version."""
    versions = kio_versions(api_key)
    found: set[str] = set()
    if versions is None:
        return frozenset()
    own = internal.versions(api_key)
    for version in range(versions[0], versions[1] + 1):
        if own is not None:
            module: Any = internal
        else:
            module = response_module(api_key, version)
        cls = getattr(module, name, None)
        if cls is not None:
            found |= field_names(cls)
    return frozenset(found)


def build(cls: type, /, **values: Any) -> Any:
    """Construct a kio entity from the values its version has; others are dropped.

    Handlers describe a response once for every version: fields that a version does not
    have are ignored, missing ones take the schema default.
    """
    names = field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})
