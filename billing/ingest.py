"""Ingest: one cluster's ``__sluice_usage`` topic into its events table, exactly once.

``readStream.format("sluice")`` (the repository's own data source) reads the topic from
the earliest offset the checkpoint has not covered, a Python UDF decodes each record with
``wire.usage.UsageEvent.decode`` into one row per Usage entry, and a Structured Streaming
file sink (Parquet, partitioned by ``day``) with ``trigger(availableNow=True)`` writes them
under ``events/cluster=<name>/cluster_id=<id>/`` (:func:`sink_dir`: one sink per cluster
incarnation, so a cluster deleted and created again under its name gets a sink of its own
and the old one's events stay); the checkpoint is ``checkpoints/<name>-<id>``. The file
sink's ``_spark_metadata`` log makes the table exactly once across kills: a reader that
opens the sink's directory on its own sees committed files only.

Layout from before the id-sinks: ``events/cluster=<name>/`` itself a sink, with a
``_cluster_id`` file naming its id. Its log names its files by absolute path, so it is not
moved: it is read as is (:func:`discover_sinks`) and its own cluster keeps writing there;
another id of that name gets ``cluster=<name>/cluster_id=<id>/`` inside it (the old sink's
reader follows its log, which never names those files).

Columns: source, epoch, sequence, key, start_ms, end_ms, hour_ms, dimension, quantity
(long, raw unit), topic, principal, resource ("" when absent), kafka_partition,
kafka_offset; partition column ``day`` (YYYY-MM-DD, UTC, of the event's hour). Duplicates of
a key (re-sent events) are kept here; the rollup removes them.

A record that does not decode (``MalformedUsage``, a null value, a quantity beyond a long)
is skipped and counted: an accumulator brings (partition, offset, reason) back to the
driver, which warns with the cluster's name. It never fails the query.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from confluent_kafka import KafkaException
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from billing.spec import ClusterSource
from spark.keys import OptionError
from spark.options import read_options
from spark.planning import Brokers
from wire.usage import USAGE_TOPIC, MalformedUsage, UsageEvent

LONG_MAX = 2**63 - 1
CLUSTER_MARK = "_cluster_id"
"""File in a sink of the layout before id-sinks, ``events/cluster=<name>/``, naming the
cluster id whose checkpoint feeds it (Spark's readers skip names starting with ``_``)."""
ARCHIVE_DIR = "archive"
"""Under a sink's directory: the Parquet rows of the cluster's archive file
(``billing/archive.py``), ``archive/day=<d>/archive.parquet``, outside the sink's log."""

_ENTRY = StructType(
    [
        StructField("source", StringType()),
        StructField("epoch", LongType()),
        StructField("sequence", LongType()),
        StructField("key", StringType()),
        StructField("start_ms", LongType()),
        StructField("end_ms", LongType()),
        StructField("hour_ms", LongType()),
        StructField("dimension", StringType()),
        StructField("quantity", LongType()),
        StructField("topic", StringType()),
        StructField("principal", StringType()),
        StructField("resource", StringType()),
        StructField("day", StringType()),
    ]
)
_DECODED = StructType(
    [StructField("error", StringType()), StructField("entries", ArrayType(_ENTRY))]
)
EVENT_COLUMNS = [
    *(f.name for f in _ENTRY.fields if f.name != "day"),
    "kafka_partition",
    "kafka_offset",
]
"""The events table's data columns, in order (``day`` is its partition column)."""
EVENT_SCHEMA = StructType(
    [
        *(f for f in _ENTRY.fields if f.name != "day"),
        StructField("kafka_partition", IntegerType()),
        StructField("kafka_offset", LongType()),
        StructField("day", StringType()),
    ]
)
_EPOCH_DAY = datetime.date(1970, 1, 1).toordinal()
DAY_MS = 86_400_000

Entry = tuple[str, int, int, str, int, int, int, str, int, str, str, str, str]


class ClusterUnreachable(RuntimeError):
    """A cluster that did not answer; the message names it and says what to do."""


class SinkOwnedByAnotherCluster(RuntimeError):
    """A sink whose log has batches but whose checkpoint is gone."""


@dataclass(frozen=True)
class Sink:
    """The events of one cluster incarnation on disk: its streaming sink (``directory``, read
    through its own ``_spark_metadata`` log) and its archive rows (``directory/archive``)."""

    name: str
    id: str
    directory: Path
    legacy: bool = False
    """``events/cluster=<name>/`` itself (the layout before id-sinks)."""


def sink_dir(events_root: Path, name: str, cluster_id: str) -> Path:
    """Where the events of cluster ``name`` with id ``cluster_id`` go: its legacy sink
    ``events/cluster=<name>/`` when that one is marked with this id, else
    ``events/cluster=<name>/cluster_id=<id>/``."""
    base = events_root / f"cluster={name}"
    mark = base / CLUSTER_MARK
    if mark.is_file() and mark.read_text().strip() == cluster_id:
        return base
    return base / f"cluster_id={cluster_id}"


def discover_sinks(events_root: Path) -> list[Sink]:
    """Every sink on disk, of the spec's clusters and of deleted ones, by (name, id)."""
    out: list[Sink] = []
    if not events_root.is_dir():
        return out
    for base in sorted(events_root.glob("cluster=*")):
        if not base.is_dir():
            continue
        name = base.name.removeprefix("cluster=")
        mark = base / CLUSTER_MARK
        if mark.is_file():
            out.append(Sink(name, mark.read_text().strip(), base, legacy=True))
        for sub in sorted(base.glob("cluster_id=*")):
            if sub.is_dir():
                out.append(Sink(name, sub.name.removeprefix("cluster_id="), sub))
    return out


def archive_files(sink: Sink) -> list[str]:
    """The sink's archive Parquet files, relative to its directory."""
    root = sink.directory / ARCHIVE_DIR
    if not root.is_dir():
        return []
    return sorted(
        p.relative_to(sink.directory).as_posix()
        for p in root.glob("day=*/*.parquet")
        if p.is_file()
    )


def day_of(ms: int) -> str:
    """YYYY-MM-DD (UTC) of an epoch-millisecond instant."""
    return datetime.date.fromordinal(_EPOCH_DAY + ms // DAY_MS).isoformat()


def decode_record(key: bytes | None, value: bytes | None) -> list[Entry]:
    """The events-table entries of one usage record (without its Kafka coordinates);
    :class:`MalformedUsage` if it is not a usage event this pipeline can store."""
    if value is None:
        raise MalformedUsage("usage record with no value")
    event = UsageEvent.decode(value)
    if key is None:
        key = event.key
    try:
        text_key = key.decode()
    except UnicodeDecodeError:
        raise MalformedUsage(f"usage record key is not UTF-8: {key[:40]!r}") from None
    if max(event.epoch, event.sequence, event.end_ms) > LONG_MAX:
        raise MalformedUsage(f"usage record {text_key}: a number beyond a long")
    day = day_of(event.hour_ms)
    out: list[Entry] = []
    for usage in event.usage:
        if usage.quantity > LONG_MAX:
            raise MalformedUsage(
                f"usage record {text_key}: {usage.dimension} quantity {usage.quantity} "
                "is beyond a long"
            )
        out.append(
            (
                event.source,
                event.epoch,
                event.sequence,
                text_key,
                event.start_ms,
                event.end_ms,
                event.hour_ms,
                usage.dimension.value,
                usage.quantity,
                usage.topic,
                usage.principal,
                usage.resource,
                day,
            )
        )
    return out


@dataclass
class MalformedTally:
    """Malformed records seen by the executors: how many, and the first few by name."""

    count: int = 0
    samples: list[tuple[int, int, str]] = field(default_factory=list)
    """(partition, offset, reason), at most the tally's cap."""


class MalformedTallyParam(AccumulatorParam[MalformedTally]):
    """Adds tallies, keeping at most ``cap`` samples (a task retried reports its records
    again: the driver deduplicates samples by partition and offset)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap

    def zero(self, value: MalformedTally) -> MalformedTally:
        return MalformedTally()

    def addInPlace(self, value1: MalformedTally, value2: MalformedTally) -> MalformedTally:
        value1.count += value2.count
        room = self.cap - len(value1.samples)
        if room > 0:
            value1.samples.extend(value2.samples[:room])
        return value1


def decoder(tally: Any) -> Callable[[Any, Any, int, int], tuple[str | None, list[Entry]]]:
    """The UDF body: a record's entries, or its error (added to ``tally``) and none."""

    def decode(key: Any, value: Any, partition: int, offset: int) -> tuple[str | None, list[Entry]]:
        try:
            return None, decode_record(
                None if key is None else bytes(key), None if value is None else bytes(value)
            )
        except MalformedUsage as exc:
            reason = str(exc)[:200]
            tally.add(MalformedTally(1, [(partition, offset, reason)]))
            return reason, []

    return decode


def usage_rows(stream: DataFrame, tally: Any) -> DataFrame:
    """The events-table rows of ``stream`` (rows of ``format("sluice")``)."""
    decode = F.udf(decoder(tally), _DECODED, useArrow=False)
    decoded = stream.select(
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        decode("key", "value", "partition", "offset").alias("d"),
    )
    exploded = decoded.select("kafka_partition", "kafka_offset", F.explode("d.entries").alias("e"))
    return exploded.select(
        *(F.col(f"e.{c}").alias(c) for c in EVENT_COLUMNS if not c.startswith("kafka_")),
        "kafka_partition",
        "kafka_offset",
        F.col("e.day").alias("day"),
    )


def read_options_of(source: ClusterSource) -> dict[str, str]:
    """The ``format("sluice")`` options of a cluster's usage topic (the spec's options win
    except for the topic)."""
    options = {
        "kafka.bootstrap.servers": source.bootstrap,
        "startingOffsets": "earliest",
        **source.options,
        "subscribe": USAGE_TOPIC,
    }
    for other in ("subscribePattern", "assign"):
        options.pop(other, None)
    return options


def has_usage_topic(source: ClusterSource, timeout_ms: int) -> bool:
    """Whether the cluster has its usage topic yet; :class:`ClusterUnreachable` when it
    does not answer in time (or refuses the job's credentials)."""
    where = f"cluster {source.name!r} (bootstrap {source.bootstrap})"
    try:
        options = read_options(read_options_of(source), streaming=True)
        with Brokers(options, timeout=timeout_ms / 1000) as brokers:
            brokers.partitions(options)
    except OptionError as exc:
        if "not found" in str(exc):
            return False
        raise ClusterUnreachable(f"{where}: {exc}") from None
    except KafkaException as exc:
        raise ClusterUnreachable(
            f"{where} did not answer within {timeout_ms} ms ({exc.args[0].str()}): check "
            f"that its brokers run (cloudctl describe-cluster {source.name}), then run "
            "billing again (cloudctl billing run); the other clusters were billed"
        ) from None
    return True


@dataclass
class IngestResult:
    cluster: str
    records: int = 0
    """Records read in this run (Spark's numInputRows, over its micro-batches)."""
    batches: int = 0
    malformed: int = 0
    samples: list[tuple[int, int, str]] = field(default_factory=list)
    offsets: dict[int, int] = field(default_factory=dict)
    """Next offset per partition the events table holds (the checkpoint's last commit)."""
    topic_exists: bool = True


def claim_sink(events_dir: Path, checkpoint: Path) -> None:
    """Check that ``events_dir`` can be continued by ``checkpoint``: a sink whose metadata
    log has batches must be continued by the checkpoint that wrote them (with another one,
    Spark would skip the new batches as already written)."""
    if (events_dir / "_spark_metadata").is_dir() and not checkpoint.is_dir():
        raise SinkOwnedByAnotherCluster(
            f"{events_dir} has a sink log but its checkpoint {checkpoint} does not exist: "
            "restore the checkpoint, or move the directory away to read the usage topic "
            "again from its start, then run billing again"
        )
    events_dir.mkdir(parents=True, exist_ok=True)


def ingest(
    session: SparkSession,
    source: ClusterSource,
    events_dir: Path,
    checkpoint: Path,
    *,
    malformed_cap: int,
    on_batch: Callable[[int, int], None] | None = None,
) -> IngestResult:
    """Run the cluster's streaming query with Trigger.AvailableNow to its end.
    ``on_batch(batches, records)`` is called as micro-batches complete."""
    claim_sink(events_dir, checkpoint)
    tally = session.sparkContext.accumulator(MalformedTally(), MalformedTallyParam(malformed_cap))
    stream = session.readStream.format("sluice").options(**read_options_of(source)).load()
    query = (
        usage_rows(stream, tally)
        .writeStream.format("parquet")
        .queryName(f"billing-ingest-{source.name}")
        .partitionBy("day")
        .option("path", str(events_dir))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    result = IngestResult(source.name)
    seen = 0
    try:
        while not query.awaitTermination(1):
            seen = _progress(query.recentProgress, seen, result, on_batch)
        _progress(query.recentProgress, seen, result, on_batch)
    finally:
        query.stop()
    value: MalformedTally = tally.value
    unique = sorted({(p, o): r for p, o, r in value.samples}.items())
    result.samples = [(p, o, r) for (p, o), r in unique]
    result.malformed = max(len(result.samples), value.count)
    result.offsets = committed_offsets(checkpoint)
    return result


def _progress(
    progress: Sequence[Any],
    seen: int,
    result: IngestResult,
    on_batch: Callable[[int, int], None] | None,
) -> int:
    batches = [p for p in progress if p.get("numInputRows")]
    if len(batches) <= seen:
        return seen
    for p in batches[seen:]:
        result.batches += 1
        result.records += int(p["numInputRows"])
    if on_batch is not None:
        on_batch(result.batches, result.records)
    return len(batches)


def committed_offsets(checkpoint: Path) -> dict[int, int]:
    """The next offset per partition after the checkpoint's last committed micro-batch
    (its ``offsets/N`` for the highest N in ``commits/``): {} before the first commit."""
    batch = _last_batch(checkpoint / "commits")
    if batch is None:
        return {}
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    # Spark's offset log: "v1", the batch metadata, then one line per source
    doc = json.loads(lines[-1]) if len(lines) >= 3 else {}
    return {int(p): int(o) for p, o in (doc.get(USAGE_TOPIC) or {}).items()}


def _last_batch(directory: Path) -> int | None:
    if not directory.is_dir():
        return None
    ids = [int(p.name) for p in directory.iterdir() if p.name.isdigit()]
    return max(ids) if ids else None


def committed_files(session: SparkSession, events_dir: Path) -> list[str]:
    """The data files of the cluster's events table its sink log has committed (files of a
    killed batch that never committed are left out), as paths relative to ``events_dir``."""
    if not (events_dir / "_spark_metadata").is_dir():
        return []
    root = events_dir.resolve()
    files = session.read.schema(EVENT_SCHEMA).parquet(str(events_dir)).inputFiles()
    out = []
    for name in files:
        path = Path(unquote(urlparse(name).path))
        if path.is_relative_to(root):
            out.append(path.relative_to(root).as_posix())
    return sorted(out)


def day_of_file(relative: str) -> str | None:
    """The ``day=`` partition of a file relative to its sink (``day=D/...`` or
    ``archive/day=D/...``), None for another path."""
    for part in relative.split("/")[:2]:
        if part.startswith("day="):
            return part.removeprefix("day=")
    return None
