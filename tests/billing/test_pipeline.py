"""The billing pipeline end to end: known usage events written with confluent-kafka into
the ``__sluice_usage`` topics of two real clusters, ``python -m billing.job --spec`` run as
a process (as the control plane runs it) on local Spark, and its tables and invoices
checked against sums and a Decimal recomputation made here from the events.

The workload: hours on both sides of a month boundary (2026-10-31 22:00 to 2026-11-01 01:00)
and of a day boundary (2026-11-01 23:00, 2026-11-02 00:00); events re-sent under the same
key (to both partitions of the topic); malformed records; cluster ``alpha`` on
kafka.m5.large (provisioned), ``beta`` on express.m7g.large (express) with hours that have
no broker_ms (priced under the nearest hour's model).

The scenario runs in order (each step makes sure the ones before it ran): a first run; a
second run with nothing new (and an unreachable third cluster) that changes no byte; more
events, a run SIGKILLed during ingest and a run after it, which counts every event once;
then the same usage published to the embedded S3 server.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import random
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from billing.catalog import PricingModel
from billing.ingest import decode_record
from billing.rollup import UnknownBrokerTypeInUsage, broker_types, hour_models
from tests.billing.conftest import (
    USAGE_PARTITIONS,
    JobRun,
    consume_usage,
    create_usage_topic,
    decoded_or_none,
    high_watermarks,
    late_first_streaming_worker,
    produce,
    run_job,
    run_job_until,
    write_spec,
)
from tests.support.broker import BrokerProcess
from tests.support.processes import free_port
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.object_store import S3ObjectStore
from wire.usage import HOUR_MS, MalformedUsage, Usage, UsageEvent
from wire.usage import Dimension as D

pytestmark = pytest.mark.timeout(900)  # Spark jobs: minutes on a loaded machine

T0 = 1_793_484_000_000
"""2026-10-31T22:00:00Z."""
HOURS = [T0 + h * HOUR_MS for h in (0, 1, 2, 3, 25, 26)]
LATER_HOURS = [T0 + 26 * HOUR_MS, T0 + 27 * HOUR_MS]
"""Hours of the events written after the first runs (2026-11-02 00:00 and 01:00)."""
TYPES = {"alpha": "kafka.m5.large", "beta": "express.m7g.large"}
BROKER_HOURS = {"alpha": HOURS, "beta": HOURS[:4]}
"""beta's last two hours have usage but no broker_ms: they take the model of 01:00."""
MODELS = {"kafka.m5.large": PricingModel.PROVISIONED, "express.m7g.large": PricingModel.EXPRESS}
BUCKET = "billing-test"

CARD = """\
name = "billing-test"
currency = "USD"

[[versions]]
version = "test-1"
effective_from = 2026-01-01
source = "tests/billing"
retrieved = 2026-11-25
checked = true

[[versions.prices]]
model = "provisioned"
dimension = "broker_ms"
resource = "kafka.m5.large"
unit = "hour"
price = "0.21"

[[versions.prices]]
model = "provisioned"
dimension = "hot_storage_byte_ms"
unit = "GB-month"
price = "0.10"

[[versions.prices]]
model = "express"
dimension = "broker_ms"
resource = "express.m7g.large"
unit = "hour"
price = "0.408"

[[versions.prices]]
model = "express"
dimension = "bytes_in"
unit = "GB"
price = "0.01"

[[versions.prices]]
model = "express"
dimension = "hot_storage_byte_ms"
unit = "GB-month"
price = "0.10"
"""
PRICES = {
    (PricingModel.PROVISIONED, D.BROKER_MS, "kafka.m5.large"): Decimal("0.21"),
    (PricingModel.PROVISIONED, D.HOT_STORAGE_BYTE_MS, ""): Decimal("0.10"),
    (PricingModel.EXPRESS, D.BROKER_MS, "express.m7g.large"): Decimal("0.408"),
    (PricingModel.EXPRESS, D.BYTES_IN, ""): Decimal("0.01"),
    (PricingModel.EXPRESS, D.HOT_STORAGE_BYTE_MS, ""): Decimal("0.10"),
}
"""The card above, as this test prices usage (resource "" = any resource)."""


# --- the workload -------------------------------------------------------------------------


def partition_of(key: bytes) -> int:
    return zlib.crc32(key) % USAGE_PARTITIONS


def cluster_events(
    cluster: str, hours: list[int], broker_hours: list[int], seed: int, ticks: int = 4
) -> list[UsageEvent]:
    """Known usage of one cluster: the control plane's broker-minutes, the controller's
    partition-minutes, and a broker's traffic and storage in ``ticks`` 10 s intervals an hour."""
    rng = random.Random(seed)
    out: list[UsageEvent] = []
    for h in broker_hours:
        for minute in range(3):
            start = h + minute * 60_000
            usage: tuple[Usage, ...] = (Usage(D.BROKER_MS, 3 * 60_000, resource=TYPES[cluster]),)
            out.append(UsageEvent("controlplane", 0, start, start, start + 60_000, usage))
    sequence = seed * 10_000
    for h in hours:
        start = h + 60_000
        usage = tuple(Usage(D.PARTITION_MS, 6 * 60_000, topic=t) for t in ("orders", "audit"))
        out.append(UsageEvent("controller", 0, start, start, start + 60_000, usage))
        for tick in range(ticks):
            start = h + 120_000 + tick * 10_000
            usage = (
                Usage(
                    D.BYTES_IN, rng.randrange(10**8, 10**9), topic="orders", principal="User:app"
                ),
                Usage(D.BYTES_IN, rng.randrange(10**6, 10**7), topic="audit", principal="User:ops"),
                Usage(
                    D.BYTES_OUT, rng.randrange(10**8, 10**9), topic="orders", principal="User:app"
                ),
                Usage(D.HOT_STORAGE_BYTE_MS, rng.randrange(10**15, 10**16), topic="orders"),
                Usage(D.REPLICATION_BYTES, rng.randrange(10**7, 10**8), topic="orders"),
            )
            out.append(UsageEvent("broker-1", 2, sequence, start, start + 10_000, usage))
            sequence += 1
    return out


def records_of(events: list[UsageEvent], resend_every: int) -> list[tuple[int, bytes, bytes]]:
    """Each event as a record in its key's partition; every ``resend_every``-th also
    re-sent (same key and value) to the other partition, as a writer retrying after a
    failover does."""
    out = []
    for i, event in enumerate(events):
        out.append((partition_of(event.key), event.key, event.encode()))
        if i % resend_every == 0:
            out.append((1 - partition_of(event.key), event.key, event.encode()))
    return out


def malformed_records() -> list[tuple[int, bytes, bytes]]:
    crossing = UsageEvent("broker-9", 0, 0, T0 + HOUR_MS - 1000, T0 + HOUR_MS + 1000)
    return [
        (0, b"broker-9/0/1", b"{not json"),
        (1, crossing.key, crossing.encode()),  # crosses an hour: writers never do
    ]


# --- expectations from the events ---------------------------------------------------------


def day_of(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).date().isoformat()


def unique_events(records: list[tuple[int, bytes, bytes]]) -> list[tuple[bytes, UsageEvent]]:
    """One event per key (the first record of each; re-sent copies are equal)."""
    seen: dict[bytes, UsageEvent] = {}
    for _, key, value in records:
        event = decoded_or_none(value)
        if event is not None and key not in seen:
            seen[key] = event
    return list(seen.items())


def expected_hourly(records: list[tuple[int, bytes, bytes]]) -> Counter[tuple[Any, ...]]:
    sums: Counter[tuple[Any, ...]] = Counter()
    for _, event in unique_events(records):
        for u in event.usage:
            sums[(event.hour_ms, u.dimension.value, u.resource, u.topic, u.principal)] += u.quantity
    return sums


def expected_daily(records: list[tuple[int, bytes, bytes]]) -> Counter[tuple[Any, ...]]:
    sums: Counter[tuple[Any, ...]] = Counter()
    for (hour, *rest), quantity in expected_hourly(records).items():
        sums[(day_of(hour), *rest)] += quantity
    return sums


def hour_model(cluster: str, hour: int) -> PricingModel:
    """The pricing model of a cluster-hour: its own broker_ms type, or the nearest hour's."""
    if not BROKER_HOURS[cluster]:
        return PricingModel.PROVISIONED
    return MODELS[TYPES[cluster]]  # one broker type per cluster here: every hour has its model


def divisor(dimension: D, month: str) -> int:
    year, number = (int(x) for x in month.split("-"))
    first = datetime.date(year, number, 1)
    following = datetime.date(year + number // 12, number % 12 + 1, 1)
    hours = (following - first).days * 24
    if dimension.value.endswith("_byte_ms"):
        return 2**30 * 3_600_000 * hours
    if dimension.value.endswith("_ms"):
        return 3_600_000
    return 2**30


def recompute_invoice(
    written: dict[str, list[tuple[int, bytes, bytes]]], month: str
) -> tuple[dict[tuple[str, str, str, str], tuple[int, Decimal]], Decimal]:
    """Lines (cluster, model, dimension, resource) -> (raw quantity, amount) and the total,
    from the events, with Decimal: each line rounded once, half-up, to the cent."""
    raw: Counter[tuple[str, PricingModel, D, str]] = Counter()
    for cluster, records in written.items():
        for _, event in unique_events(records):
            if day_of(event.hour_ms)[:7] != month:
                continue
            for u in event.usage:
                model = (
                    MODELS[u.resource]
                    if u.dimension is D.BROKER_MS
                    else hour_model(cluster, event.hour_ms)
                )
                raw[(cluster, model, u.dimension, u.resource)] += u.quantity
    lines = {}
    total = Decimal("0.00")
    with localcontext() as ctx:
        ctx.prec = 80
        for (cluster, model, dimension, resource), quantity in raw.items():
            price = PRICES.get((model, dimension, resource)) or PRICES.get(
                (model, dimension, ""), Decimal(0)
            )
            exact = Decimal(quantity) * price / Decimal(divisor(dimension, month))
            amount = exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            lines[(cluster, model.value, dimension.value, resource)] = (quantity, amount)
            total += amount
    return lines, total


# --- what the job wrote ---------------------------------------------------------------------


def read_hourly(session: Any, out: Path, cluster: str) -> Counter[tuple[Any, ...]]:
    rows = (
        session.read.parquet(str(out / "hourly"))
        .where(F.col("cluster") == cluster)
        .select(
            F.unix_millis("hour").alias("h"),
            "dimension",
            "resource",
            "topic",
            "principal",
            "quantity",
            "unit",
            F.col("day").cast("string").alias("day"),
        )
        .collect()
    )
    got: Counter[tuple[Any, ...]] = Counter()
    for r in rows:
        key = (r["h"], r["dimension"], r["resource"], r["topic"], r["principal"])
        assert key not in got, f"two hourly rows for {key}"
        assert r["day"] == day_of(r["h"])
        got[key] = int(r["quantity"])
    return got


def read_daily(session: Any, out: Path, cluster: str) -> Counter[tuple[Any, ...]]:
    rows = (
        session.read.parquet(str(out / "daily"))
        .where(F.col("cluster") == cluster)
        .select(
            F.col("day").cast("string").alias("day"),
            "dimension",
            "resource",
            "topic",
            "principal",
            "quantity",
        )
        .collect()
    )
    return Counter(
        {
            (r["day"], r["dimension"], r["resource"], r["topic"], r["principal"]): int(
                r["quantity"]
            )
            for r in rows
        }
    )


def read_models(session: Any, out: Path, cluster: str) -> dict[int, tuple[str, str]]:
    rows = (
        session.read.parquet(str(out / "models"))
        .where(F.col("cluster") == cluster)
        .select(F.unix_millis("hour").alias("h"), "broker_type", "model")
        .collect()
    )
    return {r["h"]: (r["broker_type"], r["model"]) for r in rows}


def sink_of(out: Path, cluster: str, cluster_id: str = "") -> Path:
    """The events sink of one incarnation of a cluster (the scenario's ids: ``id-<name>``)."""
    return out / "events" / f"cluster={cluster}" / f"cluster_id={cluster_id or 'id-' + cluster}"


def read_event_entries(session: Any, events_dir: Path) -> list[tuple[Any, ...]]:
    """The events table of one cluster (its sink log honoured), one tuple per row."""
    rows = (
        session.read.parquet(str(events_dir))
        .select(
            "kafka_partition",
            "kafka_offset",
            "key",
            "dimension",
            "quantity",
            "topic",
            "principal",
            "resource",
        )
        .collect()
    )
    return sorted(tuple(r) for r in rows)


def topic_entries(broker: BrokerProcess) -> list[tuple[Any, ...]]:
    """What the events table must hold: every decodable record of the topic, one tuple per
    usage entry, with its partition and offset (re-sent copies included)."""
    out = []
    for record in consume_usage(broker):
        try:
            entries = decode_record(record.key, record.value)
        except MalformedUsage:
            continue
        for e in entries:
            out.append((record.partition, record.offset, e[3], e[7], e[8], e[9], e[10], e[11]))
    return sorted(out)


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` by content hash."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# --- the scenario ---------------------------------------------------------------------------


@dataclass
class Scenario:
    session: Any
    clusters: dict[str, BrokerProcess]
    root: Path
    written: dict[str, list[tuple[int, bytes, bytes]]] = field(default_factory=dict)
    runs: dict[str, JobRun] = field(default_factory=dict)
    snapshots: dict[str, dict[str, str]] = field(default_factory=dict)
    after_kill: list[tuple[Any, ...]] = field(default_factory=list)
    """alpha's events table after the killed run."""
    new_records: int = 0
    """Records written to alpha before the killed run."""
    highs_before_kill: dict[str, int] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def card(self) -> Path:
        path = self.root / "card.toml"
        if not path.exists():
            path.write_text(CARD)
        return path

    def spec(
        self,
        name: str,
        *,
        extra: list[dict[str, Any]] | None = None,
        options: dict[str, dict[str, str]] | None = None,
        output: str | None = None,
        s3: dict[str, str] | None = None,
        checkpoints: Path | None = None,
    ) -> Path:
        clusters = [
            {
                "name": n,
                "id": f"id-{n}",
                "bootstrap": b.bootstrap,
                "options": (options or {}).get(n, {}),
            }
            for n, b in self.clusters.items()
        ]
        doc: dict[str, Any] = {
            "output": output or str(self.out),
            "checkpoints": str(checkpoints or self.root / "checkpoints"),
            "rate_card": str(self.card),
            "spark_master": "local[2]",
            "clusters": clusters + (extra or []),
            "limits": {"cluster_timeout_ms": 3000},
        }
        if s3 is not None:
            doc["s3"] = s3
        return write_spec(self.root / f"{name}.json", doc)

    def write(self, cluster: str, records: list[tuple[int, bytes, bytes]]) -> None:
        produce(self.clusters[cluster], records)
        self.written.setdefault(cluster, []).extend(records)

    def run(self, name: str, env: dict[str, str] | None = None, **kwargs: Any) -> JobRun:
        if name not in self.runs:
            spec = self.spec(name, **kwargs)
            self.runs[name] = run_job(spec, self.root / f"{name}.log", env)
        return self.runs[name]

    # the steps, each once, in order

    def first(self) -> JobRun:
        if "first" not in self.runs:
            for seed, cluster in enumerate(("alpha", "beta"), start=1):
                events = cluster_events(cluster, HOURS, BROKER_HOURS[cluster], seed)
                records = records_of(events, resend_every=7)
                if cluster == "alpha":
                    records += malformed_records()
                self.write(cluster, records)
        # Spark's first streaming-source worker starts too late: the ingest is retried
        run = self.run("first", env=late_first_streaming_worker(self.root))
        assert run.returncode == 0, (run.lines[-3:], run.stderr)
        return run

    def second(self) -> JobRun:
        self.first()
        if "second" not in self.runs:
            self.snapshots["first"] = snapshot(self.out)
        dead = {
            "name": "gamma",
            "id": "id-gamma",
            "bootstrap": f"127.0.0.1:{free_port()}",
            "options": {},
        }
        return self.run("second", extra=[dead])

    def killed_and_again(self) -> JobRun:
        self.second()
        if "killed" not in self.runs:
            self.snapshots["second"] = snapshot(self.out)
            # alpha: a new hour and more of 2026-11-02 00:00, and copies of earlier events
            # of 2026-11-01 re-sent (the earlier days' rows must not change)
            events = cluster_events("alpha", LATER_HOURS, [], seed=3, ticks=30)
            events = [e for e in events if e.source == "broker-1"]
            records = [(partition_of(e.key), e.key, e.encode()) for e in events]
            earlier = [
                r
                for r in self.written["alpha"]
                if (ev := decoded_or_none(r[2])) is not None and day_of(ev.hour_ms) == "2026-11-01"
            ]
            records += earlier[:: max(1, len(earlier) // 10)]
            self.highs_before_kill = high_watermarks(self.clusters["alpha"])
            self.write("alpha", records)
            assert len(records) > 50
            spec = self.spec("killed", options={"alpha": {"maxOffsetsPerTrigger": "5"}})

            def during_ingest(line: dict[str, Any]) -> bool:
                return (
                    line["stage"] == "ingest"
                    and line.get("cluster") == "alpha"
                    and "micro-batches" in line["message"]
                    and line["done"] == 0
                )

            self.runs["killed"] = run_job_until(spec, self.root / "killed.log", during_ingest)
            self.new_records = len(records)
            self.after_kill = read_event_entries(self.session, sink_of(self.out, "alpha"))
        run = self.run("again")
        assert run.returncode == 0, (run.lines[-3:], run.stderr)
        return run


@pytest.fixture(scope="module")
def scenario(
    session: Any, clusters: dict[str, BrokerProcess], tmp_path_factory: pytest.TempPathFactory
) -> Scenario:
    return Scenario(session, clusters, tmp_path_factory.mktemp("billing-run"))


def check_tables(session: Any, sc: Scenario) -> None:
    for cluster, broker in sc.clusters.items():
        records = sc.written[cluster]
        assert read_hourly(session, sc.out, cluster) == expected_hourly(records), cluster
        assert read_daily(session, sc.out, cluster) == expected_daily(records), cluster
        want_models = dict.fromkeys(
            BROKER_HOURS[cluster], (TYPES[cluster], MODELS[TYPES[cluster]].value)
        )
        assert read_models(session, sc.out, cluster) == want_models, cluster
        # exactly once into the events table: each record's entries once, copies included
        assert read_event_entries(session, sink_of(sc.out, cluster)) == topic_entries(broker)
        offsets = json.loads((sc.out / "offsets" / f"{cluster}.json").read_text())
        assert offsets == {"topic": "__sluice_usage", "offsets": high_watermarks(broker)}


# --- tests ----------------------------------------------------------------------------------


def test_first_run_rolls_up_every_event_once(session: Any, scenario: Scenario) -> None:
    run = scenario.first()
    stages = [line["stage"] for line in run.lines]
    assert stages[0] == "ingest"
    assert stages[-1] == "done"
    assert {"ingest", "rollup", "invoice"} <= set(stages)
    assert all(set(line) == {"stage", "cluster", "done", "total", "message"} for line in run.lines)
    check_tables(session, scenario)
    # the malformed records were named and skipped
    assert "partition 0 offset" in run.stderr
    assert "not JSON" in run.stderr
    assert "crossing an hour" in run.stderr
    alpha_done = [x for x in run.lines if x["stage"] == "ingest" and x["cluster"] == "alpha"][-1]
    assert "2 malformed skipped" in alpha_done["message"]
    # one query failed to start its source's worker and was started again from its checkpoint
    log = (scenario.root / "first.log").read_text()
    assert log.count("could not start a Python worker (attempt 1 of") == 1, run.stderr
    assert sorted(p.name for p in (scenario.out / "invoices").iterdir()) == [
        "2026-10.json",
        "2026-11.json",
    ]


def test_second_run_without_new_events_changes_nothing(scenario: Scenario) -> None:
    run = scenario.second()
    # the unreachable cluster fails the run, named, after the others were read
    assert run.returncode == 1
    failed = run.failed
    assert failed is not None
    assert set(failed) == {"stage", "message"}
    assert "'gamma'" in failed["message"]
    assert "cloudctl describe-cluster gamma" in failed["message"]
    assert snapshot(scenario.out) == scenario.snapshots["first"]


def test_kill_during_ingest_then_a_run_counts_every_event_once(
    session: Any, scenario: Scenario
) -> None:
    scenario.killed_and_again()
    killed = scenario.runs["killed"]
    assert killed.returncode == -9, killed.lines
    assert not any(x["stage"] in ("rollup", "done") for x in killed.lines)
    # killed mid-ingest: some of the new records were committed, not all; those that were,
    # each with all its entries, once (a batch killed before its commit left no rows)
    truth = topic_entries(scenario.clusters["alpha"])
    highs = scenario.highs_before_kill
    earlier = {(p, o) for p, o, *_ in truth if o < highs[str(p)]}
    committed = {(p, o) for p, o, *_ in scenario.after_kill} - earlier
    assert 0 < len(committed) < scenario.new_records, (len(committed), scenario.new_records)
    assert scenario.after_kill == [e for e in truth if (e[0], e[1]) in earlier | committed]
    check_tables(session, scenario)
    before, after = scenario.snapshots["second"], snapshot(scenario.out)
    # only what the new events touched was rewritten: alpha's days 2026-11-01 (re-sent
    # copies) and 2026-11-02, its daily and models, the November invoice, its offsets
    unchanged = [k for k in before if before[k] == after.get(k)]
    for kept in (
        "hourly/cluster=alpha/day=2026-10-31/",
        "hourly/cluster=beta/",
        "daily/cluster=beta/",
        "models/cluster=beta/",
        "invoices/2026-10.json",
        "offsets/beta.json",
    ):
        keys = [k for k in before if k.startswith(kept)]
        assert keys, kept
        assert all(k in unchanged for k in keys), kept
    assert before["invoices/2026-11.json"] != after["invoices/2026-11.json"]


def test_invoices_equal_a_decimal_recomputation_from_the_events(scenario: Scenario) -> None:
    scenario.killed_and_again()
    for month in ("2026-10", "2026-11"):
        doc = json.loads((scenario.out / "invoices" / f"{month}.json").read_text())
        lines, total = recompute_invoice(scenario.written, month)
        got = {
            (x["cluster"], x["model"], x["dimension"], x["resource"]): (
                int(x["raw_quantity"]),
                Decimal(x["amount"]),
            )
            for x in doc["lines"]
        }
        assert got == lines, month
        assert Decimal(doc["total"]) == total
        assert doc["rate_card"] == "billing-test"
        assert doc["rate_card_version"] == "test-1"
        for cluster in ("alpha", "beta"):
            subtotal = sum(
                (a for (c, *_), (_, a) in lines.items() if c == cluster), Decimal("0.00")
            )
            assert Decimal(doc["subtotals"][cluster]) == subtotal
    # the hours of beta without broker_ms were priced as express (bytes in is not free)
    november = json.loads((scenario.out / "invoices" / "2026-11.json").read_text())
    beta_in = [
        x for x in november["lines"] if x["cluster"] == "beta" and x["dimension"] == "bytes_in"
    ]
    assert [x["model"] for x in beta_in] == ["express"]
    assert Decimal(beta_in[0]["amount"]) > 0


# the job once more, writing to a bucket (2 min); the same Output code writes the local
# tables every other test here reads
@pytest.mark.long
def test_s3_output_holds_the_same_tables(session: Any, scenario: Scenario, s3: EmbeddedS3) -> None:
    """A run from scratch into s3://BUCKET/billing of the embedded S3 server: the bucket
    holds the local run's invoices and tables, and the committed event files only."""
    scenario.killed_and_again()
    creds = {
        "endpoint": s3.endpoint,
        "access_key": "test",
        "secret_key": "test",
        "region": "us-east-1",
    }
    run = run_job(
        scenario.spec(
            "s3",
            output=f"s3://{BUCKET}/billing",
            s3=creds,
            checkpoints=scenario.root / "s3-checkpoints",
        ),
        scenario.root / "s3.log",
    )
    assert run.returncode == 0, (run.lines[-3:], run.stderr)
    store = S3ObjectStore(
        ObjectStoreSettings(
            endpoint=s3.endpoint, bucket=BUCKET, access_key_id="test", secret_access_key="test"
        )
    )
    keys = {info.key.removeprefix("billing/") for info in store.list("billing/")}
    for month in ("2026-10", "2026-11"):
        local = json.loads((scenario.out / "invoices" / f"{month}.json").read_text())
        assert json.loads(store.get(f"billing/invoices/{month}.json")) == local
    for cluster in ("alpha", "beta"):
        assert json.loads(store.get(f"billing/offsets/{cluster}.json")) == json.loads(
            (scenario.out / "offsets" / f"{cluster}.json").read_text()
        )
        hourly: Counter[tuple[Any, ...]] = Counter()
        for key in sorted(k for k in keys if k.startswith(f"hourly/cluster={cluster}/")):
            table = pq.read_table(io.BytesIO(store.get(f"billing/{key}")))
            for r in table.to_pylist():
                hour = int(r["hour"].replace(tzinfo=datetime.UTC).timestamp() * 1000)
                hourly[(hour, r["dimension"], r["resource"], r["topic"], r["principal"])] += int(
                    r["quantity"]
                )
        assert hourly == expected_hourly(scenario.written[cluster])
        # events: exactly the committed files (no sink log, no file of a killed batch)
        event_keys = sorted(k for k in keys if k.startswith(f"events/cluster={cluster}/"))
        assert event_keys
        assert not any("_spark_metadata" in k for k in event_keys)
        rows = []
        for key in event_keys:
            rows += pq.read_table(io.BytesIO(store.get(f"billing/{key}"))).to_pylist()
        entries = sorted(
            (
                r["kafka_partition"],
                r["kafka_offset"],
                r["key"],
                r["dimension"],
                r["quantity"],
                r["topic"],
                r["principal"],
                r["resource"],
            )
            for r in rows
        )
        assert entries == topic_entries(scenario.clusters[cluster])


def test_a_bad_rate_card_fails_naming_its_line(scenario: Scenario, tmp_path: Path) -> None:
    card = tmp_path / "bad.toml"
    card.write_text(CARD.replace('price = "0.408"', 'price = "a lot"'))
    line = CARD.splitlines().index('price = "0.408"') + 1
    spec = json.loads(scenario.spec("bad-card").read_text())
    spec["rate_card"] = str(card)
    run = run_job(write_spec(tmp_path / "spec.json", spec), tmp_path / "job.log")
    assert run.returncode == 1
    assert run.failed is not None
    assert f"{card}:{line}" in run.failed["message"], run.failed


# --- a cluster created again under its name; archives of deleted clusters -----------------


@pytest.fixture(scope="module")
def reborn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The broker of cluster "alpha" created again: a new id, a new usage topic."""
    proc = BrokerProcess(
        tmp_path_factory.mktemp("billing-alpha-2") / "data", {"usage.metering.enable": "false"}
    )
    try:
        proc.start()
        create_usage_topic(proc)
        yield proc
    finally:
        proc.stop()
        proc.kill()


def per_dimension(sums: Counter[tuple[Any, ...]], month: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for (hour, dimension, *_), quantity in sums.items():
        if day_of(hour)[:7] == month:
            out[dimension] += quantity
    return out


def archive_lines(events: list[bytes]) -> bytes:
    return b"".join(e + b"\n" for e in events)


# two more job runs over a third cluster (3 min on 2 loaded cores)
@pytest.mark.long
def test_a_recreated_cluster_and_deleted_clusters_archives_are_billed_once(
    session: Any, scenario: Scenario, reborn: BrokerProcess
) -> None:
    """alpha (id-alpha) deleted, its unbilled usage archived (copies of events the pipeline
    read from its topic already, and events it never saw), then created again (id-alpha-2,
    whose control-plane keys equal the old ones); delta deleted before any run read its topic.
    Two runs: both incarnations of alpha and delta billed, each event once, and the second
    run changes nothing."""
    scenario.killed_and_again()
    old_alpha = list(scenario.written["alpha"])
    seen = [r[2] for r in old_alpha if decoded_or_none(r[2]) is not None][::25]
    unseen = cluster_events("alpha", [T0 + 27 * HOUR_MS], [], seed=5, ticks=3)
    delta = cluster_events("delta", [T0 + 2 * HOUR_MS], [], seed=6, ticks=2)
    archives = scenario.root / "billing-archive"
    archives.mkdir()
    alpha_archive = archives / "alpha.id-alpha.jsonl"
    alpha_archive.write_bytes(archive_lines(seen + [e.encode() for e in unseen]) + b"{not json\n")
    delta_archive = archives / "delta.id-delta.jsonl"
    delta_archive.write_bytes(archive_lines([e.encode() for e in delta]))
    reborn_records = records_of(cluster_events("alpha", HOURS[4:], HOURS[4:], seed=7), 5)
    produce(reborn, reborn_records)

    doc = json.loads(scenario.spec("reborn").read_text())
    (alpha,) = [c for c in doc["clusters"] if c["name"] == "alpha"]
    alpha.update(id="id-alpha-2", bootstrap=reborn.bootstrap)
    doc["archives"] = [
        {"name": "alpha", "id": "id-alpha", "path": str(alpha_archive)},
        {"name": "delta", "id": "id-delta", "path": str(delta_archive)},
    ]
    spec = write_spec(scenario.root / "reborn.json", doc)
    first = run_job(spec, scenario.root / "reborn.log")
    assert first.returncode == 0, (first.lines[-3:], first.stderr)
    after_first = snapshot(scenario.out)
    bad_line = len(seen) + len(unseen) + 1
    log = (scenario.root / "reborn.log").read_text()
    where = f"archive {alpha_archive} of alpha (id id-alpha)"
    assert f"{where}: malformed usage event at line {bad_line} skipped" in log

    out = scenario.out
    want_alpha = expected_hourly(
        old_alpha + [(0, e.key, e.encode()) for e in unseen]
    ) + expected_hourly(reborn_records)
    want_delta = expected_hourly([(0, e.key, e.encode()) for e in delta])
    assert read_hourly(session, out, "alpha") == want_alpha
    assert read_hourly(session, out, "delta") == want_delta
    assert read_hourly(session, out, "beta") == expected_hourly(scenario.written["beta"])
    # the old incarnation's sink kept its events; the new one has its own
    assert read_event_entries(session, sink_of(out, "alpha")) == topic_entries(
        scenario.clusters["alpha"]
    )
    assert read_event_entries(session, sink_of(out, "alpha", "id-alpha-2")) == topic_entries(reborn)
    archived = [
        r
        for f in sorted((sink_of(out, "alpha") / "archive").rglob("*.parquet"))
        for r in pq.read_table(f).to_pylist()
    ]
    assert {r["kafka_partition"] for r in archived} == {2**31 - 1}
    assert len({r["key"] for r in archived}) == len(seen) + len(unseen)
    offsets = json.loads((out / "offsets" / "alpha.json").read_text())
    assert offsets["offsets"] == high_watermarks(reborn)
    for month in ("2026-10", "2026-11"):
        invoice = json.loads((out / "invoices" / f"{month}.json").read_text())
        for cluster, want in (("alpha", want_alpha), ("delta", want_delta)):
            got: Counter[str] = Counter()
            for line in invoice["lines"]:
                if line["cluster"] == cluster:
                    got[line["dimension"]] += int(line["raw_quantity"])
            assert got == per_dimension(want, month), (month, cluster)

    again = run_job(spec, scenario.root / "reborn-again.log")
    assert again.returncode == 0, (again.lines[-3:], again.stderr)
    assert "invoices unchanged" in again.lines[-1]["message"]
    assert snapshot(scenario.out) == after_first


# --- the rollup's rules, in process -------------------------------------------------------


def test_an_hour_without_broker_ms_takes_the_nearest_hours_model(session: Any) -> None:
    def at(h: int) -> datetime.datetime:
        return datetime.datetime.fromtimestamp((T0 + h * HOUR_MS) / 1000, datetime.UTC).replace(
            tzinfo=None
        )

    hours = session.createDataFrame(
        [("a", at(h)) for h in (0, 1, 2, 3, 4, 9)] + [("b", at(0))],
        "cluster string, hour timestamp",
    )
    known = session.createDataFrame(
        [("a", at(1), "express"), ("a", at(5), "serverless")],
        "cluster string, hour timestamp, model string",
    )
    got = {
        (r["cluster"], r["h"]): r["model"]
        for r in hour_models(hours, known)
        .select("cluster", F.unix_millis("hour").alias("h"), "model")
        .collect()
    }
    want = {
        0: "express",
        1: "express",
        2: "express",
        3: "express",
        4: "serverless",
        9: "serverless",
    }
    # hour 3 is 2 from 1 and 2 from 5: the earlier wins; cluster b has no model: provisioned
    assert got == {
        **{("a", T0 + h * HOUR_MS): m for h, m in want.items()},
        ("b", T0): "provisioned",
    }


def test_an_unknown_broker_type_is_an_error_naming_the_cluster(session: Any) -> None:
    rows = session.createDataFrame(
        [("orders", "broker_ms", "kafka.m5.huge"), ("orders", "bytes_in", "")],
        "cluster string, dimension string, resource string",
    )
    with pytest.raises(
        UnknownBrokerTypeInUsage, match=r"cluster 'orders'.*'kafka.m5.huge'.*kafka.m5.large"
    ):
        broker_types(rows)


def test_malformed_records_are_refused_by_the_decoder() -> None:
    good = UsageEvent("broker-1", 1, 2, T0, T0 + 10, (Usage(D.BYTES_IN, 5, topic="t"),))
    assert decode_record(None, good.encode())[0][3] == "broker-1/1/2"
    for value in (
        None,
        b"[]",
        b'{"v": 1}',
        good.encode().replace(b'"q":5', b'"q":-5'),
        good.encode().replace(b'"q":5', b'"q":99999999999999999999'),
    ):
        with pytest.raises(MalformedUsage):
            decode_record(b"k", value)
