"""The options of ``format("sluice")``: Spark's Kafka source options, plus ``sluice.*``.

Spark hands a data source its options in a case-insensitive dict (keys lowercased), so
every lookup here is by lowercased key. :func:`read_options` validates them once, in the
planner, and returns a frozen, picklable :class:`ReadOptions`; executors only ever see that
value (and the splits of the plan), never a client.

Offsets JSON is Spark's: ``{"topic": {"0": 23, "1": -2}}`` with -2 for earliest and -1 for
latest; timestamps JSON the same shape with milliseconds since the epoch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark.control_plane import with_cluster
from spark.keys import BOOTSTRAP, KAFKA_PREFIX, S3_PREFIX, OptionError
from tiered.config import ObjectStoreSettings

EARLIEST = -2
LATEST = -1
ISOLATION = "isolation.level"
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

# Java client properties Spark users pass through ``kafka.*`` that librdkafka lacks or that
# the data source sets itself: dropped instead of failing the consumer's creation.
_JAVA_ONLY = {
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "value.serializer",
    "interceptor.classes",
    "auto.offset.reset",
    "enable.auto.commit",
    "group.id",
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
    "ssl.truststore.type",
    "ssl.keystore.type",
    "default.api.timeout.ms",
    "request.timeout.ms",
}
_JAAS = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, before it is resolved against the brokers."""

    kind: str
    """``earliest``, ``latest``, ``offsets`` (per partition), ``timestamp`` (one for all
    partitions) or ``timestamps`` (per partition)."""
    per_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)
    """Offsets (-2 earliest, -1 latest) or timestamps (ms), by (topic, partition)."""
    timestamp: int = -1


@dataclass(frozen=True)
class Selection:
    """Which topic partitions: exactly one of Spark's ``subscribe``, ``subscribePattern``,
    ``assign``."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics

    def describe_topics(self) -> list[str] | None:
        """Topic names for DescribeRemoteLog (None: every topic, for a pattern)."""
        if self.pattern is not None:
            return None
        if self.assigned:
            return sorted({t for t, _ in self.assigned})
        return list(self.topics)


DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    selection: Selection
    starting: OffsetSpec
    ending: OffsetSpec
    include_headers: bool = False
    fail_on_data_loss: bool = True
    timestamp_strategy: str = "error"
    """``startingOffsetsByTimestampStrategy``: ``error`` or ``latest`` when no offset has
    a timestamp at or after the one asked for."""
    max_offsets_per_trigger: int | None = None
    min_partitions: int = 0
    kafka_conf: Mapping[str, str] = field(default_factory=dict)
    """librdkafka properties for the hot reads and the planner (from ``kafka.*``)."""
    store: ObjectStoreSettings | None = None
    """Where tiered segments are read from; None: read everything through the brokers."""
    chunk_bytes: int = 16 * 1024 * 1024
    """``sluice.read.chunk.bytes``: bytes per ranged GET of a segment object."""
    split_bytes: int = DEFAULT_SPLIT_BYTES
    """``sluice.read.split.bytes``: consecutive tiered segments of a partition are read by
    one Spark task while they add up to at most this (0: a task per segment)."""
    prefetch_chunks: int = 1
    """``sluice.read.prefetch.chunks``: ranged GETs a tiered split keeps queued ahead of
    the chunk being decoded (0: none; each holds a chunk of memory)."""
    rows_per_batch: int = 10_000
    """``sluice.read.rows.per.batch``: rows per Arrow batch handed to Spark."""
    hot_timeout_ms: int = 60_000
    """``sluice.hot.read.timeout.ms``: a hot read with no progress for this long fails."""
    describe_remote: bool = True
    """``sluice.tiered.read``: ``direct`` (default; the object store when sluice.s3.* are
    given) or ``broker`` (everything through Kafka fetches)."""

    @property
    def read_committed(self) -> bool:
        """``kafka.isolation.level=read_committed``: offsets end at the last stable offset
        (the planner's consumer asks for it), hot reads skip aborted records (librdkafka)
        and tiered reads drop them with the segment's ``.txnindex``."""
        return self.kafka_conf.get(ISOLATION) == READ_COMMITTED


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    return None if value is None else str(value)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise OptionError(f"{name}: expected true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def _int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"{name}: not an integer: {raw!r}") from None
    if value < 0:
        raise OptionError(f"{name}: must not be negative: {value}")
    return value


MAX_PREFETCH_CHUNKS = 8


def _prefetch(options: Mapping[str, str]) -> int:
    value = _int(options, "sluice.read.prefetch.chunks", 1)
    assert value is not None
    if value > MAX_PREFETCH_CHUNKS:
        raise OptionError(
            f"sluice.read.prefetch.chunks: at most {MAX_PREFETCH_CHUNKS}, got {value} (each "
            "holds sluice.read.chunk.bytes of an executor's memory)"
        )
    return value


def _json_partitions(name: str, raw: str) -> dict[tuple[str, int], int]:
    try:
        doc: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{name}: not JSON ({exc}): {raw!r}") from None
    if not isinstance(doc, dict):
        raise OptionError(f'{name}: expected {{"topic": {{"partition": value}}}}, got {raw!r}')
    out: dict[tuple[str, int], int] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise OptionError(f"{name}: partitions of {topic!r} must be an object")
        for part, value in parts.items():
            try:
                out[(str(topic), int(part))] = int(value)
            except (TypeError, ValueError):
                raise OptionError(f"{name}: bad entry {topic}/{part}: {value!r}") from None
    return out


def offset_spec(
    options: Mapping[str, str], which: str, default: str, *, streaming: bool
) -> OffsetSpec:
    """``startingOffsets`` / ``endingOffsets`` and their timestamp forms (``which`` is
    ``starting`` or ``ending``); as Spark, a global timestamp wins over per-partition
    timestamps, which win over offsets."""
    timestamp = _get(options, f"{which}Timestamp")
    if timestamp is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(timestamp))
        except ValueError:
            raise OptionError(f"{which}Timestamp: not milliseconds: {timestamp!r}") from None
    by_time = _get(options, f"{which}OffsetsByTimestamp")
    if by_time is not None:
        return OffsetSpec("timestamps", _json_partitions(f"{which}OffsetsByTimestamp", by_time))
    raw = _get(options, f"{which}Offsets")
    name = f"{which}Offsets"
    if raw is None:
        raw = default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        kind = text.lower()
        if not streaming and which == "starting" and kind == "latest":
            raise OptionError("startingOffsets: latest is not allowed for batch queries")
        if which == "ending" and kind == "earliest":
            raise OptionError("endingOffsets: earliest is not allowed")
        return OffsetSpec(kind)
    offsets = _json_partitions(name, text)
    for (topic, part), value in offsets.items():
        if value < EARLIEST:
            raise OptionError(f"{name}: bad offset {value} for {topic}-{part}")
        if not streaming and which == "starting" and value == LATEST:
            raise OptionError(f"{name}: latest (-1) is not allowed for batch queries")
        if which == "ending" and value == EARLIEST:
            raise OptionError(f"{name}: earliest (-2) is not allowed")
    return OffsetSpec("offsets", offsets)


def selection(options: Mapping[str, str]) -> Selection:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if _get(options, n) is not None]
    if len(given) != 1:
        raise OptionError(
            "exactly one of 'subscribe', 'subscribePattern' or 'assign' must be given"
            + (f" (got {', '.join(given)})" if given else "")
        )
    raw = _get(options, given[0]) or ""
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe: no topic given")
        return Selection(topics=topics)
    if given[0] == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"subscribePattern: bad regular expression: {exc}") from None
        return Selection(pattern=raw)
    try:
        doc: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f'assign: not JSON ({exc}); expected {{"topic": [0, 1]}}') from None
    if not isinstance(doc, dict) or not all(isinstance(v, list) for v in doc.values()):
        raise OptionError(f'assign: expected {{"topic": [0, 1]}}, got {raw!r}')
    assigned = tuple(sorted((str(t), int(p)) for t, parts in doc.items() for p in parts))
    if not assigned:
        raise OptionError("assign: no partition given")
    return Selection(assigned=assigned)


def kafka_conf(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options as librdkafka properties; Java-only keys are dropped, and a
    PLAIN or SCRAM ``sasl.jaas.config`` becomes ``sasl.username`` / ``sasl.password``."""
    conf: dict[str, str] = {}
    for key, value in options.items():
        if not key.startswith(KAFKA_PREFIX):
            continue
        name = key[len(KAFKA_PREFIX) :]
        if name == "sasl.jaas.config":
            for what, text in _JAAS.findall(str(value)):
                conf[f"sasl.{what}"] = text
            continue
        if name in _JAVA_ONLY:
            continue
        conf[name] = str(value)
    conf.setdefault(ISOLATION, READ_UNCOMMITTED)  # Spark's (the Java default)
    if conf[ISOLATION] not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise OptionError(
            f"kafka.{ISOLATION}: expected {READ_UNCOMMITTED} (the default) or {READ_COMMITTED}, "
            f"got {conf[ISOLATION]!r}"
        )
    return conf


def store_settings(options: Mapping[str, str]) -> ObjectStoreSettings | None:
    """``sluice.s3.X`` options are the ``tiered.s3.X`` settings; None when none is given."""
    raw = {
        "tiered.s3." + key[len(S3_PREFIX) :]: str(value)
        for key, value in options.items()
        if key.startswith(S3_PREFIX)
    }
    if not raw:
        return None
    known = set(ObjectStoreSettings.keys())
    unknown = sorted(k for k in raw if k not in known)
    if unknown:
        names = ", ".join(S3_PREFIX + k[len("tiered.s3.") :] for k in unknown)
        raise OptionError(f"unknown object store option(s): {names}")
    try:
        return ObjectStoreSettings.from_properties(raw)
    except ValueError as exc:
        raise OptionError(str(exc).replace("tiered.s3.", S3_PREFIX)) from None


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    lowered = with_cluster({str(k).lower(): str(v) for k, v in options.items()})
    bootstrap = _get(lowered, BOOTSTRAP)
    if not bootstrap:
        raise OptionError(
            "option 'kafka.bootstrap.servers' is required (or 'sluice.cluster', a cluster "
            "name the control plane knows)"
        )
    if streaming and any(
        _get(lowered, n) is not None
        for n in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
    ):
        raise OptionError("ending offsets are not allowed in streaming queries")
    strategy = (_get(lowered, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy: expected error or latest")
    mode = (_get(lowered, "sluice.tiered.read") or "direct").lower()
    if mode not in ("direct", "broker"):
        raise OptionError("sluice.tiered.read: expected direct or broker")
    store = store_settings(lowered)
    max_per_trigger = _int(lowered, "maxOffsetsPerTrigger", None)
    if max_per_trigger == 0:
        raise OptionError("maxOffsetsPerTrigger: must be positive")
    return ReadOptions(
        bootstrap=bootstrap,
        selection=selection(lowered),
        starting=offset_spec(
            lowered, "starting", "latest" if streaming else "earliest", streaming=streaming
        ),
        ending=offset_spec(lowered, "ending", "latest", streaming=streaming),
        include_headers=_bool(lowered, "includeHeaders", False),
        fail_on_data_loss=_bool(lowered, "failOnDataLoss", True),
        timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_int(lowered, "minPartitions", 0) or 0,
        kafka_conf=kafka_conf(lowered),
        store=store if mode == "direct" else None,
        chunk_bytes=_int(lowered, "sluice.read.chunk.bytes", 16 * 1024 * 1024) or 1 << 20,
        split_bytes=_int(lowered, "sluice.read.split.bytes", DEFAULT_SPLIT_BYTES) or 0,
        prefetch_chunks=_prefetch(lowered),
        rows_per_batch=_int(lowered, "sluice.read.rows.per.batch", 10_000) or 10_000,
        hot_timeout_ms=_int(lowered, "sluice.hot.read.timeout.ms", 60_000) or 60_000,
        describe_remote=store is not None and mode == "direct",
    )
