"""Planning a read (driver side): offsets resolved against the brokers, then each topic
partition's range split into input partitions.

    [start ............................................................ end)
    | segment A (object store) | segment B (object store) | hot tail (Kafka fetch) |

One split per tiered segment overlapping the range (``copy_finished`` segments only, read
straight from the object store by the executor) and one hot split per topic partition for
the offsets above the last such segment, read with Kafka fetches from the partition leader.
Splits of a partition never overlap: a cursor walks up the range, each segment takes the
offsets from the cursor to its end, so overlapping segments (a re-upload after a failover)
or a gap between segments (read through the brokers) never yield an offset twice or lose
one. Every split is a frozen value with explicit offsets: executors resolve nothing.

The planner's clients (a confluent-kafka consumer for metadata and offsets, a socket for
DescribeRemoteLog) live only for the duration of :func:`plan`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as TP

from spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, ReadOptions
from spark.remote_log import RemoteLog, RemotePartition, describe_remote_log
from tiered.layout import segment_keys
from tiered.remote_segment import RemoteSegment
from wire.sasl import ClientSecurity

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class HotSplit:
    """Offsets ``[start, end)`` of a partition read from its leader with Kafka fetches."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class TieredSplit:
    """Offsets ``[start, end)`` of a partition read from one segment object."""

    topic: str
    partition: int
    start: int
    end: int
    key: str
    """The segment's ``.log`` object."""
    size_bytes: int
    segment_base: int
    segment_end: int
    """Last offset in the segment (inclusive)."""
    index_key: str = ""
    """The segment's ``.index`` object: where a read starting inside it begins."""
    index_bytes: int = 0
    txn_index_key: str = ""
    """The segment's ``.txnindex`` object: the aborted transactions overlapping it (read
    with read_committed)."""
    txn_index_bytes: int = 0
    """Its size; 0: the segment has none (no aborted transaction overlaps it)."""


Split = HotSplit | TieredSplit


def split_range(
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    segments: Sequence[RemoteSegment],
    cluster_id: str,
) -> list[Split]:
    """The splits of ``[start, end)`` given the partition's readable remote segments."""
    splits: list[Split] = []
    cursor = start
    for segment in sorted(segments, key=lambda s: (s.base_offset, s.end_offset)):
        if cursor >= end:
            break
        if segment.end_offset < cursor:
            continue
        if segment.base_offset >= end:
            break
        if segment.base_offset > cursor:  # a gap in the remote tier: the brokers have it
            splits.append(HotSplit(topic, partition, cursor, segment.base_offset))
            cursor = segment.base_offset
        stop = min(end, segment.end_offset + 1)
        keys = segment_keys(cluster_id, segment)
        splits.append(
            TieredSplit(
                topic,
                partition,
                cursor,
                stop,
                keys.log,
                segment.size_bytes,
                segment.base_offset,
                segment.end_offset,
                keys.index,
                segment.index_bytes,
                keys.txn_index,
                segment.txn_index_bytes,
            )
        )
        cursor = stop
    if cursor < end:
        splits.append(HotSplit(topic, partition, cursor, end))
    return splits


def split_hot(splits: list[Split], min_partitions: int) -> list[Split]:
    """Cut the largest hot splits by offsets until there are ``min_partitions`` splits
    (Spark's ``minPartitions``); tiered splits follow their segments."""
    out = list(splits)
    while len(out) < min_partitions:
        hot = [(s.end - s.start, i) for i, s in enumerate(out) if isinstance(s, HotSplit)]
        if not hot:
            break
        size, i = max(hot)
        if size < 2:
            break
        s = out[i]
        middle = s.start + size // 2
        out[i : i + 1] = [
            HotSplit(s.topic, s.partition, s.start, middle),
            HotSplit(s.topic, s.partition, middle, s.end),
        ]
    return out


InputSplits = tuple[Split, ...]
"""What one Spark input partition reads, in order: a hot split alone, or consecutive tiered
splits of one topic partition."""


def group_splits(
    splits: Sequence[Split], split_bytes: int, min_partitions: int = 0
) -> list[InputSplits]:
    """Consecutive tiered splits of a topic partition gathered into one input partition
    while their segments add up to at most ``split_bytes`` (``sluice.read.split.bytes``), so
    that small segments do not each pay a Spark task; then the largest groups halved until
    there are ``min_partitions`` input partitions (or no group has two splits left)."""
    groups: list[list[Split]] = []
    size = 0
    for split in splits:
        last = groups[-1] if groups else None
        if (
            isinstance(split, TieredSplit)
            and last is not None
            and isinstance(last[-1], TieredSplit)
            and (last[-1].topic, last[-1].partition) == (split.topic, split.partition)
            and size + split.size_bytes <= split_bytes
        ):
            last.append(split)
            size += split.size_bytes
        else:
            groups.append([split])
            size = split.size_bytes if isinstance(split, TieredSplit) else 0
    while len(groups) < min_partitions:
        widest = max(range(len(groups)), key=lambda i: len(groups[i]))
        group = groups[widest]
        if len(group) < 2:
            break
        half = len(group) // 2
        groups[widest : widest + 1] = [group[:half], group[half:]]
    return [tuple(g) for g in groups]


@dataclass(frozen=True)
class PartitionRange:
    topic: str
    partition: int
    start: int
    end: int


def resolve(
    spec: OffsetSpec,
    partitions: Sequence[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int],
    *,
    default: int,
    strategy: str,
    which: str,
) -> dict[TopicPartition, int]:
    """Offsets of a spec; ``by_time`` holds the answers to the timestamp lookups (-1: no
    record at or after the timestamp). Partitions absent from a JSON spec get ``default``
    (EARLIEST or LATEST)."""
    out: dict[TopicPartition, int] = {}
    for tp in partitions:
        if spec.kind == "earliest":
            out[tp] = earliest[tp]
        elif spec.kind == "latest":
            out[tp] = latest[tp]
        elif spec.kind == "offsets":
            value = spec.per_partition.get(tp, default)
            if value == EARLIEST:
                value = earliest[tp]
            elif value == LATEST:
                value = latest[tp]
            out[tp] = value
        else:
            found = by_time.get(tp, -1)
            if found >= 0:
                out[tp] = found
            elif which == "ending" or strategy == "latest":
                out[tp] = latest[tp]
            else:
                raise OptionError(
                    f"{which} timestamp: no record of {tp[0]}-{tp[1]} at or after it "
                    "(startingOffsetsByTimestampStrategy=latest starts such partitions at "
                    "the latest offset instead)"
                )
    return out


def timestamps_wanted(spec: OffsetSpec, partitions: Sequence[TopicPartition]) -> dict[Any, int]:
    if spec.kind == "timestamp":
        return dict.fromkeys(partitions, spec.timestamp)
    if spec.kind == "timestamps":
        return {tp: spec.per_partition[tp] for tp in partitions if tp in spec.per_partition}
    return {}


class Brokers:
    """The planner's view of the cluster through one confluent-kafka consumer (no group
    membership: metadata, watermarks and timestamp lookups only)."""

    def __init__(self, options: ReadOptions, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.consumer = Consumer(
            {
                **options.kafka_conf,
                "bootstrap.servers": options.bootstrap,
                "group.id": f"sluice-spark-planner-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "log_level": 3,
            }
        )

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> Brokers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self, options: ReadOptions) -> list[TopicPartition]:
        selection = options.selection
        if selection.assigned:
            return list(selection.assigned)
        topics = self.consumer.list_topics(timeout=self.timeout).topics
        out: list[TopicPartition] = []
        for name, meta in sorted(topics.items()):
            if not selection.matches(name):
                continue
            if meta.error is not None:
                raise OptionError(f"topic {name!r}: {meta.error}")
            out += [(name, p) for p in sorted(meta.partitions)]
        missing = [t for t in selection.topics if t not in topics]
        for name in missing:  # asked by name: the broker says why (ACLs hide from a listing)
            meta = self.consumer.list_topics(topic=name, timeout=self.timeout).topics.get(name)
            if (
                meta is not None
                and meta.error is not None
                and meta.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            ):
                raise OptionError(
                    f"topic {name!r}: not authorized (TOPIC_AUTHORIZATION_FAILED): the "
                    "kafka.sasl.* / kafka.ssl.* principal needs READ and DESCRIBE on it"
                )
        if missing:
            raise OptionError(f"topic(s) not found: {', '.join(missing)}")
        return out

    def watermarks(
        self, partitions: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        low: dict[TopicPartition, int] = {}
        high: dict[TopicPartition, int] = {}
        for tp in partitions:
            lo, hi = self.consumer.get_watermark_offsets(TP(*tp), timeout=self.timeout)
            low[tp], high[tp] = int(lo), int(hi)
        return low, high

    def offsets_for_times(self, wanted: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not wanted:
            return {}
        found = self.consumer.offsets_for_times(
            [TP(t, p, ts) for (t, p), ts in wanted.items()], timeout=self.timeout
        )
        out: dict[TopicPartition, int] = {}
        for item in found:
            if item.error is not None:
                where = f"{item.topic}-{item.partition}"
                raise OptionError(f"timestamp lookup of {where}: {item.error}")
            out[(item.topic, item.partition)] = int(item.offset)
        return out


@dataclass(frozen=True)
class Plan:
    ranges: tuple[PartitionRange, ...]
    splits: tuple[Split, ...]
    cluster_id: str | None


def offsets_range(
    options: ReadOptions, brokers: Brokers
) -> tuple[list[TopicPartition], dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Partitions and their start and end offsets for a batch read."""
    partitions = brokers.partitions(options)
    low, high = brokers.watermarks(partitions)
    start_times = brokers.offsets_for_times(timestamps_wanted(options.starting, partitions))
    end_times = brokers.offsets_for_times(timestamps_wanted(options.ending, partitions))
    common: dict[str, Any] = {"strategy": options.timestamp_strategy}
    starts = resolve(
        options.starting,
        partitions,
        low,
        high,
        start_times,
        default=EARLIEST,
        **common,
        which="starting",
    )
    ends = resolve(
        options.ending, partitions, low, high, end_times, default=LATEST, which="ending", **common
    )
    for tp in partitions:
        where = f"{tp[0]}-{tp[1]}"
        if starts[tp] < low[tp]:
            if options.fail_on_data_loss:
                raise OptionError(
                    f"{where}: starting offset {starts[tp]} is below the log start {low[tp]} "
                    "(the data is gone; failOnDataLoss=false starts at the log start)"
                )
            starts[tp] = low[tp]
        if ends[tp] > high[tp]:
            raise OptionError(f"{where}: ending offset {ends[tp]} is beyond the latest {high[tp]}")
        if starts[tp] > ends[tp]:
            raise OptionError(
                f"{where}: starting offset {starts[tp]} is after ending offset {ends[tp]}"
            )
    return partitions, starts, ends


def remote_log(options: ReadOptions) -> RemoteLog | None:
    if not options.describe_remote:
        return None
    try:
        security = ClientSecurity.from_properties(options.kafka_conf)
    except (ValueError, OSError) as exc:  # OSError: an unreadable CA or key file
        raise OptionError(f"kafka.* security options: {exc}") from None
    return describe_remote_log(
        options.bootstrap, options.selection.describe_topics(), security=security
    )


def plan_splits(
    ranges: Sequence[PartitionRange], remote: RemoteLog | None, min_partitions: int = 0
) -> list[Split]:
    splits: list[Split] = []
    for r in ranges:
        if r.start >= r.end:
            continue
        part: RemotePartition | None = None if remote is None else remote.of(r.topic, r.partition)
        segments = part.segments if part is not None else ()
        cluster_id = remote.cluster_id if remote is not None else ""
        splits += split_range(
            r.topic, r.partition, r.start, r.end, segments=segments, cluster_id=cluster_id
        )
    return split_hot(splits, min_partitions)


def plan(options: ReadOptions) -> Plan:
    """Resolve offsets and split them (a batch read)."""
    with Brokers(options) as brokers:
        partitions, starts, ends = offsets_range(options, brokers)
    ranges = tuple(PartitionRange(t, p, starts[(t, p)], ends[(t, p)]) for t, p in partitions)
    remote = remote_log(options)
    splits = plan_splits(ranges, remote, options.min_partitions)
    return Plan(ranges, tuple(splits), None if remote is None else remote.cluster_id)


def describe(splits: Sequence[Split]) -> Iterator[str]:
    for s in splits:
        kind = "tiered" if isinstance(s, TieredSplit) else "hot"
        yield f"{s.topic}-{s.partition} [{s.start}, {s.end}) {kind}"
