"""The Spark transformations of the pipeline: events -> hourly, daily, models, and a
month's usage rows for its invoice.

Tables (Parquet; ``day`` is a YYYY-MM-DD string, ``hour`` a UTC timestamp):

- ``hourly/`` partitioned by ``cluster``, ``day``: hour, dimension, resource, topic,
  principal, quantity (decimal(38,0), raw units), unit. Rebuilt only for the (cluster, day)
  partitions that received new events (dynamic partition overwrite).
- ``daily/`` partitioned by ``cluster``: day, dimension, resource, topic, principal,
  quantity, unit. Rebuilt from ``hourly/`` for each cluster that received new events.
- ``models/`` partitioned by ``cluster``: hour, broker_type, model: the broker type of each
  hour that has ``broker_ms`` usage (the one with the most broker-milliseconds in that hour,
  by name on a tie) and its pricing model (``billing.catalog.model_of``).

Dedup: of the rows of one (cluster NAME, cluster id, key), the pipeline keeps those of the
record at the lowest (partition, offset) (archived rows: partition 2**31-1); re-sent
copies of an event carry the same key and the same ``start_ms``, so they fall in the same
``day`` and one day's events are enough to remove them.

A month's invoice rows: the month's hourly rows of every cluster, each priced under its
hour's pricing model: ``broker_ms`` under its own broker type's model, any other dimension
under the model of its (cluster, hour) in ``models/``, or, for an hour without
``broker_ms``, that of the nearest hour of the cluster that has one (the earlier one on a
tie), or ``provisioned`` when the cluster has none.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DecimalType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from billing.catalog import PricingModel, UnknownBrokerType, model_of
from billing.ingest import EVENT_SCHEMA
from billing.invoice import UsageRow
from wire.usage import UNITS, Dimension

QUANTITY = DecimalType(38, 0)
BROKER_MS = Dimension.BROKER_MS.value
_ITEMS = ("dimension", "resource", "topic", "principal")

HOURLY_SCHEMA = StructType(
    [
        StructField("hour", TimestampType()),
        *(StructField(c, StringType()) for c in _ITEMS),
        StructField("quantity", QUANTITY),
        StructField("unit", StringType()),
        StructField("cluster", StringType()),
        StructField("day", StringType()),
    ]
)
DAILY_SCHEMA = StructType(
    [
        StructField("day", StringType()),
        *(StructField(c, StringType()) for c in _ITEMS),
        StructField("quantity", QUANTITY),
        StructField("unit", StringType()),
        StructField("cluster", StringType()),
    ]
)
MODELS_SCHEMA = StructType(
    [
        StructField("hour", TimestampType()),
        StructField("broker_type", StringType()),
        StructField("model", StringType()),
        StructField("cluster", StringType()),
    ]
)


class UnknownBrokerTypeInUsage(ValueError):
    """``broker_ms`` usage under a name that is no broker type; names cluster and type."""


def _literal_map(pairs: Iterable[tuple[str, str]]) -> Column:
    items = list(chain.from_iterable((F.lit(k), F.lit(v)) for k, v in pairs))
    if not items:
        return F.create_map().cast("map<string,string>")
    return F.create_map(*items)


def _unit() -> Column:
    return _literal_map((d.value, u) for d, u in UNITS.items())[F.col("dimension")]


EVENT_PATH = r"/events/cluster=([^/]+)/(?:cluster_id=([^/]+)/)?(?:archive/)?day=([^/]+)/[^/]+$"
"""An event file's path: its cluster NAME, its incarnation's id (absent in a sink of the
layout before id-sinks), its day."""


def read_event_files(
    session: SparkSession, files: Sequence[Path], legacy_ids: Mapping[str, str]
) -> DataFrame:
    """The rows of these files of the events tables (sinks' committed files and archive
    files), with ``cluster``, ``cluster_id`` and ``day`` from their paths
    (:data:`EVENT_PATH`; the id of a legacy sink ``events/cluster=<c>/`` from ``legacy_ids``),
    in one scan. The caller takes each sink's files from its own log
    (``ingest.committed_files``), so a file of a batch that never committed is never read."""
    data = StructType([f for f in EVENT_SCHEMA.fields if f.name != "day"])
    rows = session.read.schema(data).parquet(*(str(f) for f in files))
    path = F.col("_metadata.file_path")
    cluster = F.regexp_extract(path, EVENT_PATH, 1)
    legacy = _literal_map(legacy_ids.items())[cluster]
    return rows.select(
        *data.fieldNames(),
        F.regexp_extract(path, EVENT_PATH, 3).alias("day"),
        cluster.alias("cluster"),
        F.coalesce(F.nullif(F.regexp_extract(path, EVENT_PATH, 2), F.lit("")), legacy).alias(
            "cluster_id"
        ),
    )


def by_cluster_day(events: DataFrame) -> DataFrame:
    """``events`` hash-partitioned by (cluster, day): the dedup window, the hourly sums and
    the write of hourly's (cluster, day) partitions then need no other shuffle, and each
    (cluster, day) partition gets one file."""
    return events.repartition("cluster", "day")


def dedup(events: DataFrame) -> DataFrame:
    """The rows of the first record (lowest partition, offset) of each (cluster, id, key):
    two incarnations of a name may write the same keys (the control plane's
    ``controlplane/0/<bucket>``), each counts. Re-sent copies of an event are in its day, so
    the window is per (cluster, id, day, key); an archived copy (partition 2**31-1) loses to
    the topic's."""
    first = F.min(F.struct("kafka_partition", "kafka_offset")).over(
        Window.partitionBy("cluster", "cluster_id", "day", "key")
    )
    return (
        events.withColumn("_first", first)
        .where(
            (F.col("_first.kafka_partition") == F.col("kafka_partition"))
            & (F.col("_first.kafka_offset") == F.col("kafka_offset"))
        )
        .drop("_first")
    )


def hourly(events: DataFrame) -> DataFrame:
    """Deduplicated events summed per (cluster, hour, dimension, resource, topic,
    principal), in the hourly table's columns."""
    sums = events.groupBy("cluster", "day", "hour_ms", *_ITEMS).agg(
        F.sum(F.col("quantity").cast(QUANTITY)).cast(QUANTITY).alias("quantity")
    )
    return sums.select(
        F.timestamp_millis("hour_ms").alias("hour"),
        *_ITEMS,
        "quantity",
        _unit().alias("unit"),
        "cluster",
        "day",
    )


def daily(hourly_rows: DataFrame) -> DataFrame:
    sums = hourly_rows.groupBy("cluster", "day", *_ITEMS).agg(
        F.sum("quantity").cast(QUANTITY).alias("quantity")
    )
    return sums.select("day", *_ITEMS, "quantity", _unit().alias("unit"), "cluster")


def broker_types(hourly_rows: DataFrame) -> dict[str, PricingModel]:
    """The pricing model of every broker type in ``hourly_rows``' broker_ms usage;
    :class:`UnknownBrokerTypeInUsage` names a cluster that ran an unknown one."""
    found = (
        hourly_rows.where(F.col("dimension") == BROKER_MS)
        .select("cluster", "resource")
        .distinct()
        .collect()
    )
    models: dict[str, PricingModel] = {}
    for row in sorted(found, key=lambda r: (r["resource"], r["cluster"])):
        if row["resource"] not in models:
            models[row["resource"]] = _model_of(row["cluster"], row["resource"])
    return models


def models(hourly_rows: DataFrame, type_models: Mapping[str, PricingModel]) -> DataFrame:
    """Each (cluster, hour) with broker_ms usage: its broker type and pricing model."""
    per_type = (
        hourly_rows.where(F.col("dimension") == BROKER_MS)
        .groupBy("cluster", "hour", "resource")
        .agg(F.sum("quantity").alias("ms"))
    )
    rank = F.row_number().over(
        Window.partitionBy("cluster", "hour").orderBy(F.desc("ms"), F.asc("resource"))
    )
    top = per_type.withColumn("_rank", rank).where(F.col("_rank") == 1)
    model = _literal_map((t, m.value) for t, m in type_models.items())[F.col("resource")]
    return top.select(
        "hour", F.col("resource").alias("broker_type"), model.alias("model"), "cluster"
    )


def write_partitions(rows: DataFrame, path: Path, partition_by: Sequence[str]) -> None:
    """Overwrite the partitions ``rows`` has, keep the others (dynamic overwrite)."""
    (
        rows.write.mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")
        .partitionBy(*partition_by)
        .parquet(str(path))
    )


def read_table(session: SparkSession, path: Path, schema: StructType) -> DataFrame:
    """A table written by this module, or no rows if it was never written."""
    if not path.is_dir():
        return session.createDataFrame([], schema)
    return session.read.schema(schema).parquet(str(path))


def month_days(month: str) -> tuple[str, str]:
    """First and last day (YYYY-MM-DD) of a YYYY-MM month."""
    year, number = (int(p) for p in month.split("-"))
    last = calendar.monthrange(year, number)[1]
    return f"{month}-01", f"{month}-{last:02d}"


def hour_models(hours: DataFrame, known: DataFrame) -> DataFrame:
    """(cluster, hour, model) for every (cluster, hour) of ``hours``: its own model in
    ``known`` (the models table), else the nearest known hour's (the earlier on a tie),
    else provisioned."""
    combined = hours.select("cluster", "hour").join(
        known.select("cluster", "hour", "model"), ["cluster", "hour"], "full"
    )
    order = Window.partitionBy("cluster").orderBy("hour")
    at = F.unix_seconds("hour")
    mark = F.when(F.col("model").isNotNull(), F.struct(at.alias("at"), F.col("model")))
    before = F.last(mark, ignorenulls=True).over(
        order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    after = F.first(mark, ignorenulls=True).over(
        order.rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    nearest = (
        F.when(F.col("_before").isNull(), F.col("_after.model"))
        .when(F.col("_after").isNull(), F.col("_before.model"))
        .when(
            at - F.col("_before.at") <= F.col("_after.at") - at,
            F.col("_before.model"),
        )
        .otherwise(F.col("_after.model"))
    )
    resolved = combined.withColumn("_before", before).withColumn("_after", after)
    effective = F.coalesce(F.col("model"), nearest, F.lit(PricingModel.PROVISIONED.value))
    picked = resolved.select("cluster", "hour", effective.alias("model"))
    return hours.select("cluster", "hour").distinct().join(picked, ["cluster", "hour"], "left")


def month_usage(
    session: SparkSession, hourly_path: Path, models_path: Path, months: Sequence[str]
) -> dict[str, list[UsageRow]]:
    """Each month's usage of every cluster, summed per (cluster, model, dimension,
    resource) in raw units: what ``billing.invoice.compute_invoice`` takes (one Spark job
    for all the months)."""
    bounds = [month_days(m) for m in months]
    in_months = F.lit(False)
    for first, last in bounds:
        in_months = in_months | ((F.col("day") >= first) & (F.col("day") <= last))
    rows = read_table(session, hourly_path, HOURLY_SCHEMA).where(in_months)
    known = read_table(session, models_path, MODELS_SCHEMA)
    per_hour = hour_models(rows.select("cluster", "hour").distinct(), known)
    sums = (
        rows.join(per_hour, ["cluster", "hour"], "left")
        .withColumn("month", F.substring("day", 1, 7))
        .groupBy("month", "cluster", "model", "dimension", "resource")
        .agg(F.sum("quantity").cast(QUANTITY).alias("quantity"))
        .collect()
    )
    totals: dict[str, dict[tuple[str, PricingModel, Dimension, str], int]] = {m: {} for m in months}
    for r in sums:
        dimension = Dimension(r["dimension"])
        model = PricingModel(r["model"])
        if dimension is Dimension.BROKER_MS:  # under its own type's model, whatever the hour's
            model = _model_of(r["cluster"], r["resource"])
        key = (r["cluster"], model, dimension, r["resource"])
        month = totals[r["month"]]
        month[key] = month.get(key, 0) + int(r["quantity"])
    return {
        m: [UsageRow(*key, quantity=q) for key, q in sorted(sums_of.items())]
        for m, sums_of in totals.items()
    }


def _model_of(cluster: str, name: str) -> PricingModel:
    try:
        return model_of(name)
    except UnknownBrokerType as exc:
        raise UnknownBrokerTypeInUsage(
            f"cluster {cluster!r} has broker_ms usage under broker type {name!r}: {exc}; "
            "give the cluster a known broker type (the control plane meters the one it was "
            "created with)"
        ) from None
