"""The ``sluice`` data source on Spark's Python Data Source API (Spark >= 4.2).

Spark pickles these objects: the data source to a planning worker, the readers to
executors, the stream reader to a process per streaming query. They hold options and plans
only; every client (confluent-kafka, sockets, boto3) is created inside a method and closed
before it returns (see planning.py and reading.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from spark.control_plane import with_cluster
from spark.options import ReadOptions, kafka_conf, read_options
from spark.planning import (
    Brokers,
    InputSplits,
    PartitionRange,
    Split,
    group_splits,
    plan,
    plan_splits,
    remote_log,
    resolve,
    timestamps_wanted,
)
from spark.reading import DataLossError, read_splits
from spark.records import spark_ddl
from spark.writing import WriteOptions, check_columns, produce_rows

FORMAT = "sluice"

Offsets = dict[str, dict[str, int]]
"""A streaming offset as Spark's Kafka source writes it: ``{"topic": {"0": 42}}``."""


class SluiceDataSource(DataSource):
    """``format("sluice")``: Spark's Kafka source and sink options and schema; tiered
    segments read straight from the object store."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _include_headers(self) -> bool:
        return str(self.options.get("includeheaders", "false")).lower() == "true"

    def schema(self) -> str:
        return spark_ddl(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        return SluiceReader(read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SluiceStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return SluiceWriter(self._write_options(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return SluiceStreamWriter(self._write_options(schema, overwrite))

    def _write_options(self, schema: StructType, overwrite: bool) -> WriteOptions:
        if overwrite:
            raise ValueError("format('sluice') only appends to topics: use mode('append')")
        options = with_cluster({str(k).lower(): str(v) for k, v in self.options.items()})
        bootstrap = options.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ValueError(
                "option 'kafka.bootstrap.servers' is required (or 'sluice.cluster', a cluster "
                "name the control plane knows)"
            )
        topic = options.get("topic")
        check_columns(schema.fieldNames(), topic)
        conf = kafka_conf(options)
        conf.pop("isolation.level", None)  # a consumer property
        return WriteOptions(bootstrap=bootstrap, topic=topic, producer_conf=conf)


def _input_partitions(options: ReadOptions, splits: Sequence[Split]) -> list[InputPartition]:
    groups = group_splits(splits, options.split_bytes, options.min_partitions)
    return [InputPartition(group) for group in groups]


def _read(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    splits: InputSplits = partition.value
    return read_splits(
        splits,
        include_headers=options.include_headers,
        rows_per_batch=options.rows_per_batch,
        store=options.store,
        chunk_bytes=options.chunk_bytes,
        prefetch_chunks=options.prefetch_chunks,
        bootstrap=options.bootstrap,
        kafka_conf=options.kafka_conf,
        hot_timeout_ms=options.hot_timeout_ms,
        fail_on_data_loss=options.fail_on_data_loss,
        read_committed=options.read_committed,
    )


class SluiceReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return _input_partitions(self.options, plan(self.options).splits)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


def _to_offsets(offsets: dict[tuple[str, int], int]) -> Offsets:
    out: Offsets = {}
    for (topic, part), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = offset
    return out


def _from_offsets(doc: Offsets) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


def rate_limit(
    start: dict[tuple[str, int], int], latest: dict[tuple[str, int], int], max_rows: int
) -> dict[tuple[str, int], int]:
    """Ends that take at most about ``max_rows`` offsets, shared by the partitions in
    proportion to their backlog (Spark's Kafka source rule: a share below one rounds up,
    others down)."""
    sizes = {tp: end - start[tp] for tp, end in latest.items() if end - start[tp] > 0}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        share = max_rows * sizes[tp] / total
        step = int(share) if share >= 1 else 1
        out[tp] = min(end, start[tp] + step)
    return out


class SluiceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets per topic partition (Spark's Kafka JSON); ``maxOffsetsPerTrigger`` as the
    default read limit; Trigger.AvailableNow reads up to the offsets latest when the query
    started. New partitions start at their earliest offset, as in Spark."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.target: dict[tuple[str, int], int] | None = None

    def _latest(self) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        with Brokers(self.options) as brokers:
            partitions = brokers.partitions(self.options)
            return brokers.watermarks(partitions)

    def initialOffset(self) -> Offsets:
        options = self.options
        with Brokers(options) as brokers:
            partitions = brokers.partitions(options)
            low, high = brokers.watermarks(partitions)
            found = brokers.offsets_for_times(timestamps_wanted(options.starting, partitions))
        starts = resolve(
            options.starting,
            partitions,
            low,
            high,
            found,
            default=-2,
            strategy=options.timestamp_strategy,
            which="starting",
        )
        return _to_offsets(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()[1]

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        begin = _from_offsets(start)
        low, high = self._latest()
        latest = dict(high)
        if self.target is not None:
            latest = {tp: min(o, self.target.get(tp, low[tp])) for tp, o in latest.items()}
        for tp in latest:
            begin.setdefault(tp, low[tp])
            latest[tp] = max(latest[tp], begin[tp])
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return _to_offsets(latest)

    def reportLatestOffset(self) -> Offsets | None:
        return _to_offsets(self._latest()[1])

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin = _from_offsets(start)
        until = _from_offsets(end)
        ranges = []
        low = self._latest()[0]
        for tp, stop in sorted(until.items()):
            # a partition new since the last batch starts at its earliest offset
            first = begin.get(tp, low.get(tp, 0))
            if first < low.get(tp, 0):
                if self.options.fail_on_data_loss:
                    raise DataLossError(
                        f"{tp[0]}-{tp[1]}: offsets {first}..{low[tp] - 1} were deleted before "
                        "they were read (failOnDataLoss=false skips them)"
                    )
                first = low[tp]
            if first < stop:
                ranges.append(PartitionRange(tp[0], tp[1], first, stop))
        if not ranges:
            return []
        splits = plan_splits(ranges, remote_log(self.options), self.options.min_partitions)
        return _input_partitions(self.options, splits)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to do: like Spark's Kafka source, offsets live in the checkpoint only."""


class WriteResult(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count


class SluiceWriter(DataSourceWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return WriteResult(produce_rows(self.options, iterator))


class SluiceStreamWriter(DataSourceStreamWriter):
    """At-least-once, as Spark's Kafka sink: a batch replayed after a failure is written
    again."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return WriteResult(produce_rows(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are delivered by ``write`` already."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Delivered records cannot be taken back (at-least-once)."""
