"""What the control plane reads of a replicator over the Kafka protocol: MirrorMaker 2's
status and offsets topics on the target, and the source's partitions and end offsets.

MirrorMaker 2 (dedicated mode) is a Kafka Connect cluster whose state lives in compacted
topics of the target cluster, named after the source's alias (``MirrorMakerConfig``):

- ``mm2-status.ALIAS.internal``: key ``status-connector-NAME`` or ``status-task-NAME-N``,
  value JSON ``{"state": "RUNNING"|"FAILED"|..., "trace": ..., "worker_id": ...,
  "generation": N}``, null once deleted (:func:`parse_status`);
- ``mm2-offsets.ALIAS.internal``: Connect's source offsets; MirrorSourceConnector's key is
  ``["MirrorSourceConnector", {"cluster": ALIAS, "partition": P, "topic": T}]`` and its
  value ``{"offset": N}``, the last source offset it replicated (and committed, every
  ``offset.flush.interval.ms``): the next one to copy is N + 1 (:func:`parse_offsets`).

A compacted topic is read as a log (:class:`CompactedReader`): from where the last read
stopped to the end offset at the start of the read, the last value of each key winning, so
each read costs only the records written since. Brokers are asked directly: the leader of
each partition, learned from Metadata (for a cluster of this control plane its brokers'
``--listen`` addresses, logged in as its internal user when it is secured; for an external
source the addresses its Metadata advertises, in plaintext).
"""

from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as metadata
from kio.schema.types import TopicName

from controlplane.kafka import Admin, BrokerAddress, KafkaResponseError, Unreachable
from controlplane.kafka_groups import EARLIEST, LATEST, list_partition_offsets
from controlplane.kafka_transforms import fetch_partition
from wire.sasl import SaslCredentials

SOURCE_CONNECTOR = "MirrorSourceConnector"
CHECKPOINT_CONNECTOR = "MirrorCheckpointConnector"
HEARTBEAT_CONNECTOR = "MirrorHeartbeatConnector"
CONNECTORS = (SOURCE_CONNECTOR, CHECKPOINT_CONNECTOR, HEARTBEAT_CONNECTOR)
READ_ROUNDS_MAX = 1_000
"""Most Fetch requests one read of a partition sends (1 MiB each): a status or offsets
topic is far smaller; a partition still behind after that is read on on the next pass."""

Partition = tuple[str, int]


def status_topic(alias: str) -> str:
    return f"mm2-status.{alias}.internal"


def offsets_topic(alias: str) -> str:
    return f"mm2-offsets.{alias}.internal"


class ConnectState(enum.StrEnum):
    """A Connect connector's or task's state (``AbstractStatus.State``)."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    DESTROYED = "DESTROYED"
    UNKNOWN = "UNKNOWN"
    """A state this table does not know (a later Connect)."""


@dataclass(frozen=True)
class Status:
    """The last status record of one connector or task."""

    connector: str
    task: int | None
    """None: the connector itself."""
    state: ConnectState
    trace: str = ""
    """The Java stack trace of a FAILED one (its first line says what happened)."""

    @property
    def what(self) -> str:
        return self.connector if self.task is None else f"{self.connector} task {self.task}"

    @property
    def reason(self) -> str:
        """The first line of the trace."""
        return self.trace.strip().splitlines()[0] if self.trace.strip() else "no reason given"


@dataclass(frozen=True)
class Summary:
    """What MirrorMaker's connectors do, from the status topic."""

    running: bool
    """MirrorSourceConnector and all its tasks run (the other connectors do not fail)."""
    failed: tuple[Status, ...] = ()
    detail: str = ""
    """One line: each connector's state and its tasks' (``MirrorSourceConnector RUNNING
    (1/1 tasks)``)."""


@dataclass(frozen=True)
class Broker:
    """A broker address with the credentials its connections log in with (None: none)."""

    broker_id: int
    host: str
    port: int
    credentials: SaslCredentials | None = None


@dataclass
class CompactedReader:
    """Reads one compacted topic incrementally: ``values`` holds the last value of each key
    seen; ``positions`` the next offset to read of each partition."""

    topic: str
    values: dict[bytes, tuple[int, int, bytes]] = field(default_factory=dict)
    """key -> (partition, offset, value) of its last record (deleted keys removed)."""
    positions: dict[int, int] = field(default_factory=dict)

    def reset(self) -> None:
        self.values.clear()
        self.positions.clear()


class KafkaAccess:
    """One cluster as the control plane reads it (:class:`Broker` addresses to start from)."""

    def __init__(self, bootstrap: Sequence[BrokerAddress], timeout: float) -> None:
        self.bootstrap = list(bootstrap)
        self.timeout = timeout

    async def metadata(
        self, topics: list[str] | None = None
    ) -> tuple[dict[int, Broker], dict[str, dict[int, int]]]:
        """The brokers (id -> address) and the topics (name -> partition -> leader; internal
        and unknown topics left out), from the first bootstrap broker that answers."""
        request = metadata.MetadataRequest(
            topics=None
            if topics is None
            else tuple(
                metadata.MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        last: BaseException = Unreachable("no broker to ask")
        for broker in self.bootstrap:
            try:
                admin = Admin.to(broker, self.timeout)
                response = await admin.call(request)
            except (OSError, asyncio.IncompleteReadError) as exc:
                last = exc
                continue
            credentials = admin.credentials
            brokers = {
                int(b.node_id): Broker(int(b.node_id), str(b.host), int(b.port), credentials)
                for b in response.brokers
            }
            found: dict[str, dict[int, int]] = {}
            for topic in response.topics:
                if topic.error_code != ErrorCode.none or topic.is_internal:
                    continue
                found[str(topic.name)] = {
                    int(p.partition_index): int(p.leader_id) for p in topic.partitions
                }
            return brokers, found
        raise last

    async def offsets(self, partitions: Iterable[Partition]) -> dict[Partition, tuple[int, int]]:
        """(log start, end offset) of each partition, asked of its leader; partitions
        without a leader or whose leader does not answer are left out."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        brokers, topics = await self.metadata(sorted({t for t, _ in wanted}))
        by_leader: dict[int, list[Partition]] = {}
        for topic, partition in wanted:
            leader = topics.get(topic, {}).get(partition, -1)
            if leader in brokers:
                by_leader.setdefault(leader, []).append((topic, partition))
        results = await asyncio.gather(
            *(self._offsets_at(brokers[leader], parts) for leader, parts in by_leader.items()),
            return_exceptions=True,
        )
        out: dict[Partition, tuple[int, int]] = {}
        for result in results:
            if isinstance(result, dict):
                out.update(result)
        return out

    async def _offsets_at(
        self, broker: Broker, partitions: list[Partition]
    ) -> dict[Partition, tuple[int, int]]:
        admin = Admin.to(broker, self.timeout)
        starts = await list_partition_offsets(admin, partitions, EARLIEST)
        ends = await list_partition_offsets(admin, partitions, LATEST)
        return {p: (starts[p], ends[p]) for p in partitions if p in starts and p in ends}

    async def read(self, reader: CompactedReader) -> int:
        """Read ``reader``'s topic from its positions to the end offsets of now; the records
        read. KafkaResponseError(UNKNOWN_TOPIC_OR_PARTITION) when the topic does not exist."""
        brokers, topics = await self.metadata([reader.topic])
        if reader.topic not in topics:
            raise KafkaResponseError(
                ErrorCode.unknown_topic_or_partition, None, f"topic {reader.topic!r}"
            )
        count = 0
        for partition, leader in sorted(topics[reader.topic].items()):
            broker = brokers.get(leader)
            if broker is None:
                continue  # no leader now: read on the next pass
            count += await self._read_partition(reader, partition, broker)
        return count

    async def _read_partition(self, reader: CompactedReader, partition: int, broker: Broker) -> int:
        admin = Admin.to(broker, self.timeout)
        key = (reader.topic, partition)
        start = (await list_partition_offsets(admin, [key], EARLIEST))[key]
        end = (await list_partition_offsets(admin, [key], LATEST))[key]
        position = max(reader.positions.get(partition, 0), start)
        if position > end:  # the topic was recreated: start over
            reader.reset()
            position = start
        count = 0
        for _ in range(READ_ROUNDS_MAX):
            if position >= end:
                break
            fetched = await fetch_partition(admin, reader.topic, partition, position, 0)
            if fetched.error != ErrorCode.none:
                raise KafkaResponseError(
                    fetched.error, None, f"fetch {reader.topic}-{partition} at {position}"
                )
            for record in fetched.records:
                if record.key is None:
                    continue
                if record.value is None:
                    reader.values.pop(record.key, None)
                else:
                    reader.values[record.key] = (partition, record.offset, record.value)
                count += 1
            if fetched.next_offset <= position:
                break  # nothing more could be read (a batch larger than a fetch)
            position = fetched.next_offset
        reader.positions[partition] = position
        return count


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def parse_status(reader: CompactedReader, since: dict[int, int] | None = None) -> dict[str, Status]:
    """The last status of each connector and task (``status-connector-NAME``,
    ``status-task-NAME-N``), keeping only records at or after ``since`` (partition ->
    offset: what a process started after that wrote)."""
    out: dict[str, Status] = {}
    for key, (partition, offset, value) in reader.values.items():
        if since is not None and offset < since.get(partition, 0):
            continue
        name = key.decode(errors="replace")
        doc = _json(value)
        if not isinstance(doc, dict):
            continue
        try:
            state = ConnectState(str(doc.get("state")))
        except ValueError:
            state = ConnectState.UNKNOWN
        trace = str(doc.get("trace") or "")
        if name.startswith("status-connector-"):
            connector = name.removeprefix("status-connector-")
            out[name] = Status(connector, None, state, trace)
        elif name.startswith("status-task-"):
            connector, _, task = name.removeprefix("status-task-").rpartition("-")
            if connector and task.isdigit():
                out[name] = Status(connector, int(task), state, trace)
    return out


def summarize(statuses: dict[str, Status]) -> Summary:
    """RUNNING when MirrorSourceConnector and every one of its tasks run and nothing FAILED."""
    failed = tuple(s for s in statuses.values() if s.state == ConnectState.FAILED)
    parts = []
    for connector in CONNECTORS:
        own = statuses.get(f"status-connector-{connector}")
        tasks = [s for s in statuses.values() if s.connector == connector and s.task is not None]
        running = sum(1 for s in tasks if s.state == ConnectState.RUNNING)
        state = own.state.value if own is not None else "not started"
        parts.append(f"{connector} {state} ({running}/{len(tasks)} tasks)")
    source = statuses.get(f"status-connector-{SOURCE_CONNECTOR}")
    source_tasks = [
        s for s in statuses.values() if s.connector == SOURCE_CONNECTOR and s.task is not None
    ]
    running = (
        not failed
        and source is not None
        and source.state == ConnectState.RUNNING
        and all(s.state == ConnectState.RUNNING for s in source_tasks)
    )
    return Summary(running, failed, ", ".join(parts))


def parse_offsets(reader: CompactedReader, alias: str) -> dict[Partition, int]:
    """MirrorSourceConnector's committed source offsets: (source topic, partition) -> the
    next source offset to replicate (the last replicated + 1)."""
    out: dict[Partition, int] = {}
    for key, (_, _, value) in reader.values.items():
        doc = _json(key)
        if not (isinstance(doc, list) and len(doc) == 2 and doc[0] == SOURCE_CONNECTOR):
            continue
        where = doc[1]
        if not isinstance(where, dict) or where.get("cluster") != alias:
            continue
        topic, partition = where.get("topic"), where.get("partition")
        offset = _json(value)
        if (
            isinstance(topic, str)
            and isinstance(partition, int)
            and isinstance(offset, dict)
            and isinstance(offset.get("offset"), int)
        ):
            out[(topic, partition)] = int(offset["offset"]) + 1
    return out
