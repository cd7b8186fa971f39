"""Usage and billing through cloudctl: a real control plane (`cloudctl up`), one secured
cluster (its brokers' internal SASL listener, as the control plane and the billing job
reach them), known usage events produced with confluent-kafka into `__sluice_usage`, and
the real billing pipeline (PySpark, `python -m billing.job`) run by the control plane.

The events lie in March 2025, far from the metering the brokers and the control plane do
now, so every figure below is exact: usage in every grouping and output format (before
any run: all from the topic; after: from the pipeline's tables), a re-sent event counted
once, an event written after the run shown at once, the invoice (amounts recomputed here
from the rate card's prices with Fractions, half-up to the cent), the cost chart (a PNG of
the size asked for), a second run asked for while one runs (the running one comes back),
and a run that fails (a rate card that does not parse) recorded FAILED with its message.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import shutil
from collections.abc import Iterator
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from PIL import Image

from billing.catalog import PricingModel
from billing.ratecard import DEFAULT_RATE_CARD, load
from tests.cli.conftest import Cloud, running_cloud
from wire.sasl import load_credentials
from wire.usage import USAGE_TOPIC, Dimension, Usage, UsageEvent

pytestmark = pytest.mark.timeout(900)  # Spark jobs: minutes on a loaded machine

CLUSTER = "bill"
MONTH = "2025-03"
HOURS_IN_MONTH = 31 * 24
GB = 2**30
HOUR = 3_600_000
H8 = int(datetime.datetime(2025, 3, 10, 8, tzinfo=datetime.UTC).timestamp() * 1000)
H9 = H8 + HOUR
NEXT_DAY = int(datetime.datetime(2025, 3, 11, tzinfo=datetime.UTC).timestamp() * 1000)
RANGE = ("--from", "2025-03-10T00:00:00Z", "--to", "2025-03-12T00:00:00Z")
RANGE_JSON = ("2025-03-10T00:00:00Z", "2025-03-12T00:00:00Z")

EVENTS = [
    # the control plane's broker-hours: 3 brokers for the hour 08:00
    UsageEvent(
        "test-controlplane",
        0,
        H8,
        H8,
        H8 + HOUR,
        (Usage(Dimension.BROKER_MS, 3 * HOUR, resource="kafka.m5.large"),),
    ),
    # a broker's counters at 08:10: 1 GB in (produced by User:app), 0.5 GB out
    UsageEvent(
        "test-broker-1",
        7,
        1,
        H8 + 600_000,
        H8 + 610_000,
        (
            Usage(Dimension.BYTES_IN, GB, topic="orders", principal="User:app"),
            Usage(Dimension.BYTES_OUT, GB // 2, topic="orders", principal="User:reader"),
        ),
    ),
    # at 09:00: 0.5 GB in, and 1000 GB stored for the hour
    UsageEvent(
        "test-broker-1",
        7,
        2,
        H9,
        H9 + 10_000,
        (
            Usage(Dimension.BYTES_IN, GB // 2, topic="payments", principal="User:app"),
            Usage(Dimension.HOT_STORAGE_BYTE_MS, 1000 * GB * HOUR, topic="payments"),
        ),
    ),
    # the controller's partition-hours, the next day
    UsageEvent(
        "test-controller",
        0,
        NEXT_DAY,
        NEXT_DAY,
        NEXT_DAY + HOUR,
        (Usage(Dimension.PARTITION_MS, 2 * HOUR, topic="payments"),),
    ),
]
LATE = UsageEvent(  # written after the run: shown at once, before the next run
    "test-broker-1",
    8,
    1,
    H9 + 1_800_000,
    H9 + 1_810_000,
    (Usage(Dimension.BYTES_IN, 1000, topic="orders", principal="User:app"),),
)


# ---------------------------------------------------------------------- expectations


def quantity(value: Fraction) -> str:
    """A quantity as the API writes it: exact when finite, else 24 places (half-even);
    no trailing zeros."""
    with localcontext() as context:
        context.prec = 80
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        if Fraction(exact) != value:
            context.rounding = ROUND_HALF_EVEN
            exact = exact.quantize(Decimal("1e-24"))
    text = format(exact, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def row(
    start: str,
    end: str,
    dimension: str,
    raw: int,
    *,
    resource: str = "",
    topic: str = "",
    principal: str = "",
) -> dict[str, Any]:
    units = {
        "broker_ms": ("hour", "ms", HOUR),
        "partition_ms": ("hour", "ms", HOUR),
        "hot_storage_byte_ms": ("GB-month", "byte-ms", GB * HOUR * HOURS_IN_MONTH),
        "bytes_in": ("GB", "bytes", GB),
        "bytes_out": ("GB", "bytes", GB),
    }
    unit, raw_unit, divisor = units[dimension]
    return {
        "period_start": start,
        "period_end": end,
        "cluster": CLUSTER,
        "dimension": dimension,
        "resource": resource,
        "topic": topic,
        "principal": principal,
        "quantity": quantity(Fraction(raw, divisor)),
        "unit": unit,
        "raw_quantity": raw,
        "raw_unit": raw_unit,
    }


def by_hour(late: int = 0) -> list[dict[str, Any]]:
    h8, h9, h10 = "2025-03-10T08:00:00Z", "2025-03-10T09:00:00Z", "2025-03-10T10:00:00Z"
    d11, d11_1 = "2025-03-11T00:00:00Z", "2025-03-11T01:00:00Z"
    return [
        row(h8, h9, "broker_ms", 3 * HOUR, resource="kafka.m5.large"),
        row(h8, h9, "bytes_in", GB),
        row(h8, h9, "bytes_out", GB // 2),
        row(h9, h10, "hot_storage_byte_ms", 1000 * GB * HOUR),
        row(h9, h10, "bytes_in", GB // 2 + late),
        row(d11, d11_1, "partition_ms", 2 * HOUR),
    ]


def by_day() -> list[dict[str, Any]]:
    d10, d11, d12 = "2025-03-10T00:00:00Z", "2025-03-11T00:00:00Z", "2025-03-12T00:00:00Z"
    return [
        row(d10, d11, "broker_ms", 3 * HOUR, resource="kafka.m5.large"),
        row(d10, d11, "hot_storage_byte_ms", 1000 * GB * HOUR),
        row(d10, d11, "bytes_in", GB + GB // 2),
        row(d10, d11, "bytes_out", GB // 2),
        row(d11, d12, "partition_ms", 2 * HOUR),
    ]


def by_topic() -> list[dict[str, Any]]:
    start, end = RANGE_JSON
    return [
        row(start, end, "partition_ms", 2 * HOUR, topic="payments"),
        row(start, end, "hot_storage_byte_ms", 1000 * GB * HOUR, topic="payments"),
        row(start, end, "bytes_in", GB, topic="orders"),
        row(start, end, "bytes_in", GB // 2, topic="payments"),
        row(start, end, "bytes_out", GB // 2, topic="orders"),
    ]


def by_principal() -> list[dict[str, Any]]:
    start, end = RANGE_JSON
    return [
        row(start, end, "bytes_in", GB + GB // 2, principal="User:app"),
        row(start, end, "bytes_out", GB // 2, principal="User:reader"),
    ]


def by_dimension() -> list[dict[str, Any]]:
    start, end = RANGE_JSON
    return [
        row(start, end, "broker_ms", 3 * HOUR, resource="kafka.m5.large"),
        row(start, end, "partition_ms", 2 * HOUR),
        row(start, end, "hot_storage_byte_ms", 1000 * GB * HOUR),
        row(start, end, "bytes_in", GB + GB // 2),
        row(start, end, "bytes_out", GB // 2),
    ]


def invoice_lines() -> list[dict[str, str]]:
    """The month's lines, priced here from the rate card's unit prices (Fractions, rounded
    once, half-up to the cent)."""
    version = load(DEFAULT_RATE_CARD).version_for_month(MONTH)
    usage = [
        (Dimension.BROKER_MS, "kafka.m5.large", Fraction(3), "hour"),
        (Dimension.PARTITION_MS, "", Fraction(2), "hour"),
        (Dimension.HOT_STORAGE_BYTE_MS, "", Fraction(1000, HOURS_IN_MONTH), "GB-month"),
        (Dimension.BYTES_IN, "", Fraction(3, 2), "GB"),
        (Dimension.BYTES_OUT, "", Fraction(1, 2), "GB"),
    ]
    lines = []
    for dimension, resource, amount_of, unit in usage:
        price = version.price(PricingModel.PROVISIONED, dimension, resource)
        unit_price = price.unit_price if price is not None else Decimal(0)
        exact = amount_of * Fraction(unit_price)
        cents = Decimal(exact.numerator) / Decimal(exact.denominator)
        lines.append(
            {
                "cluster": CLUSTER,
                "model": "provisioned",
                "dimension": dimension.value,
                "resource": resource,
                "quantity": quantity(amount_of),
                "unit": unit,
                "unit_price": format(unit_price, "f"),
                "amount": format(cents.quantize(Decimal("0.01"), ROUND_HALF_UP), "f"),
            }
        )
    return lines


def total(lines: list[dict[str, str]]) -> str:
    return format(sum((Decimal(x["amount"]) for x in lines), Decimal("0.00")), "f")


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def rate_card(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the default card that the control plane uses (billing.rate.card): a test
    breaks it to make a run fail."""
    path = tmp_path_factory.mktemp("card") / "card.toml"
    shutil.copy(DEFAULT_RATE_CARD, path)
    return path


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory, rate_card: Path) -> Iterator[Cloud]:
    """A control plane (no scheduled runs: the test starts them) with one secured cluster."""
    home = tmp_path_factory.mktemp("billing-home")
    (home / "controlplane.properties").write_text(
        f"billing.schedule.interval.ms=0\nbilling.rate.card={rate_card}\n"
    )
    with running_cloud(home) as running:
        made = running.run(
            "create-cluster", CLUSTER, "--brokers", "1", "--client-auth", "scram", "--wait"
        )
        assert made.returncode == 0, made.stderr
        yield running


@pytest.fixture(scope="module")
def producer_settings(cloud: Cloud) -> dict[str, str]:
    """librdkafka's settings for the cluster's internal listener, as its internal user
    (what the control plane and the billing job use)."""
    described = cli(cloud, "describe-cluster", CLUSTER)
    (credentials_file,) = (cloud.home / "clusters").glob(f"{CLUSTER}-*/security/internal.json")
    credentials = load_credentials(credentials_file)
    return {
        "bootstrap.servers": ",".join(b["address"] for b in described["brokers"]),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": credentials.mechanism.value,
        "sasl.username": credentials.username,
        "sasl.password": credentials.password,
    }


def produce(settings: dict[str, str], events: list[UsageEvent]) -> None:
    admin = AdminClient(dict(settings))
    for future in admin.create_topics([NewTopic(USAGE_TOPIC, 1, 1)]).values():
        try:
            future.result(30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):  # else the brokers made it already
                raise
    producer = Producer({**settings, "acks": "all", "enable.idempotence": True})
    for event in events:
        producer.produce(USAGE_TOPIC, key=event.key, value=event.encode())
    assert producer.flush(60) == 0


def cli(cloud: Cloud, *args: str) -> Any:
    done = cloud.run(*args, "-o", "json", timeout=600)
    assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def usage(cloud: Cloud, by: str) -> dict[str, Any]:
    found: dict[str, Any] = cli(cloud, "usage", "--cluster", CLUSTER, *RANGE, "--by", by)
    return found


# ---------------------------------------------------------------------- tests


def test_usage_before_any_run_comes_from_the_topic(
    cloud: Cloud, producer_settings: dict[str, str]
) -> None:
    produce(producer_settings, [*EVENTS, EVENTS[1]])  # the second one re-sent: counted once
    found = usage(cloud, "hour")
    assert found["rows"] == by_hour()
    assert found["recent_events"] == len(EVENTS)
    assert (found["from"], found["to"], found["by"]) == (*RANGE_JSON, "hour")
    assert found["warnings"] == []


def test_billing_run_waits_and_a_second_request_gets_the_running_run(
    cloud: Cloud, producer_settings: dict[str, str]
) -> None:
    first = cli(cloud, "billing", "run")
    assert first["already_running"] is False
    assert first["trigger"] == "ON_DEMAND"
    assert first["state"] in ("QUEUED", "RUNNING")
    again = cloud.run("billing", "run", "--wait", "-o", "json", timeout=600)
    assert again.returncode == 0, again.stderr
    waited = json.loads(again.stdout)
    assert waited["already_running"] is True, "a run was going: that one comes back"
    assert waited["id"] == first["id"]
    assert waited["state"] == "SUCCEEDED", waited
    assert waited["progress"]["stage"] == "done"
    assert waited["clusters"] == [CLUSTER]
    assert f"{first['id']}: RUNNING" in again.stderr  # progress on stderr
    assert f"{first['id']}: SUCCEEDED" in again.stderr
    assert Path(waited["log_path"]).is_file()
    assert not list((cloud.home / "billing" / "specs").iterdir()), "the spec is removed"
    password = producer_settings["sasl.password"]  # the internal user's: in the spec only
    for log in (cloud.home / "logs").rglob("*.log"):
        assert password not in log.read_text(errors="replace"), log
    described = cli(cloud, "billing", "describe-run", first["id"])
    assert described == {k: v for k, v in waited.items() if k != "already_running"}
    as_yaml = cloud.run("billing", "describe-run", first["id"], "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout) == described
    assert (
        f"billing run:  {first['id']}" in cloud.run("billing", "describe-run", first["id"]).stdout
    )
    runs = cli(cloud, "billing", "list-runs")["runs"]
    assert [r["id"] for r in runs] == [first["id"]]


def test_usage_after_the_run_in_every_grouping_and_format(cloud: Cloud) -> None:
    expected = {
        "hour": by_hour(),
        "day": by_day(),
        "topic": by_topic(),
        "principal": by_principal(),
        "dimension": by_dimension(),
    }
    for by, rows in expected.items():
        found = usage(cloud, by)
        assert found["rows"] == rows, by
        assert found["recent_events"] == 0, "all of it is in the pipeline's tables now"
    as_json = usage(cloud, "hour")
    as_yaml = cloud.run("usage", "--cluster", CLUSTER, *RANGE, "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout) == as_json
    as_csv = cloud.run("usage", "--cluster", CLUSTER, *RANGE, "-o", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    parsed = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert parsed == [{k: str(v) for k, v in r.items()} for r in by_hour()]
    as_table = cloud.run("usage", "--cluster", CLUSTER, *RANGE)
    lines = as_table.stdout.splitlines()
    assert lines[0].split() == [
        "HOUR",
        "CLUSTER",
        "DIMENSION",
        "RESOURCE",
        "QUANTITY",
        "UNIT",
        "RAW",
    ]
    assert lines[1].split() == [
        "2025-03-10T08:00:00Z",
        CLUSTER,
        "broker_ms",
        "kafka.m5.large",
        "3",
        "hour",
        "10800000",
        "ms",
    ]
    assert lines[4].split()[2:6] == ["hot_storage_byte_ms", "-", "1.344086022", "GB-month"]
    every = cli(cloud, "usage", *RANGE)  # without --cluster: every cluster (one here)
    assert every["rows"] == by_hour()


def test_invoice_in_every_format(cloud: Cloud) -> None:
    lines = invoice_lines()
    found = cli(cloud, "invoice", "--month", MONTH)
    assert found["lines"] == lines
    assert found["subtotals"] == {CLUSTER: total(lines)}
    assert found["total"] == total(lines) == "0.76"
    assert (found["currency"], found["rate_card"], found["open"]) == ("USD", "msk-us-east-1", False)
    assert cli(cloud, "invoice", "--month", MONTH, "--cluster", CLUSTER) == {
        **found,
        "cluster": CLUSTER,
    }
    as_yaml = cloud.run("invoice", "--month", MONTH, "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout) == found
    as_csv = cloud.run("invoice", "--month", MONTH, "-o", "csv")
    assert list(csv.DictReader(io.StringIO(as_csv.stdout))) == [
        {"month": MONTH, **line} for line in lines
    ]
    as_table = [line.split() for line in cloud.run("invoice", "--month", MONTH).stdout.splitlines()]
    assert [CLUSTER, "broker_ms", "kafka.m5.large", "3", "hour", "0.21", "0.63"] in as_table
    assert ["total:", "0.76", "USD"] in as_table
    listed = cli(cloud, "list-invoices")["invoices"]  # this month's too, from real metering
    assert [i for i in listed if i["month"] == MONTH] == [
        {"month": MONTH, "total": "0.76", "currency": "USD", "clusters": 1, "open": False}
    ]
    missing = cloud.run("invoice", "--month", "2025-04")
    assert missing.returncode == 1
    assert "no invoice of 2025-04" in missing.stderr
    assert "cloudctl billing run --wait" in missing.stderr
    unknown = cloud.run("usage", "--cluster", "no-such-cluster")
    assert unknown.returncode == 1
    assert "cluster 'no-such-cluster' not found" in unknown.stderr


def test_an_event_written_after_the_run_shows_at_once(
    cloud: Cloud, producer_settings: dict[str, str]
) -> None:
    produce(producer_settings, [LATE, LATE])
    found = usage(cloud, "hour")
    assert found["rows"] == by_hour(late=1000)
    assert found["recent_events"] == 1


def test_cost_chart_writes_a_png_of_the_size_asked_for(cloud: Cloud, tmp_path: Path) -> None:
    out = tmp_path / "cost.png"
    drawn = cli(cloud, "cost-chart", "--month", MONTH, "--out", str(out))
    assert drawn["total"] == "0.76"
    assert drawn["days"] == 2
    assert drawn["series"] == [
        {"label": f"{CLUSTER} / broker_ms", "total": "0.63"},
        {"label": f"{CLUSTER} / hot_storage_byte_ms", "total": "0.13"},
    ]
    with Image.open(out) as image:
        assert (image.format, image.size) == ("PNG", (1200, 600))
        image.verify()
    small = tmp_path / "small.png"
    cli(cloud, "cost-chart", "--cluster", CLUSTER, "--month", MONTH, "--out", str(small),
        "--width", "800", "--height", "400")  # fmt: skip
    with Image.open(small) as image:
        assert image.size == (800, 400)
        image.load()  # decodes every pixel


def test_a_failing_run_is_recorded_with_its_message(cloud: Cloud, rate_card: Path) -> None:
    good = rate_card.read_text()
    rate_card.write_text('name = "broken"\ncurrency = "USD"\n[[versions]\n')
    try:
        failed = cloud.run("billing", "run", "--wait", "-o", "json", timeout=600)
    finally:
        rate_card.write_text(good)
    assert failed.returncode == 1
    run = json.loads(failed.stdout)
    assert run["state"] == "FAILED"
    assert run["error"].startswith(f"rate card {rate_card}:3: ")
    assert f"billing run {run['id']} FAILED: rate card {rate_card}:3" in failed.stderr
    assert cli(cloud, "billing", "describe-run", run["id"])["error"] == run["error"]
    states = [r["state"] for r in cli(cloud, "billing", "list-runs")["runs"]]
    assert states == ["SUCCEEDED", "FAILED"]
