"""WebAssembly transforms of the Transforms API, spoken to the brokers in Sluice's private
Transforms API (32002, ``wire.internal``: JSON documents) and the Kafka protocol.

- **Deploy**: the module and the definition go to one broker (the first that can be
  reached), which validates them, stores the module and has the active controller record
  the definition; a redeploy of a name replaces it and continues from its committed offsets.
  The name's rule (1-128 of letters, digits, ``.``, ``_``, ``-``) is checked here first.
- **Pause / resume / delete**: to one broker, which forwards them to the active controller.
- **Describe / list**: every broker is asked (each reports the runners of the input
  partitions it leads) and the answers are merged over every partition of the input topic
  (Metadata). A partition no broker reports is PARTITION_PAUSED when the transform is
  paused, else PARTITION_UNASSIGNED; its committed offset comes from the transform's
  progress group (``__sluice_transform.<name>``, OffsetFetch at its coordinator) and its lag
  from the end offset at its leader (ListOffsets), when they answer.
- **Settling**: a change is committed by the controller before the broker answers, but the
  other brokers apply it a moment later; after each change the control plane waits (up to
  ``kafka.request.timeout.ms``) until every broker that answers shows it, so the next call
  sees its own write wherever it is asked.

The guests' log lines are read by ``transform_logs.py``; the requests themselves are in
``kafka_transforms.py`` (Transforms, Fetch) and ``kafka_groups.py`` (the group's offsets).

Broker errors: RESOURCE_NOT_FOUND is TRANSFORM_NOT_FOUND, INVALID_REQUEST INVALID_TRANSFORM
(the broker's message says why), UNKNOWN_TOPIC_OR_PARTITION TOPIC_NOT_FOUND (naming the
missing topic); others as the Topics API maps them.
"""

from __future__ import annotations

import asyncio
import enum
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from controlplane import errors
from controlplane.kafka import Admin, KafkaResponseError, TopicMetadata, on_any
from controlplane.kafka_groups import (
    EARLIEST,
    LATEST,
    fetch_offsets,
    find_group_coordinator,
    list_partition_offsets,
)
from controlplane.kafka_transforms import transforms_call
from controlplane.store import BrokerRecord, Store
from controlplane.topics import map_kafka_error

T = TypeVar("T")

PROGRESS_GROUP_PREFIX = "__sluice_transform."
"""The consumer group that holds a transform's committed offsets
(dataplane/transforms/progress.py): ``__sluice_transform.<name>``."""
NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""A transform's name (transforms.proto)."""
TRANSPORT = (TimeoutError, OSError, asyncio.IncompleteReadError)
SETTLE_POLL = 0.05
"""Seconds between two looks at brokers a change has not reached yet."""


class TransformState(enum.StrEnum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    STARTING = "STARTING"


class PartitionState(enum.StrEnum):
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    UNASSIGNED = "UNASSIGNED"


RUNNER_STATES = {
    "starting": PartitionState.STARTING,
    "running": PartitionState.RUNNING,
    "failed": PartitionState.FAILED,
    "stopped": PartitionState.STARTING,  # a runner being replaced (or PAUSED: see below)
}
"""A broker's runner state (dataplane/transforms/runner.py ``RunnerState``)."""
PREFERENCE = [PartitionState.RUNNING, PartitionState.FAILED, PartitionState.STARTING]
"""Which of two reports of one partition (leadership just moved) is shown when neither
comes from the leader Metadata names."""


@dataclass(frozen=True)
class PartitionStatus:
    partition: int
    state: PartitionState
    broker: int = -1
    """The broker that runs it; -1 when none does."""
    error: str = ""
    committed_offset: int = -1
    """Next input offset to process; -1 when nothing is committed (or it is not known)."""
    lag: int = -1
    """Input records not processed yet; -1 when not known."""
    processed: int = 0
    outputs: int = 0


@dataclass(frozen=True)
class TransformView:
    cluster: str
    name: str
    input_topic: str
    output_topics: tuple[str, ...]
    env: dict[str, str]
    module_sha256: str
    module_size: int
    abi: str
    version: int
    paused: bool
    state: TransformState
    partitions: tuple[PartitionStatus, ...] = field(default=())

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions if p.lag > 0)


def overall_state(paused: bool, partitions: Sequence[PartitionStatus]) -> TransformState:
    if paused:
        return TransformState.PAUSED
    states = {p.state for p in partitions}
    if PartitionState.FAILED in states:
        return TransformState.FAILED
    if states & {PartitionState.STARTING, PartitionState.UNASSIGNED} or not partitions:
        return TransformState.STARTING
    return TransformState.RUNNING


def _newest(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The most recent of several brokers' copies of one definition: a deploy bumps
    ``deployed``, a resume ``resumed``, a pause sets ``paused`` at the same counts."""
    return max(
        entries,
        key=lambda e: (int(e.get("deployed", 0)), int(e.get("resumed", 0)), bool(e.get("paused"))),
    )


def merge_partitions(
    definition: Mapping[str, Any],
    reports: Sequence[Mapping[str, Any]],
    partition_count: int,
    leaders: Mapping[int, int],
) -> list[PartitionStatus]:
    """One status per partition of the input topic (``partition_count``; partitions only
    reports name are kept too) from the brokers' runner reports; partitions nobody reports
    are PAUSED or UNASSIGNED (their offsets are filled in later)."""
    paused = bool(definition.get("paused"))
    by_partition: dict[int, list[Mapping[str, Any]]] = {}
    for report in reports:
        by_partition.setdefault(int(report["partition"]), []).append(report)
    out = []
    for p in sorted(set(range(partition_count)) | set(by_partition)):
        found = by_partition.get(p, [])
        if not found:
            unrun = PartitionState.PAUSED if paused else PartitionState.UNASSIGNED
            out.append(PartitionStatus(p, unrun))
            continue
        from_leader = [r for r in found if int(r.get("broker", -1)) == leaders.get(p)]
        chosen = min(from_leader or found, key=lambda r: _rank(_runner_state(r, paused)))
        out.append(
            PartitionStatus(
                partition=p,
                state=_runner_state(chosen, paused),
                broker=int(chosen.get("broker", -1)),
                error=str(chosen.get("error") or ""),
                committed_offset=int(chosen.get("committed_offset", -1)),
                lag=int(chosen.get("lag", -1)),
                processed=int(chosen.get("processed", 0)),
                outputs=int(chosen.get("outputs", 0)),
            )
        )
    return out


def _rank(state: PartitionState) -> int:
    return PREFERENCE.index(state) if state in PREFERENCE else len(PREFERENCE)


def _runner_state(report: Mapping[str, Any], paused: bool) -> PartitionState:
    raw = str(report.get("state", ""))
    if raw == "stopped" and paused:
        return PartitionState.PAUSED
    return RUNNER_STATES.get(raw, PartitionState.STARTING)


def transform_error(
    exc: KafkaResponseError, cluster: str, name: str, topic: str = ""
) -> errors.ControlPlaneError:
    """The one place where a broker's answer to a Transforms request becomes a typed error."""
    about = {"cluster": cluster, "transform": name}
    if exc.code == ErrorCode.resource_not_found:
        return errors.TransformNotFound(
            f"transform {name!r} not found in cluster {cluster!r}", **about
        )
    if exc.code == ErrorCode.invalid_request:
        return errors.InvalidTransform(f"transform {name!r} refused: {exc.detail}", **about)
    if exc.code in (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id):
        message = (
            f"topic {topic!r} not found in cluster {cluster!r}: create it before deploying "
            f"transform {name!r}"
            if topic
            else f"{exc.detail} (cluster {cluster!r})"
        )
        return errors.TopicNotFound(message, **about, topic=topic)
    return map_kafka_error(exc, cluster, topic)


class TransformOps:
    def __init__(self, store_: Store, timeout: float) -> None:
        self.store = store_
        self.timeout = timeout

    def brokers(self, cluster: str) -> list[BrokerRecord]:
        return errors.ready_brokers(self.store, cluster)

    async def on_any(
        self,
        cluster: str,
        name: str,
        what: str,
        call: Callable[[Admin], Awaitable[T]],
        *,
        read_only: bool,
    ) -> T:
        """One call on one broker of the cluster (the next one if it cannot be reached);
        transport failures are BROKER_UNAVAILABLE (Kafka errors are the caller's)."""
        brokers = self.brokers(cluster)
        try:
            return await on_any(brokers, call, self.timeout, read_only=read_only)
        except TRANSPORT as exc:
            tried = ", ".join(f"{b.broker_id} at {b.address}" for b in brokers)
            why = "closed the connection" if isinstance(exc, asyncio.IncompleteReadError) else exc
            raise errors.BrokerUnavailable(
                f"broker(s) {tried} of cluster {cluster!r} did not answer {what}: "
                f"{why or type(exc).__name__}",
                cluster=cluster,
                transform=name,
            ) from None

    async def _change(
        self, cluster: str, name: str, operation: str, doc: dict[str, Any], module: bytes = b""
    ) -> dict[str, Any]:
        """A deploy, pause, resume or delete: the recorded definition the broker answers."""
        try:
            answer = await self.on_any(
                cluster,
                name,
                f"transforms {operation}",
                lambda a: transforms_call(a, operation, doc, module),
                read_only=False,
            )
        except KafkaResponseError as exc:
            topic = ""
            if exc.code == ErrorCode.unknown_topic_or_partition:
                topic = await self._missing_topic(cluster, doc)
            raise transform_error(exc, cluster, name, topic) from None
        recorded: dict[str, Any] = answer["transform"]
        return recorded

    async def _missing_topic(self, cluster: str, doc: Mapping[str, Any]) -> str:
        """The first topic of a deploy that the cluster does not have ("" when all exist
        now)."""
        try:
            topics = await self.on_any(
                cluster, "", "metadata", lambda a: a.metadata(), read_only=True
            )
        except (KafkaResponseError, errors.BrokerUnavailable):
            return ""
        have = {t.name for t in topics}
        wanted = [str(doc.get("input_topic", "")), *map(str, doc.get("output_topics", []))]
        return next((t for t in wanted if t not in have), "")

    # ------------------------------------------------------------------ reading

    async def _every_broker(self, cluster: str) -> dict[int, list[dict[str, Any]]]:
        """Every broker's describe answer (broker id -> its transforms), of the brokers that
        answer; BROKER_UNAVAILABLE when none does."""
        brokers = self.brokers(cluster)
        results = await asyncio.gather(
            *(
                transforms_call(Admin.to(b, self.timeout), "describe", {"names": None})
                for b in brokers
            ),
            return_exceptions=True,
        )
        out: dict[int, list[dict[str, Any]]] = {}
        failed = []
        for broker, result in zip(brokers, results, strict=True):
            if isinstance(result, KafkaResponseError):
                raise transform_error(result, cluster, "")
            if isinstance(result, BaseException):
                if not isinstance(result, TRANSPORT):
                    raise result
                failed.append(f"{broker.broker_id} at {broker.address}: {result}")
                continue
            out[broker.broker_id] = list(result.get("transforms", []))
        if not out:
            raise errors.BrokerUnavailable(
                f"no broker of cluster {cluster!r} answered (transforms describe): "
                + "; ".join(failed),
                cluster=cluster,
            )
        return out

    async def _topics(self, cluster: str, names: Sequence[str]) -> dict[str, TopicMetadata]:
        """Metadata of those of ``names`` that exist."""
        if not names:
            return {}
        try:
            every = await self.on_any(
                cluster, "", "metadata", lambda a: a.metadata(), read_only=True
            )
        except KafkaResponseError as exc:
            raise map_kafka_error(exc, cluster, "") from None
        wanted = set(names)
        return {t.name: t for t in every if t.name in wanted}

    async def _views(self, cluster: str, name: str | None, *, detail: bool) -> list[TransformView]:
        answers = await self._every_broker(cluster)
        copies: dict[str, list[dict[str, Any]]] = {}
        reports: dict[str, list[dict[str, Any]]] = {}
        for entries in answers.values():
            for entry in entries:
                if name is not None and entry.get("name") != name:
                    continue
                copies.setdefault(str(entry["name"]), []).append(entry)
                reports.setdefault(str(entry["name"]), []).extend(entry.get("partitions", []))
        if name is not None and name not in copies:
            raise errors.TransformNotFound(
                f"transform {name!r} not found in cluster {cluster!r}",
                cluster=cluster,
                transform=name,
            )
        definitions = {n: _newest(c) for n, c in copies.items()}
        topics = await self._topics(
            cluster, sorted({str(d["input_topic"]) for d in definitions.values()})
        )
        views = []
        for transform, definition in sorted(definitions.items()):
            meta = topics.get(str(definition["input_topic"]))
            count = len(meta.partitions) if meta is not None else 0
            leaders = {p.partition: p.leader for p in meta.partitions} if meta else {}
            partitions = merge_partitions(definition, reports[transform], count, leaders)
            if detail:
                partitions = await self._unreported(cluster, definition, partitions, meta)
            views.append(self._view(cluster, definition, partitions, detail=detail))
        return views

    def _view(
        self,
        cluster: str,
        definition: Mapping[str, Any],
        partitions: Sequence[PartitionStatus],
        *,
        detail: bool,
    ) -> TransformView:
        paused = bool(definition.get("paused"))
        return TransformView(
            cluster=cluster,
            name=str(definition["name"]),
            input_topic=str(definition["input_topic"]),
            output_topics=tuple(map(str, definition.get("output_topics", []))),
            env={str(k): str(v) for k, v in dict(definition.get("env", {})).items()},
            module_sha256=str(definition.get("module_sha256", "")),
            module_size=int(definition.get("module_size", 0)),
            abi=str(definition.get("abi", "")),
            version=int(definition.get("deployed", 0)),
            paused=paused,
            state=overall_state(paused, partitions),
            partitions=tuple(partitions) if detail else (),
        )

    async def _unreported(
        self,
        cluster: str,
        definition: Mapping[str, Any],
        partitions: list[PartitionStatus],
        meta: TopicMetadata | None,
    ) -> list[PartitionStatus]:
        """Committed offsets and lag of the partitions no runner reports (paused,
        unassigned), from the progress group and the leaders; left unknown (-1) when those
        do not answer."""
        missing = {p.partition for p in partitions if p.broker < 0}
        if not missing or meta is None:
            return partitions
        committed = await self._committed(cluster, str(definition["name"]), meta.name)
        ends = await self._leader_offsets(cluster, meta, missing, LATEST)
        starts = await self._leader_offsets(
            cluster, meta, {p for p in missing if committed.get(p, -1) < 0}, EARLIEST
        )
        out = []
        for status in partitions:
            p = status.partition
            if p not in missing:
                out.append(status)
                continue
            offset = committed.get(p, -1)
            position = offset if offset >= 0 else starts.get(p, -1)
            end = ends.get(p, -1)
            lag = max(0, end - position) if end >= 0 and position >= 0 else -1
            out.append(PartitionStatus(p, status.state, committed_offset=offset, lag=lag))
        return out

    async def _committed(self, cluster: str, name: str, topic: str) -> dict[int, int]:
        """The offsets the transform committed on ``topic``'s partitions ({} when its
        progress group's coordinator does not answer)."""
        brokers = self.brokers(cluster)
        group = PROGRESS_GROUP_PREFIX + name
        try:
            found = await on_any(
                brokers, lambda a: find_group_coordinator(a, group), self.timeout, read_only=True
            )
            record = next((b for b in brokers if b.broker_id == found.broker_id), None)
            admin = (
                Admin.to(record, self.timeout)
                if record is not None
                else Admin(found.host, found.port, self.timeout, brokers[0].credentials)
            )
            offsets = await fetch_offsets(admin, group)
        except (KafkaResponseError, *TRANSPORT):
            return {}
        return {p: c.offset for (t, p), c in offsets.items() if t == topic}

    async def _leader_offsets(
        self, cluster: str, meta: TopicMetadata, partitions: set[int], timestamp: int
    ) -> dict[int, int]:
        """The offset at ``timestamp`` (EARLIEST, LATEST) of ``partitions`` of a topic, from
        their leaders (those that answer)."""
        by_id = {b.broker_id: b for b in self.brokers(cluster)}
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for p in meta.partitions:
            if p.partition in partitions and p.leader in by_id:
                by_leader.setdefault(p.leader, []).append((meta.name, p.partition))
        out: dict[int, int] = {}
        for leader, keys in sorted(by_leader.items()):
            admin = Admin.to(by_id[leader], self.timeout)
            try:
                found = await list_partition_offsets(admin, keys, timestamp)
            except (KafkaResponseError, *TRANSPORT):
                continue
            out.update({p: offset for (_, p), offset in found.items()})
        return out

    # ------------------------------------------------------------------ API

    async def deploy(
        self,
        cluster: str,
        name: str,
        *,
        module: bytes,
        input_topic: str,
        output_topics: Sequence[str],
        env: Mapping[str, str],
    ) -> TransformView:
        """Validate and deploy (or redeploy) ``name``; the transform once every broker
        knows it (its partitions are usually STARTING then: the module is compiled)."""
        self.brokers(cluster)
        if not NAME.fullmatch(name):
            raise errors.InvalidTransform(
                f"invalid transform name {name!r}: 1 to 128 letters, digits, '.', '_' and '-'",
                cluster=cluster,
                transform=name,
            )
        doc = {
            "name": name,
            "input_topic": input_topic,
            "output_topics": list(output_topics),
            "env": dict(env),
        }
        recorded = await self._change(cluster, name, "deploy", doc, module)
        await self._settle(cluster, name, lambda e: e is not None and _reached(e, recorded))
        return await self.describe(cluster, name)

    async def pause(self, cluster: str, name: str) -> TransformView:
        recorded = await self._change(cluster, name, "pause", {"name": name})
        await self._settle(cluster, name, lambda e: e is not None and _reached(e, recorded))
        return await self.describe(cluster, name)

    async def resume(self, cluster: str, name: str) -> TransformView:
        recorded = await self._change(cluster, name, "resume", {"name": name})
        await self._settle(cluster, name, lambda e: e is not None and _reached(e, recorded))
        return await self.describe(cluster, name)

    async def delete(self, cluster: str, name: str) -> None:
        await self._change(cluster, name, "delete", {"name": name})
        await self._settle(cluster, name, lambda e: e is None)

    async def describe(self, cluster: str, name: str) -> TransformView:
        (view,) = await self._views(cluster, name, detail=True)
        return view

    async def list(self, cluster: str) -> list[TransformView]:
        return await self._views(cluster, None, detail=False)

    async def _settle(
        self, cluster: str, name: str, shows: Callable[[dict[str, Any] | None], bool]
    ) -> None:
        """Wait until every broker that answers shows a change (``shows`` of its copy of
        the definition, None when it has none), for up to ``kafka.request.timeout.ms``."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                answers = await self._every_broker(cluster)
            except errors.BrokerUnavailable:
                return
            if all(
                shows(next((e for e in entries if e.get("name") == name), None))
                for entries in answers.values()
            ):
                return
            await asyncio.sleep(SETTLE_POLL)


def _reached(copy: Mapping[str, Any], recorded: Mapping[str, Any]) -> bool:
    """A broker's copy of a definition shows the change that recorded ``recorded``."""
    mine = (int(copy.get("deployed", 0)), int(copy.get("resumed", 0)))
    theirs = (int(recorded.get("deployed", 0)), int(recorded.get("resumed", 0)))
    if mine != theirs:
        return mine > theirs
    return bool(copy.get("paused")) == bool(recorded.get("paused"))
