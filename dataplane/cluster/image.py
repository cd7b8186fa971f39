"""The metadata image: what every broker knows about its cluster, replayed from the log.

It is the Raft state machine of the metadata quorum (``apply``, ``snapshot``, ``restore``)
and the read side every handler uses: brokers, topics, partitions with replicas, ISR,
leader and epochs, configs, the producer-id watermark. Nothing here does I/O; after each
applied entry the image tells its listeners what changed (a ``Delta``), and the broker
reconciles its logs, replicas and coordinators to it.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dataplane.cluster import records as r
from dataplane.metadata import TopicInfo
from tiered.remote_segment import COPY_FINISHED, RemoteSegment
from wire.errors import (
    CorruptRecord,
    UnknownTopicOrPartition,
)

TopicPartition = tuple[str, int]
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    epoch: int
    host: str
    port: int
    raft_host: str
    raft_port: int
    incarnation: str
    fenced: bool = False
    endpoints: dict[str, list[Any]] = field(default_factory=dict)
    """Advertised [host, port] of each listener by name (RegisterBroker.endpoints)."""

    def address_on(self, listener: str | None) -> tuple[str, int] | None:
        """The address of this broker on ``listener``; None when it registered its
        listeners and that one is not among them (Kafka then leaves the broker out of
        Metadata: a client of a listener only ever learns that listener's addresses). A
        registration without listener names (older entries): its host and port."""
        if listener is None or not self.endpoints:
            return self.host, self.port
        found = self.endpoints.get(listener)
        return None if found is None else (str(found[0]), int(found[1]))


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def preferred(self) -> int:
        return self.replicas[0]


@dataclass(slots=True)
class Delta:
    """What one applied entry (or a snapshot restore) changed."""

    restored: bool = False
    created: list[str] = field(default_factory=list)
    removed: list[TopicInfo] = field(default_factory=list)
    partitions: set[TopicPartition] = field(default_factory=set)
    brokers: set[int] = field(default_factory=set)
    topic_configs: set[str] = field(default_factory=set)
    remote: set[TopicPartition] = field(default_factory=set)
    """Partitions whose remote-tier metadata changed."""
    broker_configs: bool = False
    transforms: set[str] = field(default_factory=set)
    """Transforms deployed, changed or removed."""


@dataclass(slots=True)
class RemoteLog:
    """What the remote tier holds of one partition: segments by id (copies started and
    finished, deletions started) and the log start offset (-1 until retention or
    DeleteRecords set one)."""

    segments: dict[str, RemoteSegment] = field(default_factory=dict)
    """Change it through ``put`` and ``remove`` only: they keep ``finished`` current."""
    log_start_offset: int = -1
    _finished: tuple[RemoteSegment, ...] | None = field(default=None, repr=False, compare=False)

    def put(self, segment: RemoteSegment) -> None:
        self.segments[segment.segment_id] = segment
        self._finished = None

    def remove(self, segment_id: str) -> None:
        self.segments.pop(segment_id, None)
        self._finished = None

    def finished(self) -> tuple[RemoteSegment, ...]:
        """Readable segments, by base offset (sorted once per change: every fetch below
        the local log start asks, and a partition may hold thousands)."""
        if self._finished is None:
            done = [s for s in self.segments.values() if s.state == COPY_FINISHED]
            self._finished = tuple(sorted(done, key=lambda s: s.base_offset))
        return self._finished

    def end_offset(self) -> int:
        """One past the last offset held remotely (0 when nothing is)."""
        return max((s.end_offset + 1 for s in self.finished()), default=0)

    def start_offset(self) -> int:
        """The first readable offset of the remote tier (-1 when it holds nothing)."""
        finished = self.finished()
        if not finished:
            return -1
        return max(finished[0].base_offset, self.log_start_offset)

    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.finished())


Listener = Callable[[Delta], None]


class MetadataImage:
    def __init__(self, *, node_id: int, cluster_id: str) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.applied_index = 0
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}
        """Dynamic broker configs by scope: "" the cluster default, "N" broker N."""
        self.group_configs: dict[str, dict[str, str]] = {}
        """Dynamic configs of groups by group id (GROUP config resources)."""
        self.transforms: dict[str, r.Transform] = {}
        """Deployed transforms by name."""
        self.scram: dict[str, dict[int, r.ScramCredential]] = {}
        """SCRAM credentials by user name and mechanism type (salted keys, no passwords)."""
        self.acls: dict[str, r.Acl] = {}
        """Access control entries by id."""
        self.acls_version = 0
        """Counts changes of ``acls`` (the authorizer rebuilds its index when it moves)."""
        self.next_producer_id = 1000
        self.remote: dict[TopicPartition, RemoteLog] = {}
        """The remote tier of each partition that has one."""
        self.remote_cleanup: dict[str, str] = {}
        """Deleted topics whose objects are still to delete: topic id -> name."""
        self.listeners: list[Listener] = []

    # ------------------------------------------------------------------ reads

    def get(self, name: str) -> TopicInfo:
        try:
            return self.topics[name]
        except KeyError:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}") from None

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.partitions.get((topic, partition))

    def live_brokers(self) -> list[BrokerInfo]:
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        info = self.brokers.get(broker_id)
        return None if info is None else (info.host, info.port)

    # ------------------------------------------------------------------ state machine

    def apply(self, index: int, payload: bytes) -> None:
        """Apply metadata log entry ``index``; CorruptRecord when it does not decode or a
        record's values cannot be applied (a field of the wrong type, an id that is not a
        UUID): the entry's CRC was valid, so a broker bug wrote it."""
        delta = Delta()
        for record in r.decode(payload):
            try:
                self._apply(index, record, delta)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise CorruptRecord(f"metadata log entry {index}: {record}: {exc!r}") from exc
        self.applied_index = index
        self._notify(delta)

    def _apply(self, index: int, rec: r.Record, delta: Delta) -> None:  # noqa: C901, PLR0912, PLR0915 - one branch per metadata record type
        if isinstance(rec, r.RegisterBroker):
            self.brokers[rec.broker_id] = BrokerInfo(
                rec.broker_id,
                rec.epoch,
                rec.host,
                rec.port,
                rec.raft_host,
                rec.raft_port,
                rec.incarnation,
                endpoints=dict(rec.endpoints),
            )
            delta.brokers.add(rec.broker_id)
        elif isinstance(rec, r.FenceBroker):
            known = self.brokers.get(rec.broker_id)
            if known is not None:
                self.brokers[rec.broker_id] = replace(known, fenced=True)
                delta.brokers.add(rec.broker_id)
        elif isinstance(rec, r.UnregisterBroker):
            if self.brokers.pop(rec.broker_id, None) is not None:
                delta.brokers.add(rec.broker_id)
        elif isinstance(rec, r.Topic):
            self._index(TopicInfo(rec.name, uuid.UUID(rec.topic_id), 0, 1, dict(rec.configs)))
            delta.created.append(rec.name)
        elif isinstance(rec, r.Partition):
            self._apply_partition(rec, delta)
        elif isinstance(rec, r.RemoveTopic):
            gone = self.topics_by_id.pop(uuid.UUID(rec.topic_id), None)
            if gone is not None:
                del self.topics[gone.name]
                tiered = gone.configs.get("remote.storage.enable", "").lower() == "true"
                for p in range(gone.partitions):
                    self.partitions.pop((gone.name, p), None)
                    if self.remote.pop((gone.name, p), None) is not None:
                        tiered = True
                if tiered:
                    self.remote_cleanup[rec.topic_id] = gone.name
                delta.removed.append(gone)
        elif isinstance(rec, r.TopicConfig):
            topic = self.topics.get(rec.name)
            if topic is not None:
                self._index(replace(topic, configs=dict(rec.configs)))
                delta.topic_configs.add(rec.name)
        elif isinstance(rec, r.BrokerConfig):
            if rec.configs:
                self.broker_configs[rec.scope] = dict(rec.configs)
            else:
                self.broker_configs.pop(rec.scope, None)
            delta.broker_configs = True
        elif isinstance(rec, r.Transform):
            self.transforms[rec.name] = rec
            delta.transforms.add(rec.name)
        elif isinstance(rec, r.RemoveTransform):
            self.transforms.pop(rec.name, None)
            delta.transforms.add(rec.name)
        elif isinstance(rec, r.Acl):
            self.acls[rec.id] = rec
            self.acls_version += 1
        elif isinstance(rec, r.RemoveAcl):
            self.acls.pop(rec.id, None)
            self.acls_version += 1
        elif isinstance(rec, r.ScramCredential):
            self.scram.setdefault(rec.name, {})[rec.mechanism] = rec
        elif isinstance(rec, r.RemoveScramCredential):
            users = self.scram.get(rec.name, {})
            users.pop(rec.mechanism, None)
            if not users:
                self.scram.pop(rec.name, None)
        elif isinstance(rec, r.GroupConfig):
            if rec.configs:
                self.group_configs[rec.group] = dict(rec.configs)
            else:
                self.group_configs.pop(rec.group, None)
        elif isinstance(rec, r.ProducerIds):
            self.next_producer_id = max(self.next_producer_id, rec.next_id)
        elif isinstance(rec, r.RemoteSegment):
            segment = RemoteSegment.from_dict(rec.segment)
            key = self._remote_key(segment.topic_id, segment.partition)
            if key is not None:
                self.remote.setdefault(key, RemoteLog()).put(segment)
                delta.remote.add(key)
        elif isinstance(rec, r.RemoteSegmentDeleted):
            key = self._remote_key(rec.topic_id, rec.partition)
            if key is not None and key in self.remote:
                self.remote[key].remove(rec.segment_id)
                delta.remote.add(key)
        elif isinstance(rec, r.RemoteLogStart):
            key = self._remote_key(rec.topic_id, rec.partition)
            if key is not None:
                remote = self.remote.setdefault(key, RemoteLog())
                remote.log_start_offset = max(remote.log_start_offset, rec.offset)
                delta.remote.add(key)
        elif isinstance(rec, r.RemoteTopicDeleted):
            self.remote_cleanup.pop(rec.topic_id, None)

    def _remote_key(self, topic_id: str, partition: int) -> TopicPartition | None:
        info = self.topics_by_id.get(uuid.UUID(topic_id))
        return None if info is None else (info.name, partition)

    def remote_log(self, topic: str, partition: int) -> RemoteLog | None:
        return self.remote.get((topic, partition))

    def _apply_partition(self, rec: r.Partition, delta: Delta) -> None:
        info = self.topics_by_id.get(uuid.UUID(rec.topic_id))
        if info is None:
            return
        current = self.partitions.get((info.name, rec.partition))
        if current is not None and (
            rec.partition_epoch <= current.partition_epoch
            or rec.leader_epoch < current.leader_epoch
        ):
            # decided against an older state (a controller whose image lagged): every
            # broker drops it alike, and the controller decides again from the current one
            log.warning(
                "%s-%d: ignoring a partition change of epoch %d/%d: the partition is at %d/%d",
                info.name,
                rec.partition,
                rec.leader_epoch,
                rec.partition_epoch,
                current.leader_epoch,
                current.partition_epoch,
            )
            return
        state = PartitionState(
            info.name,
            rec.partition,
            tuple(rec.replicas),
            tuple(rec.isr),
            rec.leader,
            rec.leader_epoch,
            rec.partition_epoch,
            tuple(rec.adding),
            tuple(rec.removing),
        )
        self.partitions[(info.name, rec.partition)] = state
        if rec.partition >= info.partitions or rec.partition == 0:
            self._index(
                replace(
                    info,
                    partitions=max(info.partitions, rec.partition + 1),
                    replication_factor=len(state.replicas) - len(state.adding)
                    if rec.partition == 0
                    else info.replication_factor,
                )
            )
        delta.partitions.add((info.name, rec.partition))

    def _index(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.topics_by_id[info.topic_id] = info

    def _notify(self, delta: Delta) -> None:
        for listener in list(self.listeners):
            listener(delta)

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> bytes:
        doc = {
            "applied_index": self.applied_index,
            "brokers": [
                {
                    "broker_id": b.broker_id,
                    "epoch": b.epoch,
                    "host": b.host,
                    "port": b.port,
                    "raft_host": b.raft_host,
                    "raft_port": b.raft_port,
                    "incarnation": b.incarnation,
                    "fenced": b.fenced,
                    "endpoints": b.endpoints,
                }
                for b in self.brokers.values()
            ],
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "configs": t.configs}
                for t in self.topics.values()
            ],
            "partitions": [
                {
                    "topic_id": str(self.topics[p.topic].topic_id),
                    "partition": p.partition,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "partition_epoch": p.partition_epoch,
                    "adding": list(p.adding),
                    "removing": list(p.removing),
                }
                for p in self.partitions.values()
            ],
            "broker_configs": self.broker_configs,
            "group_configs": self.group_configs,
            "transforms": [asdict(t) for t in self.transforms.values()],
            "scram": [asdict(c) for user in self.scram.values() for c in user.values()],
            "acls": [asdict(a) for a in self.acls.values()],
            "next_producer_id": self.next_producer_id,
            "remote": [
                {
                    "topic_id": str(self.topics[topic].topic_id),
                    "partition": partition,
                    "log_start_offset": remote.log_start_offset,
                    "segments": [seg.to_dict() for seg in remote.segments.values()],
                }
                for (topic, partition), remote in self.remote.items()
            ],
            "remote_cleanup": self.remote_cleanup,
        }
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    def restore(self, data: bytes) -> None:
        """Replace the image by a snapshot's; CorruptRecord when it does not parse (its CRC
        was valid, so a broker bug wrote it)."""
        try:
            self._restore(data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CorruptRecord(f"unreadable metadata snapshot: {exc!r}") from exc

    def _restore(self, data: bytes) -> None:
        doc = json.loads(data)
        self.brokers = {int(b["broker_id"]): BrokerInfo(**b) for b in doc["brokers"]}
        self.topics = {}
        self.topics_by_id = {}
        self.partitions = {}
        delta = Delta(restored=True)
        for t in doc["topics"]:
            self._index(TopicInfo(t["name"], uuid.UUID(t["id"]), 0, 1, dict(t["configs"])))
        for p in doc["partitions"]:
            self._apply_partition(r.Partition(**p), delta)
        self.broker_configs = {k: dict(v) for k, v in doc["broker_configs"].items()}
        self.group_configs = {k: dict(v) for k, v in doc.get("group_configs", {}).items()}
        self.transforms = {t["name"]: r.Transform(**t) for t in doc.get("transforms", [])}
        delta.transforms.update(self.transforms)
        self.scram = {}
        for item in doc.get("scram", []):
            credential = r.ScramCredential(**item)
            self.scram.setdefault(credential.name, {})[credential.mechanism] = credential
        self.acls = {a["id"]: r.Acl(**a) for a in doc.get("acls", [])}
        self.acls_version += 1
        self.next_producer_id = int(doc["next_producer_id"])
        self.remote = {}
        for item in doc.get("remote", []):
            key = self._remote_key(item["topic_id"], int(item["partition"]))
            if key is None:
                continue
            segments = [RemoteSegment.from_dict(d) for d in item["segments"]]
            self.remote[key] = RemoteLog(
                {seg.segment_id: seg for seg in segments}, int(item["log_start_offset"])
            )
            delta.remote.add(key)
        self.remote_cleanup = dict(doc.get("remote_cleanup", {}))
        self.applied_index = int(doc["applied_index"])
        self._notify(delta)
