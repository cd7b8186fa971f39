"""A small asyncio Kafka client: readiness probes and the admin requests of the Topics API.

The control plane talks to each broker directly (it never follows advertised addresses), so it
can probe one given broker and, until brokers share metadata (issue 4), apply a topic change
to every broker of a cluster. Requests and responses are kio entities; framing:

    request  := size:int32 header body        header: api_key:int16 api_version:int16
    response := size:int32 correlation_id:int32 [tagged fields] body       correlation_id:int32
                                                                            client_id:string …

One request at a time per connection; every call has a timeout. Errors: OSError and
asyncio.TimeoutError for transport problems, :class:`KafkaResponseError` for an error code.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import io
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_response_schema
from kio.schema.api_versions.v3 import request as api_versions
from kio.schema.create_topics.v7 import request as create_topics
from kio.schema.delete_topics.v6 import request as delete_topics
from kio.schema.describe_configs.v4 import request as describe_configs
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as alter_configs
from kio.schema.metadata.v12 import request as metadata
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i32Timedelta

CLIENT_ID = "sluice-controlplane"
RESOURCE_TOPIC = 2  # DescribeConfigs / IncrementalAlterConfigs resource type
OP_SET, OP_DELETE = 0, 1  # IncrementalAlterConfigs operations
SOURCE_DYNAMIC_TOPIC = 1  # DescribeConfigs config_source of a topic override


class KafkaResponseError(Exception):
    """A broker answered with an error code."""

    def __init__(self, code: ErrorCode, message: str | None, what: str) -> None:
        detail = f": {message}" if message else ""
        super().__init__(f"{what}: {code.name}{detail}")
        self.code = code
        self.detail = message or code.name.replace("_", " ")


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionInfo, ...] = field(default=())

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool


class KafkaConnection:
    """One connection to one broker."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.correlation = 0

    @classmethod
    async def open(cls, host: str, port: int, timeout: float) -> KafkaConnection:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        return cls(reader, writer)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            await asyncio.wait_for(self.writer.wait_closed(), 1)

    async def __aenter__(self) -> KafkaConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, request: Any, timeout: float) -> Any:
        self.correlation += 1
        correlation = self.correlation
        header_cls = request.__header_schema__
        header = header_cls(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=i32(correlation),
            client_id=CLIENT_ID,
        )
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header)
        entity_writer(type(request))(buf, request)
        body = buf.getvalue()
        self.writer.write(struct.pack(">i", len(body)) + body)
        await self.writer.drain()
        frame = await asyncio.wait_for(self._read_frame(), timeout)
        got = struct.unpack_from(">i", frame, 0)[0]
        if got != correlation:
            raise OSError(f"correlation id {got} does not match request {correlation}")
        response_cls = load_response_schema(request.__api_key__, request.__version__)
        offset = 4
        if response_cls.__header_schema__.__flexible__:
            offset += 1  # empty tagged fields
        response, _ = entity_reader(response_cls)(frame, offset)
        return response

    async def _read_frame(self) -> bytes:
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        return await self.reader.readexactly(size)


async def probe(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when the broker answers ApiVersions without error within ``timeout``."""
    try:
        async with await KafkaConnection.open(host, port, timeout) as conn:
            response = await conn.request(
                api_versions.ApiVersionsRequest(
                    client_software_name="sluice-controlplane", client_software_version="0.1"
                ),
                timeout,
            )
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
        return False
    return bool(response.error_code == ErrorCode.none)


def _timeout_ms(seconds: float) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=int(seconds * 1000)))


class Admin:
    """Admin requests to one broker (a new connection per call: they are rare)."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout

    async def _call(self, request: Any) -> Any:
        async with await KafkaConnection.open(self.host, self.port, self.timeout) as conn:
            return await conn.request(request, self.timeout)

    async def metadata(self, topics: list[str] | None = None) -> list[TopicMetadata]:
        """Topics (all when ``topics`` is None); unknown names raise KafkaResponseError."""
        request = metadata.MetadataRequest(
            topics=None
            if topics is None
            else tuple(
                metadata.MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        response = await self._call(request)
        out = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.none:
                raise KafkaResponseError(topic.error_code, None, f"topic {topic.name!r}")
            out.append(
                TopicMetadata(
                    name=str(topic.name),
                    topic_id=str(topic.topic_id or uuid.UUID(int=0)),
                    internal=bool(topic.is_internal),
                    partitions=tuple(
                        PartitionInfo(
                            partition=int(p.partition_index),
                            leader=int(p.leader_id),
                            replicas=tuple(int(r) for r in p.replica_nodes),
                            isr=tuple(int(r) for r in p.isr_nodes),
                        )
                        for p in sorted(topic.partitions, key=lambda p: p.partition_index)
                    ),
                )
            )
        return sorted(out, key=lambda t: t.name)

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        request = create_topics.CreateTopicsRequest(
            topics=(
                create_topics.CreatableTopic(
                    name=TopicName(name),
                    num_partitions=i32(partitions),
                    replication_factor=i16(replication_factor),
                    assignments=(),
                    configs=tuple(
                        create_topics.CreatableTopicConfig(name=k, value=v)
                        for k, v in sorted(configs.items())
                    ),
                ),
            ),
            timeout=_timeout_ms(self.timeout),
            validate_only=False,
        )
        response = await self._call(request)
        for result in response.topics:
            if result.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    result.error_code, result.error_message, f"create topic {name!r}"
                )

    async def delete_topic(self, name: str) -> None:
        request = delete_topics.DeleteTopicsRequest(
            topics=(
                delete_topics.DeleteTopicState(name=TopicName(name), topic_id=uuid.UUID(int=0)),
            ),
            timeout=_timeout_ms(self.timeout),
        )
        response = await self._call(request)
        for result in response.responses:
            if result.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    result.error_code, result.error_message, f"delete topic {name!r}"
                )

    async def describe_topic_configs(self, name: str) -> list[ConfigEntry]:
        request = describe_configs.DescribeConfigsRequest(
            resources=(
                describe_configs.DescribeConfigsResource(
                    resource_type=i8(RESOURCE_TOPIC), resource_name=name, configuration_keys=None
                ),
            ),
            include_synonyms=False,
            include_documentation=False,
        )
        response = await self._call(request)
        out: list[ConfigEntry] = []
        for result in response.results:
            if result.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    result.error_code, result.error_message, f"describe configs of {name!r}"
                )
            out += [
                ConfigEntry(str(c.name), c.value, int(c.config_source), bool(c.read_only))
                for c in result.configs
            ]
        return sorted(out, key=lambda c: c.name)

    async def alter_topic_configs(self, name: str, set_: dict[str, str], remove: list[str]) -> None:
        changes = [
            alter_configs.AlterableConfig(name=k, config_operation=i8(OP_SET), value=v)
            for k, v in sorted(set_.items())
        ] + [
            alter_configs.AlterableConfig(name=k, config_operation=i8(OP_DELETE), value=None)
            for k in remove
        ]
        request = alter_configs.IncrementalAlterConfigsRequest(
            resources=(
                alter_configs.AlterConfigsResource(
                    resource_type=i8(RESOURCE_TOPIC), resource_name=name, configs=tuple(changes)
                ),
            ),
            validate_only=False,
        )
        response = await self._call(request)
        for result in response.responses:
            if result.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    result.error_code, result.error_message, f"alter configs of {name!r}"
                )
