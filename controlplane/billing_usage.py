"""Usage, invoices and cost as the Billing API serves them (``api/billing.py``).

**Usage** (GetUsage) is the sum of two parts, in raw units per (cluster, hour, dimension,
resource, topic, principal):

- the pipeline's ``hourly/`` table (Parquet, partitioned by cluster and day; read with
  pyarrow from the output, local or S3: ``billing_output.py``), which holds every event the
  pipeline ingested, each key counted once;
- the **recent** part: the records of each cluster's ``__sluice_usage`` topic at and after
  the pipeline's offsets (those the last successful run recorded, else
  ``offsets/<cluster>.json``; from the log start when it has none), read straight from the
  partitions' leaders with Fetch (``kafka_transforms.fetch_partition``, the control plane's
  own client, logged in as the internal user on a secured cluster), decoded with
  ``wire.usage`` and counted once per record key. So an event shows as soon as its writer
  sent it (the control plane meters each minute, brokers every few seconds), before the
  next run; at most ``billing.usage.recent.max.records`` records per cluster are read (a
  warning says when the rest is left out: run the pipeline).

A copy of an event the pipeline has already ingested that a writer re-sent after the
pipeline's offsets (a produce retry across a run) counts in the recent part until the next
run, whose rollup removes it. A cluster whose usage topic does not answer gives a warning,
not an error: the tables' part is still right.

Quantities are converted to billing units with ``billing.units`` (exact fractions; GB-month
over the hours of the hour's own month), then summed per row of the grouping asked for.

**Cost** (GetCost, ``cloudctl cost-chart``): the month's usage per day, priced by
``billing.invoice.compute_invoice`` over each day's rows (one invoice per day: amounts
rounded per day and line, so days may differ from the monthly invoice by a cent per line);
the pricing model of each cluster-hour is that of its ``broker_ms`` resource (broker type),
else of the nearest hour that has one, else of the cluster's broker type now.

**Invoices** (ListInvoices, GetInvoice): ``invoices/YYYY-MM.json`` as the pipeline wrote
them (``billing.invoice.Invoice``).
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from kio.schema.errors import ErrorCode

from billing import units
from billing.catalog import DEFAULT_BROKER_TYPE, PricingModel, UnknownBrokerType, model_of
from billing.invoice import Invoice, InvoiceError, UsageRow, compute_invoice
from billing.ratecard import RateCard, RateCardError
from controlplane import errors
from controlplane.billing import BillingRunner, load_rate_card, rate_card_path
from controlplane.billing_output import (
    OutputReader,
    clusters_with_usage,
    invoice_months,
    parquet_files,
    read_offsets,
)
from controlplane.config import Settings
from controlplane.kafka import Admin, KafkaResponseError, on_any
from controlplane.kafka_groups import EARLIEST, LATEST, list_partition_offsets
from controlplane.kafka_transforms import fetch_partition
from controlplane.states import ClusterState
from controlplane.store import ClusterRecord, Store
from tiered.errors import ObjectStoreError
from wire.usage import HOUR_MS, UNITS, USAGE_TOPIC, Dimension, MalformedUsage, UsageEvent

try:  # the `billing` extra: the control plane runs without it, and says so when asked
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # pragma: no cover - the test environment has it
    pa = None
    pq = None

log = logging.getLogger("sluice.controlplane.billing")

DAY_MS = 24 * HOUR_MS
DEFAULT_RANGE_MS = DAY_MS
"""GetUsage without a start: the 24 hours before its end."""
TRANSPORT = (TimeoutError, OSError, asyncio.IncompleteReadError)
_DIMENSION_ORDER = {d: i for i, d in enumerate(Dimension)}
UNREADABLE_STATES = (ClusterState.CREATING, ClusterState.DELETING)


class GroupBy(enum.StrEnum):
    HOUR = "HOUR"
    DAY = "DAY"
    TOPIC = "TOPIC"
    PRINCIPAL = "PRINCIPAL"
    DIMENSION = "DIMENSION"


@dataclass(frozen=True, order=True)
class UsageKey:
    cluster: str
    hour_ms: int
    dimension: Dimension
    resource: str = ""
    topic: str = ""
    principal: str = ""


@dataclass
class UsageLine:
    """One row of GetUsage."""

    start_ms: int
    end_ms: int
    cluster: str
    dimension: Dimension
    resource: str
    topic: str
    principal: str
    raw: int = 0
    quantity: Fraction = field(default_factory=Fraction)

    @property
    def quantity_text(self) -> str:
        return units.format_decimal(units.to_decimal(self.quantity))

    @property
    def unit(self) -> str:
        return units.BILLING_UNITS[self.dimension].value

    @property
    def raw_unit(self) -> str:
        return UNITS[self.dimension]


@dataclass
class Usage:
    totals: dict[UsageKey, int] = field(default_factory=dict)
    """Raw quantity per key."""
    recent_events: int = 0
    warnings: list[str] = field(default_factory=list)

    def add(self, key: UsageKey, quantity: int) -> None:
        self.totals[key] = self.totals.get(key, 0) + quantity


@dataclass(frozen=True)
class CostRow:
    day: str
    cluster: str
    dimension: Dimension
    amount: Decimal


@dataclass(frozen=True)
class Cost:
    month: str
    currency: str
    rate_card: str
    rate_card_version: str
    rows: tuple[CostRow, ...]
    warnings: tuple[str, ...]

    @property
    def total(self) -> Decimal:
        return sum((r.amount for r in self.rows), Decimal("0.00"))


def hour_floor(ms: int) -> int:
    return ms - ms % HOUR_MS


def day_of(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d")


def month_of(ms: int) -> str:
    return day_of(ms)[:7]


def month_range(month: str) -> tuple[int, int]:
    """[first ms of ``month``, first ms of the next)."""
    year, number = units.parse_month(month)
    start = datetime.datetime(year, number, 1, tzinfo=datetime.UTC)
    end = datetime.datetime(year + number // 12, number % 12 + 1, 1, tzinfo=datetime.UTC)
    return int(start.timestamp() * 1000), int(end.timestamp() * 1000)


def days_between(start_ms: int, end_ms: int) -> set[str]:
    """The UTC days of [start_ms, end_ms)."""
    out = set()
    at = start_ms - start_ms % DAY_MS
    while at < end_ms:
        out.add(day_of(at))
        at += DAY_MS
    return out


# ---------------------------------------------------------------------- grouping


def group(
    usage: Mapping[UsageKey, int], by: GroupBy, start_ms: int, end_ms: int
) -> list[UsageLine]:
    """The rows of ``by``: quantities converted per hour (its month's GB-month), summed."""
    lines: dict[tuple[Any, ...], UsageLine] = {}
    for key, raw in usage.items():
        if by is GroupBy.TOPIC and not key.topic:
            continue
        if by is GroupBy.PRINCIPAL and not key.principal:
            continue
        if by is GroupBy.HOUR:
            period = (key.hour_ms, key.hour_ms + HOUR_MS)
        elif by is GroupBy.DAY:
            day = key.hour_ms - key.hour_ms % DAY_MS
            period = (day, day + DAY_MS)
        else:
            period = (start_ms, end_ms)
        topic = key.topic if by is GroupBy.TOPIC else ""
        principal = key.principal if by is GroupBy.PRINCIPAL else ""
        resource = "" if by in (GroupBy.TOPIC, GroupBy.PRINCIPAL) else key.resource
        ident = (
            period[0],
            key.cluster,
            _DIMENSION_ORDER[key.dimension],
            resource,
            topic,
            principal,
        )
        line = lines.get(ident)
        if line is None:
            line = lines[ident] = UsageLine(
                period[0], period[1], key.cluster, key.dimension, resource, topic, principal
            )
        line.raw += raw
        line.quantity += units.billing_quantity(key.dimension, raw, month_of(key.hour_ms))
    return [lines[k] for k in sorted(lines)]


def cluster_models(
    usage: Mapping[UsageKey, int], current: Mapping[str, str]
) -> dict[tuple[str, int], PricingModel]:
    """The pricing model of each cluster-hour with usage: its broker_ms resource, else the
    nearest hour's, else the cluster's broker type now (``current``), else provisioned.
    UnknownBrokerType for a type the catalog does not know."""
    known: dict[str, dict[int, PricingModel]] = {}
    hours: dict[str, set[int]] = {}
    for key in usage:
        hours.setdefault(key.cluster, set()).add(key.hour_ms)
        if key.dimension is Dimension.BROKER_MS and key.resource:
            known.setdefault(key.cluster, {})[key.hour_ms] = model_of(key.resource)
    out: dict[tuple[str, int], PricingModel] = {}
    for cluster, its_hours in hours.items():
        found = known.get(cluster, {})
        fallback = model_of(current.get(cluster, DEFAULT_BROKER_TYPE))
        for hour in its_hours:
            if hour in found:
                out[(cluster, hour)] = found[hour]
            elif found:
                nearest = min(found, key=lambda h: (abs(h - hour), h))
                out[(cluster, hour)] = found[nearest]
            else:
                out[(cluster, hour)] = fallback
    return out


def price_days(
    month: str,
    usage: Mapping[UsageKey, int],
    models: Mapping[tuple[str, int], PricingModel],
    card: RateCard,
) -> list[CostRow]:
    """Each day's usage priced as an invoice of its own (InvoiceError as compute_invoice)."""
    by_day: dict[str, list[UsageRow]] = {}
    for key, raw in usage.items():
        model = models[(key.cluster, key.hour_ms)]
        row = UsageRow(key.cluster, model, key.dimension, key.resource, raw)
        by_day.setdefault(day_of(key.hour_ms), []).append(row)
    out: list[CostRow] = []
    for day in sorted(by_day):
        invoice = compute_invoice(month, by_day[day], card)
        sums: dict[tuple[str, Dimension], Decimal] = {}
        for line in invoice.lines:
            sums[(line.cluster, line.dimension)] = (
                sums.get((line.cluster, line.dimension), Decimal("0.00")) + line.amount
            )
        out += [
            CostRow(day, cluster, dimension, amount)
            for (cluster, dimension), amount in sorted(
                sums.items(), key=lambda kv: (kv[0][0], _DIMENSION_ORDER[kv[0][1]])
            )
        ]
    return out


# ---------------------------------------------------------------------- the tables


def read_hourly(
    reader: OutputReader, cluster: str | None, start_ms: int, end_ms: int, usage: Usage
) -> None:
    """Add the ``hourly/`` rows of [start_ms, end_ms) (``cluster``'s, or all) to ``usage``."""
    if pq is None:
        raise errors.PreconditionFailed(
            "the control plane cannot read the billing tables: pyarrow is not installed "
            "(pip install 'sluice[billing]')"
        )
    for name, _day, path in parquet_files(
        reader, "hourly", cluster, days_between(start_ms, end_ms)
    ):
        data = reader.read(path)
        if data is None:
            continue  # replaced by a run meanwhile
        table = pq.read_table(pa.BufferReader(data))
        hours = _epoch_ms(table.column("hour"))
        for hour, row in zip(hours, table.drop_columns(["hour"]).to_pylist(), strict=True):
            if hour is None or not start_ms <= hour < end_ms:
                continue
            try:
                dimension = Dimension(row["dimension"])
            except ValueError:
                continue  # a dimension this control plane does not know (a newer pipeline)
            key = UsageKey(
                name,
                hour,
                dimension,
                row.get("resource") or "",
                row.get("topic") or "",
                row.get("principal") or "",
            )
            usage.add(key, int(row["quantity"] or 0))


def _epoch_ms(column: Any) -> list[int | None]:
    """A timestamp (or integer ms) column as ms since the epoch."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        column = column.cast(pa.timestamp("ms", tz=kind.tz)).cast(pa.int64())
    return [None if v is None else int(v) for v in column.to_pylist()]


def read_invoice(reader: OutputReader, month: str) -> Invoice | None:
    data = reader.read(f"invoices/{month}.json")
    if data is None:
        return None
    try:
        return Invoice.from_json(json.loads(data))
    except (ValueError, InvoiceError) as exc:
        raise errors.PreconditionFailed(
            f"the invoice of {month} in the billing output cannot be read: {exc} "
            "(run `cloudctl billing run` to write it again)",
            month=month,
        ) from None


# ---------------------------------------------------------------------- the service


class BillingReports:
    """What the Billing API reads: usage, cost, invoices."""

    def __init__(self, store: Store, settings: Settings, runner: BillingRunner) -> None:
        self.store = store
        self.settings = settings
        self.runner = runner
        self.timeout = settings.kafka_request_timeout_ms / 1000

    def _reader(self) -> OutputReader:
        try:
            return self.runner.reader()
        except ValueError as exc:
            raise errors.PreconditionFailed(f"billing.output: {exc}") from None

    async def _in_thread(self, call: Any, *args: Any) -> Any:
        try:
            return await asyncio.to_thread(call, *args)
        except ObjectStoreError as exc:
            raise errors.ObjectStoreUnavailable(
                f"the billing output {self.runner.output.uri if self.runner.output else ''} "
                f"cannot be read: {exc}"
            ) from None

    # ------------------------------------------------------------------ usage

    async def usage(self, cluster: str | None, start_ms: int, end_ms: int) -> Usage:
        """Raw usage of [start_ms, end_ms) (hours whose start lies in it)."""
        if end_ms <= start_ms:
            raise errors.BadRequest(
                "the usage range ends before it starts: give --from earlier than --to"
            )
        reader = self._reader()
        if cluster is not None and self.store.get_cluster(cluster) is None:
            known = await self._in_thread(clusters_with_usage, reader)
            if cluster not in known:
                raise errors.ClusterNotFound(
                    f"cluster {cluster!r} not found, and no usage was recorded for that name",
                    cluster=cluster,
                )
        usage = Usage()
        await self._in_thread(read_hourly, reader, cluster, start_ms, end_ms, usage)
        clusters = [
            c
            for c in self.store.list_clusters()
            if (cluster is None or c.name == cluster) and c.state not in UNREADABLE_STATES
        ]
        recorded = self.runner.recorded_offsets()
        starts = await self._in_thread(_starts, reader, [c.name for c in clusters], recorded)
        reads = await asyncio.gather(
            *(self._recent(c, starts.get(c.name)) for c in clusters), return_exceptions=True
        )
        for c, read in zip(clusters, reads, strict=True):
            if isinstance(read, BaseException):
                if not isinstance(read, (errors.ControlPlaneError, KafkaResponseError, *TRANSPORT)):
                    raise read
                why = read.message if isinstance(read, errors.ControlPlaneError) else read
                usage.warnings.append(
                    f"cluster {c.name!r}: its usage since the last billing run is missing: "
                    f"{why or type(read).__name__}"
                )
            else:
                self._merge(usage, c.name, read, start_ms, end_ms)
        return usage

    def _merge(
        self, usage: Usage, cluster: str, read: _Reading, start_ms: int, end_ms: int
    ) -> None:
        """Add the recent events of [start_ms, end_ms) and what is missing to ``usage``."""
        for event in read.events:
            if start_ms <= event.hour_ms < end_ms:
                usage.recent_events += 1
                for u in event.usage:
                    key = UsageKey(
                        cluster, event.hour_ms, u.dimension, u.resource, u.topic, u.principal
                    )
                    usage.add(key, u.quantity)
        if read.malformed:
            usage.warnings.append(
                f"cluster {cluster!r}: {read.malformed} record(s) of {USAGE_TOPIC} are not "
                "usage events and were left out"
            )
        if read.cut:
            usage.warnings.append(
                f"cluster {cluster!r}: more than {read.limit} records since the last billing "
                "run (billing.usage.recent.max.records): the rest is left out; run "
                "`cloudctl billing run`"
            )

    async def unbilled_events(self, cluster: ClusterRecord) -> list[UsageEvent]:
        """Every usage event of ``cluster``'s topic the pipeline has not ingested (at and
        after its last successful run's offsets), each key once, with no cap: what a deletion
        archives (``billing_archive.py``)."""
        start = self.runner.recorded_offsets().get(cluster.name)
        if start is None:
            start = await self._in_thread(read_offsets, self._reader(), cluster.name)
        read = await self._recent(cluster, start, limit=2**62)
        return read.events

    async def _recent(
        self, cluster: ClusterRecord, start: dict[int, int] | None, limit: int = 0
    ) -> _Reading:
        """The usage events of the cluster's usage topic at and after ``start`` (per
        partition; None: from the log start), each key once (at most ``limit`` records,
        default ``billing.usage.recent.max.records``)."""
        brokers = self.store.brokers(cluster.name)
        try:
            (meta,) = await on_any(
                brokers, lambda a: a.metadata([USAGE_TOPIC]), self.timeout, read_only=True
            )
        except KafkaResponseError as exc:
            if exc.code in (ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available):
                return _Reading(0)  # nothing metered yet
            raise errors.KafkaError(
                f"metadata of {USAGE_TOPIC}: {exc}", cluster=cluster.name
            ) from None
        by_id = {b.broker_id: b for b in brokers}
        reading = _Reading(limit or self.settings.billing_usage_recent_max_records)
        for part in meta.partitions:
            leader = by_id.get(part.leader)
            if leader is None:
                raise errors.BrokerUnavailable(
                    f"{USAGE_TOPIC}-{part.partition} has no leader now", cluster=cluster.name
                )
            admin = Admin.to(leader, self.timeout)
            await reading.partition(admin, cluster.name, part.partition, start)
            if reading.cut:
                break
        return reading

    # ------------------------------------------------------------------ cost

    async def rate_card(self) -> RateCard:
        try:
            card: RateCard = await asyncio.to_thread(load_rate_card, rate_card_path(self.settings))
        except RateCardError as exc:
            raise errors.PreconditionFailed(f"{exc} (billing.rate.card)") from None
        return card

    async def cost(self, cluster: str | None, month: str) -> Cost:
        try:
            start, end = month_range(month)
        except ValueError as exc:
            raise errors.BadRequest(str(exc), month=month) from None
        card = await self.rate_card()
        usage = await self.usage(cluster, start, end)
        current = {c.name: c.broker_type for c in self.store.list_clusters()}
        try:
            models = cluster_models(usage.totals, current)
            rows = price_days(month, usage.totals, models, card)
            version = card.version_for_month(month)
        except (UnknownBrokerType, InvoiceError, RateCardError) as exc:
            raise errors.PreconditionFailed(str(exc), month=month) from None
        return Cost(
            month, card.currency, card.name, version.version, tuple(rows), tuple(usage.warnings)
        )

    # ------------------------------------------------------------------ invoices

    async def invoices(self) -> list[Invoice]:
        reader = self._reader()

        def read_all() -> list[Invoice]:
            found = (read_invoice(reader, m) for m in invoice_months(reader))
            return [i for i in found if i is not None]

        invoices: list[Invoice] = await self._in_thread(read_all)
        return invoices

    async def invoice(self, month: str, cluster: str | None) -> Invoice:
        try:
            units.parse_month(month)
        except ValueError as exc:
            raise errors.BadRequest(str(exc), month=month) from None
        reader = self._reader()
        found: Invoice | None = await self._in_thread(read_invoice, reader, month)
        if found is None:
            raise errors.InvoiceNotFound(
                f"no invoice of {month}: the billing pipeline has not run since the month "
                "had usage (run `cloudctl billing run --wait`)",
                month=month,
            )
        if cluster is None:
            return found
        if cluster not in found.clusters and self.store.get_cluster(cluster) is None:
            raise errors.ClusterNotFound(
                f"cluster {cluster!r} not found, and the invoice of {month} has no line of it",
                cluster=cluster,
            )
        return found.for_cluster(cluster)


@dataclass
class _Reading:
    """Records of one cluster's usage topic, read partition by partition."""

    limit: int
    read: int = 0
    malformed: int = 0
    cut: bool = False
    events: list[UsageEvent] = field(default_factory=list)
    seen: set[bytes] = field(default_factory=set)

    async def partition(
        self, admin: Admin, cluster: str, partition: int, start: Mapping[int, int] | None
    ) -> None:
        """Read ``partition`` (at its leader) from ``start`` (else the log start) to its end
        offset now."""
        tp = (USAGE_TOPIC, partition)
        first = (await list_partition_offsets(admin, [tp], EARLIEST))[tp]
        end = (await list_partition_offsets(admin, [tp], LATEST))[tp]
        offset = max(first, (start or {}).get(partition, first))
        while offset < end:
            if self.read >= self.limit:
                self.cut = True
                return
            fetched = await fetch_partition(admin, USAGE_TOPIC, partition, offset, 0)
            if fetched.error == ErrorCode.offset_out_of_range:  # retention moved the start
                first = (await list_partition_offsets(admin, [tp], EARLIEST))[tp]
                if first <= offset:
                    return
                offset = first
                continue
            if fetched.error != ErrorCode.none:
                raise errors.KafkaError(
                    f"fetch {USAGE_TOPIC}-{partition}: {fetched.error.name}", cluster=cluster
                )
            for record in fetched.records:
                if record.offset < end:
                    self.take(record.key, record.value)
            if fetched.next_offset <= offset:
                return
            offset = fetched.next_offset

    def take(self, key: bytes | None, value: bytes | None) -> None:
        self.read += 1
        try:
            event = UsageEvent.decode(value or b"")
        except MalformedUsage:
            self.malformed += 1
            return
        ident = key if key is not None else event.key
        if ident not in self.seen:
            self.seen.add(ident)
            self.events.append(event)


def _starts(
    reader: OutputReader, clusters: Iterable[str], recorded: Mapping[str, dict[int, int]]
) -> dict[str, dict[int, int] | None]:
    """Where to read each cluster's usage topic from (in a thread: the files may be in S3)."""
    return {
        name: recorded[name] if name in recorded else read_offsets(reader, name)
        for name in clusters
    }
