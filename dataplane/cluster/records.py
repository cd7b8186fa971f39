"""Records of the metadata log (KRaft-like) and their encoding.

One Raft entry carries a list of records that apply atomically (a topic with all its
partitions, a fencing with every ISR change it causes). Entries are JSON: small, readable
with ``python -m dataplane.cluster.dump``-style tools, and never pickled. Every record
carries the full new state of what it names, so replay needs no earlier value.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from wire.errors import CorruptRecord


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """A broker (re)registered: unfenced, with a new epoch (the entry's index)."""

    broker_id: int
    epoch: int
    host: str
    port: int
    raft_host: str
    raft_port: int
    incarnation: str
    """Random per process start: a restarted broker registers again."""
    endpoints: dict[str, list[Any]] = field(default_factory=dict)
    """Every Kafka listener's advertised [host, port] by listener name (``listeners``);
    clients are given the addresses of the listener they came through. Empty in entries
    written before listeners had names: host and port serve every listener."""


@dataclass(frozen=True, slots=True)
class FenceBroker:
    """A broker stopped heartbeating (or asked to): it leads nothing and is in no ISR."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class UnregisterBroker:
    broker_id: int


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    topic_id: str
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Partition:
    """The whole state of one partition: created, or changed (leader, ISR, replicas)."""

    topic_id: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    """-1 when no replica in the ISR is alive (the partition is offline)."""
    leader_epoch: int
    partition_epoch: int
    adding: list[int] = field(default_factory=list)
    """Replicas being added by a reassignment (already in ``replicas``)."""
    removing: list[int] = field(default_factory=list)
    """Replicas a reassignment removes once the added ones are in the ISR."""


@dataclass(frozen=True, slots=True)
class RemoveTopic:
    topic_id: str


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """The topic's full set of overrides after an AlterConfigs."""

    name: str
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Dynamic broker configs of ``scope``: "" for the cluster default, "N" for broker N."""

    scope: str
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The dynamic configs of group ``group`` (Kafka's GROUP config resource, KIP-848); an
    empty map removes them."""

    group: str
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class ProducerIds:
    """Producer ids below ``next_id`` are handed out; blocks are never reused. ``broker_id``
    (-1 in entries written before blocks were per broker): the broker the block
    ending at ``next_id`` went to (Kafka's ProducerIdsRecord)."""

    next_id: int
    broker_id: int = -1


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    """A segment's state in the remote tier: ``tiered.RemoteSegment.to_dict()``, whose
    ``state`` says its copy started, finished, or its deletion started."""

    segment: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RemoteSegmentDeleted:
    """The segment's objects are deleted: it leaves the remote metadata."""

    topic_id: str
    partition: int
    segment_id: str


@dataclass(frozen=True, slots=True)
class RemoteLogStart:
    """The log start offset of a partition with a remote tier (retention, DeleteRecords)."""

    topic_id: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class RemoteTopicDeleted:
    """Every object of a deleted topic is gone from the object store."""

    topic_id: str


@dataclass(frozen=True, slots=True)
class Transform:
    """A deployed WebAssembly transform, its whole definition (a redeploy replaces it; its
    committed progress is kept). The module is stored, content-addressed by
    ``module_sha256``, in the internal topic ``__sluice_transform_modules``."""

    name: str
    input_topic: str
    output_topics: list[str]
    env: dict[str, str]
    module_sha256: str
    module_size: int
    abi: str
    """Which ABI the module imports (``transforms`` package's names)."""
    deployed: int
    """The version: 1 for the first deploy of this name, one more for each redeploy (again 1
    after a delete); runners restart when it changes."""
    paused: bool = False
    resumed: int = 0
    """Bumped by every resume: partitions that failed restart from their committed offset."""


@dataclass(frozen=True, slots=True)
class RemoveTransform:
    name: str


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """A user's SCRAM credential for one mechanism (Kafka's UserScramCredentialRecord):
    base64 salt, StoredKey and ServerKey, never a password or salted password."""

    name: str
    mechanism: int
    """1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (Kafka's ScramMechanism types)."""
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveScramCredential:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Acl:
    """An access control entry on a resource pattern (Kafka's AccessControlEntryRecord), with
    the protocol's codes (``dataplane.authorizer``)."""

    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(frozen=True, slots=True)
class RemoveAcl:
    id: str


Record = (
    RegisterBroker
    | FenceBroker
    | UnregisterBroker
    | Topic
    | Partition
    | RemoveTopic
    | TopicConfig
    | BrokerConfig
    | GroupConfig
    | ProducerIds
    | RemoteSegment
    | RemoteSegmentDeleted
    | RemoteLogStart
    | RemoteTopicDeleted
    | Transform
    | RemoveTransform
    | ScramCredential
    | RemoveScramCredential
    | Acl
    | RemoveAcl
)
_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        RegisterBroker,
        FenceBroker,
        UnregisterBroker,
        Topic,
        Partition,
        RemoveTopic,
        TopicConfig,
        BrokerConfig,
        GroupConfig,
        ProducerIds,
        RemoteSegment,
        RemoteSegmentDeleted,
        RemoteLogStart,
        RemoteTopicDeleted,
        Transform,
        RemoveTransform,
        ScramCredential,
        RemoveScramCredential,
        Acl,
        RemoveAcl,
    )
}


def encode(records: list[Record]) -> bytes:
    return json.dumps(
        [{"type": type(r).__name__, **asdict(r)} for r in records], separators=(",", ":")
    ).encode()


def decode(payload: bytes) -> list[Record]:
    try:
        raw = json.loads(payload)
        if not isinstance(raw, list):
            raise TypeError(f"a {type(raw).__name__}, not a list of records")
        out: list[Record] = []
        for item in raw:
            if not isinstance(item, dict):
                raise TypeError(f"a record that is a {type(item).__name__}, not an object")
            kind = _TYPES[item.pop("type")]
            out.append(kind(**item))
        return out
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecord(f"unreadable metadata log entry: {exc}") from exc


def new_topic_id() -> str:
    return str(uuid.uuid4())
