"""A small asyncio Kafka client: readiness probes, the admin requests of the Topics API,
the partition reassignments of a scale-in and the produce of the control plane's usage
events.

The control plane talks to each broker directly (it never follows advertised addresses): it
probes one given broker, and sends an admin request to any one broker of the cluster (every
broker answers every admin request, forwarding metadata changes to the active controller),
trying the next one when a broker cannot be reached (:func:`on_any`). Requests and responses
are kio entities, framed by the wire package (``wire.client``). One request at a time per
connection; every call has a timeout. Errors: OSError and
asyncio.TimeoutError for transport problems (:class:`Unreachable`, an OSError, when no
connection could be opened: nothing was sent), :class:`KafkaResponseError` for an error code.

Credentials travel with the broker's address: a broker of a secured cluster (its records'
``credentials``: the cluster's internal user) is reached on its internal SASL_PLAINTEXT
listener, and every new connection authenticates first (``wire.client.Channel``); a refused
login is ``wire.sasl.SaslFailed``, an OSError. Nothing here holds credentials of its own.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kio.schema.alter_partition_reassignments.v0 import request as alter_reassignments
from kio.schema.api_versions.v3 import request as api_versions
from kio.schema.create_partitions.v3 import request as create_partitions
from kio.schema.create_topics.v7 import request as create_topics
from kio.schema.delete_topics.v6 import request as delete_topics
from kio.schema.describe_cluster.v1 import request as describe_cluster
from kio.schema.describe_configs.v4 import request as describe_configs
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as alter_configs
from kio.schema.list_partition_reassignments.v0 import request as list_reassignments
from kio.schema.metadata.v12 import request as metadata
from kio.schema.produce.v9 import request as produce
from kio.schema.types import BrokerId, TopicName
from kio.schema.unregister_broker.v0 import request as unregister_broker
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta

from wire.client import Channel, ConnectFailed
from wire.internal import DescribeRemoteLogRequest, FenceBrokerRequest
from wire.sasl import SaslCredentials

CLIENT_ID = "sluice-controlplane"
RESOURCE_TOPIC = 2  # DescribeConfigs / IncrementalAlterConfigs resource type
OP_SET, OP_DELETE = 0, 1  # IncrementalAlterConfigs operations
SOURCE_DYNAMIC_TOPIC = 1  # DescribeConfigs config_source of a topic override


T = TypeVar("T")


Unreachable = ConnectFailed
"""No connection to the broker could be opened (refused, timed out): nothing was sent."""


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
class Reassignment:
    """A partition being moved (ListPartitionReassignments)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool


class KafkaConnection:
    """One connection to one broker (the wire package's :class:`~wire.client.Channel`)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    @classmethod
    async def open(
        cls, host: str, port: int, timeout: float, credentials: SaslCredentials | None = None
    ) -> KafkaConnection:
        """A connection, authenticated with ``credentials`` when given."""
        channel = Channel(
            host, port, client_id=CLIENT_ID, connect_timeout=timeout, credentials=credentials
        )
        await channel.connect()
        return cls(channel)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> KafkaConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, request: Any, timeout: float) -> Any:
        return await self.channel.request(request, timeout)


async def probe(
    host: str, port: int, timeout: float = 1.0, credentials: SaslCredentials | None = None
) -> bool:
    """True when the broker answers ApiVersions without error within ``timeout`` (after a
    login with ``credentials`` when given)."""
    try:
        async with await KafkaConnection.open(host, port, timeout, credentials) as conn:
            response = await conn.request(
                api_versions.ApiVersionsRequest(
                    client_software_name="sluice-controlplane", client_software_version="0.1"
                ),
                timeout,
            )
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
        return False
    return bool(response.error_code == ErrorCode.none)


async def probe_broker(broker: BrokerAddress, timeout: float) -> bool:
    """:func:`probe` of ``broker`` with the credentials its address carries (False when they
    cannot be read)."""
    try:
        credentials = broker.credentials
    except OSError:
        return False
    return await probe(broker.host, broker.port, timeout, credentials)


async def registered(broker: BrokerAddress, timeout: float) -> bool:
    """True when ``broker``'s own metadata lists it as a live (registered, unfenced) broker
    (DescribeCluster): it answers ApiVersions before its registration reaches the
    controller, and until then a topic cannot be placed on it."""
    try:
        live = await Admin.to(broker, timeout).live_broker_ids()
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, KafkaResponseError):
        return False
    return broker.broker_id in live


def _timeout_ms(seconds: float) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=int(seconds * 1000)))


class Admin:
    """Admin requests to one broker (a new connection per call: they are rare), logged in
    with ``credentials`` when given (:meth:`to` takes them from the broker's address)."""

    def __init__(
        self, host: str, port: int, timeout: float, credentials: SaslCredentials | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.credentials = credentials

    @classmethod
    def to(cls, broker: BrokerAddress, timeout: float) -> Admin:
        """Admin requests to ``broker``, with the credentials its address carries."""
        return cls(broker.host, broker.port, timeout, broker.credentials)

    async def call(self, request: Any) -> Any:
        """One request on a new connection; the response (error codes are not checked)."""
        async with await KafkaConnection.open(
            self.host, self.port, self.timeout, self.credentials
        ) as conn:
            return await conn.request(request, self.timeout)

    async def live_broker_ids(self) -> set[int]:
        """The brokers this broker's metadata shows registered and unfenced."""
        response = await self.call(
            describe_cluster.DescribeClusterRequest(include_cluster_authorized_operations=False)
        )
        if response.error_code != ErrorCode.none:
            raise KafkaResponseError(
                response.error_code, response.error_message, "describe cluster"
            )
        return {int(b.broker_id) for b in response.brokers}

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
        response = await self.call(request)
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
        response = await self.call(request)
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
        response = await self.call(request)
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
        response = await self.call(request)
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
        response = await self.call(request)
        for result in response.responses:
            if result.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    result.error_code, result.error_message, f"alter configs of {name!r}"
                )

    async def alter_partition_reassignments(
        self, moves: dict[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], KafkaResponseError]:
        """Start moving partitions to new replica lists (None cancels a partition's move).

        Returns the partitions the broker refused, with their error; a top-level error raises.
        """
        by_topic: dict[str, list[alter_reassignments.ReassignablePartition]] = {}
        for (topic, partition), replicas in sorted(moves.items()):
            by_topic.setdefault(topic, []).append(
                alter_reassignments.ReassignablePartition(
                    partition_index=i32(partition),
                    replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
                )
            )
        request = alter_reassignments.AlterPartitionReassignmentsRequest(
            timeout=_timeout_ms(self.timeout),
            topics=tuple(
                alter_reassignments.ReassignableTopic(name=TopicName(t), partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
        response = await self.call(request)
        if response.error_code != ErrorCode.none:
            raise KafkaResponseError(
                response.error_code, response.error_message, "alter partition reassignments"
            )
        refused: dict[tuple[str, int], KafkaResponseError] = {}
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code != ErrorCode.none:
                    key = (str(topic.name), int(p.partition_index))
                    refused[key] = KafkaResponseError(
                        p.error_code, p.error_message, f"reassign {key[0]}-{key[1]}"
                    )
        return refused

    async def list_partition_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        """Every partition being moved now."""
        request = list_reassignments.ListPartitionReassignmentsRequest(
            timeout=_timeout_ms(self.timeout), topics=None
        )
        response = await self.call(request)
        if response.error_code != ErrorCode.none:
            raise KafkaResponseError(
                response.error_code, response.error_message, "list partition reassignments"
            )
        return {
            (str(topic.name), int(p.partition_index)): Reassignment(
                replicas=tuple(int(r) for r in p.replicas),
                adding=tuple(int(r) for r in p.adding_replicas),
                removing=tuple(int(r) for r in p.removing_replicas),
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def create_partitions(self, name: str, total: int) -> None:
        """Raise the partition count of topic ``name`` to ``total`` (the broker places them)."""
        request = create_partitions.CreatePartitionsRequest(
            topics=(
                create_partitions.CreatePartitionsTopic(
                    name=TopicName(name), count=i32(total), assignments=None
                ),
            ),
            timeout=_timeout_ms(self.timeout),
            validate_only=False,
        )
        response = await self.call(request)
        for result in response.results:
            if result.error_code != ErrorCode.none:
                raise KafkaResponseError(
                    result.error_code, result.error_message, f"add partitions to {name!r}"
                )

    async def describe_remote_log(self, topics: list[str] | None = None) -> dict[str, Any]:
        """What the remote tier holds (Sluice's DescribeRemoteLog; the JSON document of
        ``wire.internal``)."""
        payload = json.dumps({"version": 1, "topics": topics}).encode()
        response = await self.call(DescribeRemoteLogRequest(payload=payload))
        if response.error_code != ErrorCode.none:
            raise KafkaResponseError(
                response.error_code, response.error_message, "describe remote log"
            )
        doc: dict[str, Any] = json.loads(response.payload)
        return doc

    async def produce(self, topic: str, partition: int, batch: bytes) -> int:
        """Append one record batch (``wire.record_batch.encode_batch``) to ``topic``-
        ``partition``, led by this broker, with acks=all: its base offset, once every
        in-sync replica has it (the control plane's usage events, ``metering.py``)."""
        request = produce.ProduceRequest(
            transactional_id=None,
            acks=i16(-1),
            timeout=_timeout_ms(self.timeout),
            topic_data=(
                produce.TopicProduceData(
                    name=TopicName(topic),
                    partition_data=(
                        produce.PartitionProduceData(index=i32(partition), records=Records(batch)),
                    ),
                ),
            ),
        )
        response = await self.call(request)
        part = response.responses[0].partition_responses[0]
        if part.error_code != ErrorCode.none:
            raise KafkaResponseError(
                part.error_code, part.error_message, f"produce to {topic}-{partition}"
            )
        return int(part.base_offset)

    async def fence_broker(self, broker_id: int, incarnation: str, reason: str) -> bool:
        """Have the controller fence broker ``broker_id``'s registration of process
        ``incarnation`` (FenceBroker); True if this fenced it, False if there was nothing
        to fence (already fenced, or registered again by a new process)."""
        response = await self.call(
            FenceBrokerRequest(broker_id=i32(broker_id), incarnation=incarnation, reason=reason)
        )
        if response.error_code != ErrorCode.none:
            raise KafkaResponseError(
                response.error_code, response.error_message, f"fence broker {broker_id}"
            )
        return bool(response.fenced)

    async def unregister_broker(self, broker_id: int) -> None:
        response = await self.call(
            unregister_broker.UnregisterBrokerRequest(broker_id=BrokerId(broker_id))
        )
        if response.error_code != ErrorCode.none:
            raise KafkaResponseError(
                response.error_code, response.error_message, f"unregister broker {broker_id}"
            )


class BrokerAddress(Protocol):
    @property
    def broker_id(self) -> int: ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def credentials(self) -> SaslCredentials | None:
        """What a connection to it authenticates with (None: nothing); OSError when they
        cannot be read."""


async def on_any(
    brokers: Sequence[BrokerAddress],
    call: Callable[[Admin], Awaitable[T]],
    timeout: float,
    *,
    read_only: bool = False,
) -> T:
    """Run one admin call on the first broker that takes it, in the order given.

    The next broker is tried when a broker cannot be reached (nothing was sent), and, for a
    ``read_only`` call, after any transport failure (a change that may have been applied is
    not sent twice). Kafka error codes are answers: they are raised, not retried. The last
    transport error is raised when no broker took the call.
    """
    if not brokers:
        raise Unreachable("no broker to send the request to")
    last: BaseException | None = None
    for broker in brokers:
        try:
            return await call(Admin.to(broker, timeout))
        except Unreachable as exc:
            last = exc
        except (OSError, asyncio.IncompleteReadError) as exc:  # TimeoutError included
            if not read_only:
                raise
            last = exc
    assert last is not None
    raise last
