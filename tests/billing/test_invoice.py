"""Invoices: exact cents on hand-computed months, half-up once per line, subtotals of
rounded lines, the version of the month's first day, errors for unpriced broker types,
and the JSON document round trip."""

from __future__ import annotations

import decimal
import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from billing import units
from billing.catalog import PricingModel
from billing.invoice import Invoice, InvoiceError, InvoiceLine, UsageRow, compute_invoice
from billing.ratecard import RateCard, load_default, parse
from wire.usage import Dimension

P, E, S = PricingModel.PROVISIONED, PricingModel.EXPRESS, PricingModel.SERVERLESS
D = Dimension
HOUR = 3_600_000
GIB = 2**30
NOVEMBER = 720  # hours of 2026-11


def card_with(prices: str, versions: str | None = None) -> RateCard:
    head = 'name = "t"\ncurrency = "USD"\n'
    if versions is not None:
        return parse(head + versions, "t.toml")
    return parse(
        head
        + '[[versions]]\nversion = "v"\neffective_from = 2020-01-01\nsource = "test"\n'
        + "retrieved = 2026-11-25\n"
        + prices,
        "t.toml",
    )


def price(model: str, dimension: str, unit: str, value: str, resource: str = "") -> str:
    return (
        f'\n[[versions.prices]]\nmodel = "{model}"\ndimension = "{dimension}"\n'
        f'resource = "{resource}"\nunit = "{unit}"\nprice = "{value}"\n'
    )


def line(invoice: Invoice, cluster: str, dimension: Dimension, resource: str = "") -> InvoiceLine:
    found = [
        x
        for x in invoice.lines
        if (x.cluster, x.dimension, x.resource) == (cluster, dimension, resource)
    ]
    assert len(found) == 1, found
    return found[0]


# -- a hand-computed month of the default card -----------------------------------------------

MONTH_ROWS = [
    # orders: 3 x kafka.m5.large all November, storage, tiering, a private endpoint
    *(UsageRow("orders", P, D.BROKER_MS, "kafka.m5.large", NOVEMBER * HOUR) for _ in range(3)),
    UsageRow("orders", P, D.HOT_STORAGE_BYTE_MS, "", 100 * GIB * NOVEMBER * HOUR),
    UsageRow("orders", P, D.TIERED_STORAGE_BYTE_MS, "", 500 * GIB * 360 * HOUR),
    UsageRow("orders", P, D.TIERED_RETRIEVAL_BYTES, "", 30 * GIB),
    UsageRow("orders", P, D.BYTES_IN, "", 1024 * GIB),
    UsageRow("orders", P, D.ENDPOINT_MS, "vpc-a", NOVEMBER * HOUR),
    UsageRow("orders", P, D.ENDPOINT_BYTES, "vpc-a", 100 * GIB),
    # events: serverless all November, 10 partitions
    UsageRow("events", S, D.BROKER_MS, "serverless", NOVEMBER * HOUR),
    UsageRow("events", S, D.PARTITION_MS, "", 10 * NOVEMBER * HOUR),
    UsageRow("events", S, D.HOT_STORAGE_BYTE_MS, "", 20 * GIB * NOVEMBER * HOUR),
    UsageRow("events", S, D.BYTES_IN, "", 5 * GIB),
    UsageRow("events", S, D.BYTES_OUT, "", 20 * GIB),
    # fast: 3 x express.m7g.large all November
    UsageRow("fast", E, D.BROKER_MS, "express.m7g.large", 3 * NOVEMBER * HOUR),
    UsageRow("fast", E, D.HOT_STORAGE_BYTE_MS, "", 1024 * GIB * NOVEMBER * HOUR),
    UsageRow("fast", E, D.BYTES_IN, "", 1024 * GIB),
    UsageRow("fast", E, D.BYTES_OUT, "", 3 * 1024 * GIB),
]

EXPECTED = {
    ("orders", D.BROKER_MS, "kafka.m5.large"): ("2160", "hour", "0.21", "453.60"),
    ("orders", D.HOT_STORAGE_BYTE_MS, ""): ("100", "GB-month", "0.10", "10.00"),
    ("orders", D.TIERED_STORAGE_BYTE_MS, ""): ("250", "GB-month", "0.06", "15.00"),
    # 30 x 0.0015 = 0.045: half-up 0.05 (half-even would say 0.04)
    ("orders", D.TIERED_RETRIEVAL_BYTES, ""): ("30", "GB", "0.0015", "0.05"),
    ("orders", D.BYTES_IN, ""): ("1024", "GB", "0", "0.00"),
    ("orders", D.ENDPOINT_MS, "vpc-a"): ("720", "hour", "0.0225", "16.20"),
    ("orders", D.ENDPOINT_BYTES, "vpc-a"): ("100", "GB", "0.006", "0.60"),
    ("events", D.BROKER_MS, "serverless"): ("720", "hour", "0.75", "540.00"),
    ("events", D.PARTITION_MS, ""): ("7200", "hour", "0.0015", "10.80"),
    ("events", D.HOT_STORAGE_BYTE_MS, ""): ("20", "GB-month", "0.10", "2.00"),
    ("events", D.BYTES_IN, ""): ("5", "GB", "0.10", "0.50"),
    ("events", D.BYTES_OUT, ""): ("20", "GB", "0.05", "1.00"),
    ("fast", D.BROKER_MS, "express.m7g.large"): ("2160", "hour", "0.408", "881.28"),
    ("fast", D.HOT_STORAGE_BYTE_MS, ""): ("1024", "GB-month", "0.10", "102.40"),
    ("fast", D.BYTES_IN, ""): ("1024", "GB", "0.01", "10.24"),
    ("fast", D.BYTES_OUT, ""): ("3072", "GB", "0", "0.00"),
}


def test_a_month_of_the_default_card_to_the_cent() -> None:
    invoice = compute_invoice("2026-11", MONTH_ROWS, load_default())
    assert invoice.rate_card == "msk-us-east-1"
    assert invoice.rate_card_version == "2026-11-25"
    assert invoice.currency == "USD"
    got = {
        (x.cluster, x.dimension, x.resource): (
            units.format_decimal(x.quantity),
            x.unit.value,
            format(x.unit_price, "f"),
            format(x.amount, "f"),
        )
        for x in invoice.lines
    }
    assert got == EXPECTED
    assert invoice.subtotals == {
        "events": Decimal("554.30"),
        "fast": Decimal("993.92"),
        "orders": Decimal("495.45"),
    }
    assert invoice.total == Decimal("2043.67")


def test_lines_are_ordered() -> None:
    invoice = compute_invoice("2026-11", reversed(MONTH_ROWS), load_default())
    keys = [(x.cluster, x.dimension) for x in invoice.lines]
    assert keys[:5] == [
        ("events", D.BROKER_MS),
        ("events", D.PARTITION_MS),
        ("events", D.HOT_STORAGE_BYTE_MS),
        ("events", D.BYTES_IN),
        ("events", D.BYTES_OUT),
    ]
    assert [c for c, _ in keys] == sorted(c for c, _ in keys)


# -- rounding ------------------------------------------------------------------------------


def test_half_up_at_the_half_cent() -> None:
    """Half an hour of kafka.m5.large is 0.105: half-up gives 0.11, half-even 0.10."""
    rows = [UsageRow("c", P, D.BROKER_MS, "kafka.m5.large", HOUR // 2)]
    assert line(
        compute_invoice("2026-11", rows, load_default()), "c", D.BROKER_MS, "kafka.m5.large"
    ).amount == Decimal("0.11")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (GIB // 8, "0.01"),  # 0.125 GB x 0.04 = 0.005 exactly: up
        (GIB // 8 - 1, "0.00"),  # a byte less: 0.004999999…: down
        (3 * GIB // 8, "0.02"),  # 0.015: up (half-even would keep 0.02 too)
        (5 * GIB // 8, "0.03"),  # 0.025: up (half-even: 0.02)
        (GIB // 8 + 1, "0.01"),
        (0, "0.00"),
    ],
)
def test_half_up_boundaries_are_exact(raw: int, expected: str) -> None:
    card = card_with(price("serverless", "bytes_in", "GB", "0.04"))
    invoice = compute_invoice("2026-11", [UsageRow("c", S, D.BYTES_IN, "", raw)], card)
    assert format(line(invoice, "c", D.BYTES_IN).amount, "f") == expected


def test_rounding_happens_once_per_line_not_per_row() -> None:
    """100 one-minute rows of kafka.m5.large: 100/60 h x 0.21 = 0.35 (each row alone would
    round to 0.00)."""
    rows = [UsageRow("c", P, D.BROKER_MS, "kafka.m5.large", 60_000)] * 100
    found = line(
        compute_invoice("2026-11", rows, load_default()), "c", D.BROKER_MS, "kafka.m5.large"
    )
    assert found.amount == Decimal("0.35")
    assert found.raw_quantity == 6_000_000
    one = compute_invoice("2026-11", rows[:1], load_default())
    assert one.total == Decimal("0.00")


def test_subtotals_are_sums_of_rounded_lines() -> None:
    """Two endpoints of 30 minutes at 0.21/h: 0.105 each, rounded to 0.11 each: 0.22, not
    the 0.21 of the unrounded sum."""
    card = card_with(price("provisioned", "endpoint_ms", "hour", "0.21"))
    rows = [
        UsageRow("c", P, D.ENDPOINT_MS, "a", HOUR // 2),
        UsageRow("c", P, D.ENDPOINT_MS, "b", HOUR // 2),
        UsageRow("d", P, D.ENDPOINT_MS, "a", HOUR // 2),
    ]
    invoice = compute_invoice("2026-11", rows, card)
    assert [x.amount for x in invoice.lines] == [Decimal("0.11")] * 3
    assert invoice.subtotals == {"c": Decimal("0.22"), "d": Decimal("0.11")}
    assert invoice.total == Decimal("0.33")


# -- units -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("month", "hours", "expected"),
    [
        ("2027-02", 672, "1.00"),  # 28 days: 672 h stored is the whole month
        ("2028-02", 696, "1.00"),  # leap year
        ("2026-11", 720, "1.00"),
        ("2027-01", 744, "1.00"),
        ("2027-03", 672, "0.90"),  # 672 / 744 = 0.9032…
        ("2027-03", 372, "0.50"),  # half of March
    ],
)
def test_gb_month_is_prorated_by_the_hours_of_the_month(
    month: str, hours: int, expected: str
) -> None:
    card = card_with(price("provisioned", "hot_storage_byte_ms", "GB-month", "1.00"))
    rows = [UsageRow("c", P, D.HOT_STORAGE_BYTE_MS, "", GIB * hours * HOUR)]
    assert line(compute_invoice(month, rows, card), "c", D.HOT_STORAGE_BYTE_MS).amount == Decimal(
        expected
    )


def test_gb_is_two_to_the_thirty_bytes() -> None:
    card = card_with(price("serverless", "bytes_out", "GB", "100"))
    assert compute_invoice(
        "2026-11", [UsageRow("c", S, D.BYTES_OUT, "", GIB)], card
    ).total == Decimal("100.00")
    assert compute_invoice(
        "2026-11", [UsageRow("c", S, D.BYTES_OUT, "", 10**9)], card
    ).total == Decimal("93.13")


def test_quantities_keep_their_precision() -> None:
    rows = [
        UsageRow("c", P, D.BROKER_MS, "kafka.m5.large", 60_000),
        UsageRow("c", P, D.BYTES_OUT, "", 12_345),
    ]
    invoice = compute_invoice("2026-11", rows, load_default())
    # 1/60 hour has no finite decimal: shown at 24 places
    assert units.format_decimal(line(invoice, "c", D.BROKER_MS, "kafka.m5.large").quantity) == (
        "0.016666666666666666666667"
    )
    # bytes to GB always ends: exact, 30 places
    exact = line(invoice, "c", D.BYTES_OUT).quantity
    assert exact == Decimal(12_345) / Decimal(2**30)
    assert units.format_decimal(exact) == "0.000011497177183628082275390625"
    assert Fraction(exact) == Fraction(12_345, 2**30)


@given(
    raw=st.integers(min_value=0, max_value=10**22),
    cents=st.integers(min_value=0, max_value=10**6),
    places=st.integers(min_value=0, max_value=6),
    dimension=st.sampled_from(list(Dimension)),
)
def test_amount_matches_a_decimal_recomputation(
    raw: int, cents: int, places: int, dimension: Dimension
) -> None:
    """units.amount (exact fractions) against Decimal arithmetic at 80 digits."""
    unit_price = Decimal(cents).scaleb(-places)
    quantity = units.billing_quantity(dimension, raw, "2026-02")
    with decimal.localcontext() as context:
        context.prec = 80
        context.rounding = decimal.ROUND_HALF_UP
        expected = (
            Decimal(raw) * unit_price / Decimal(units.divisor(dimension, "2026-02"))
        ).quantize(Decimal("0.01"))
    assert units.amount(quantity, unit_price) == expected


# -- versions --------------------------------------------------------------------------------

TWO_VERSIONS = (
    '[[versions]]\nversion = "old"\neffective_from = 2026-01-01\neffective_to = 2026-11-15\n'
    'source = "test"\nretrieved = 2026-11-25\n'
    + price("provisioned", "broker_ms", "hour", "1.00", "kafka.m5.large")
    + '\n[[versions]]\nversion = "new"\neffective_from = 2026-11-15\n'
    'source = "test"\nretrieved = 2026-11-25\n'
    + price("provisioned", "broker_ms", "hour", "2.00", "kafka.m5.large")
)


@pytest.mark.parametrize(
    ("month", "version", "amount"),
    [("2026-10", "old", "10.00"), ("2026-11", "old", "10.00"), ("2026-12", "new", "20.00")],
)
def test_the_month_uses_the_version_of_its_first_day(month: str, version: str, amount: str) -> None:
    card = card_with("", TWO_VERSIONS)
    invoice = compute_invoice(
        month, [UsageRow("c", P, D.BROKER_MS, "kafka.m5.large", 10 * HOUR)], card
    )
    assert invoice.rate_card_version == version
    assert invoice.total == Decimal(amount)


def test_a_month_before_every_version() -> None:
    card = card_with("", TWO_VERSIONS)
    with pytest.raises(
        InvoiceError, match=r"cannot invoice '2025-12'.*t\.toml.*in force on 2025-12-01"
    ):
        compute_invoice("2025-12", [], card)


@pytest.mark.parametrize("month", ["2026-13", "2026-1", "26-11", "2026-11-01", ""])
def test_bad_month(month: str) -> None:
    with pytest.raises(InvoiceError, match="YYYY-MM"):
        compute_invoice(month, [], load_default())


# -- errors ---------------------------------------------------------------------------------


def test_unknown_broker_type_is_an_error_naming_it_and_the_card() -> None:
    rows = [UsageRow("orders", P, D.BROKER_MS, "kafka.m9.large", HOUR)]
    with pytest.raises(InvoiceError) as caught:
        compute_invoice("2026-11", rows, load_default())
    message = str(caught.value)
    assert "'kafka.m9.large'" in message
    assert "'orders'" in message
    assert "msk-us-east-1" in message
    assert "msk-us-east-1.toml" in message


def test_broker_type_without_a_price_is_an_error() -> None:
    card = card_with(price("provisioned", "broker_ms", "hour", "0.21", "kafka.m5.large"))
    rows = [UsageRow("orders", P, D.BROKER_MS, "kafka.t3.small", HOUR)]
    with pytest.raises(InvoiceError) as caught:
        compute_invoice("2026-11", rows, card)
    message = str(caught.value)
    assert "broker type 'kafka.t3.small'" in message
    assert "rate card 't' (version 'v', t.toml) has no price" in message
    assert 'resource = "kafka.t3.small"' in message


def test_broker_type_under_another_model_is_an_error() -> None:
    rows = [UsageRow("orders", P, D.BROKER_MS, "express.m7g.large", HOUR)]
    with pytest.raises(InvoiceError, match="billed under the express model"):
        compute_invoice("2026-11", rows, load_default())


@pytest.mark.parametrize("quantity", [-1, 1.5, True])
def test_bad_quantity(quantity: object) -> None:
    rows = [UsageRow("c", P, D.BYTES_IN, "", quantity)]  # type: ignore[arg-type]
    with pytest.raises(InvoiceError, match="not a non-negative integer"):
        compute_invoice("2026-11", rows, load_default())


def test_free_usage_is_a_zero_line() -> None:
    rows = [
        UsageRow("c", P, D.REPLICATION_BYTES, "", 5 * GIB),
        UsageRow("c", P, D.TRANSFORM_CPU_MS, "upper", HOUR),
        UsageRow("c", P, D.TRANSFORM_RECORDS, "upper", 1000),
        UsageRow("c", P, D.SPARK_TIERED_READ_BYTES, "", GIB),
    ]
    invoice = compute_invoice("2026-11", rows, load_default())
    assert [(x.unit_price, format(x.amount, "f")) for x in invoice.lines] == [
        (Decimal(0), "0.00")
    ] * 4
    assert [x.unit.value for x in invoice.lines] == ["GB", "hour", "record", "GB"]
    assert invoice.total == Decimal("0.00")


def test_no_usage_is_an_empty_invoice() -> None:
    invoice = compute_invoice("2026-11", [], load_default())
    assert invoice.lines == ()
    assert invoice.to_json()["total"] == "0.00"
    assert invoice.to_json()["subtotals"] == {}


# -- the JSON document ---------------------------------------------------------------------


def test_json_round_trip() -> None:
    invoice = compute_invoice("2026-11", MONTH_ROWS, load_default())
    doc = json.loads(json.dumps(invoice.to_json()))
    assert doc["total"] == "2043.67"
    assert doc["subtotals"] == {"events": "554.30", "fast": "993.92", "orders": "495.45"}
    assert doc["rate_card"] == "msk-us-east-1"
    assert doc["rate_card_version"] == "2026-11-25"
    first = doc["lines"][0]
    assert first == {
        "cluster": "events",
        "model": "serverless",
        "dimension": "broker_ms",
        "resource": "serverless",
        "quantity": "720",
        "unit": "hour",
        "unit_price": "0.75",
        "amount": "540.00",
        "raw_quantity": str(NOVEMBER * HOUR),
        "raw_unit": "ms",
    }
    assert Invoice.from_json(doc) == invoice


def test_json_amounts_always_have_two_decimals() -> None:
    rows = [UsageRow("c", P, D.BROKER_MS, "kafka.m5.large", 10 * HOUR)]
    doc = compute_invoice("2026-11", rows, load_default()).to_json()
    assert doc["lines"][0]["amount"] == "2.10"
    assert doc["total"] == "2.10"


def test_a_changed_document_is_refused() -> None:
    doc = compute_invoice("2026-11", MONTH_ROWS, load_default()).to_json()
    changed = json.loads(json.dumps(doc))
    changed["total"] = "2043.68"
    with pytest.raises(InvoiceError, match=r"total 2043\.68 is not the sum of the lines 2043\.67"):
        Invoice.from_json(changed)
    changed = json.loads(json.dumps(doc))
    changed["lines"][0]["amount"] = "541.00"
    with pytest.raises(InvoiceError, match="subtotals"):
        Invoice.from_json(changed)
    changed = json.loads(json.dumps(doc))
    del changed["lines"][1]["unit"]
    with pytest.raises(InvoiceError, match="no field 'unit'"):
        Invoice.from_json(changed)
    changed = json.loads(json.dumps(doc))
    changed["lines"][1]["amount"] = "1.005"
    with pytest.raises(InvoiceError, match="more than two decimals"):
        Invoice.from_json(changed)
    with pytest.raises(InvoiceError, match="not an object"):
        Invoice.from_json([])


def test_for_cluster() -> None:
    invoice = compute_invoice("2026-11", MONTH_ROWS, load_default())
    fast = invoice.for_cluster("fast")
    assert {x.cluster for x in fast.lines} == {"fast"}
    assert fast.total == Decimal("993.92")
    assert fast.subtotals == {"fast": Decimal("993.92")}
    assert invoice.clusters == ["events", "fast", "orders"]
    assert invoice.for_cluster("nope").lines == ()


def test_the_default_card_file_is_the_one_used(tmp_path: Path) -> None:
    """A copy of the default card with one price changed gives another amount: the
    invoice follows the card's data, nothing is hard-coded."""
    text = load_default().path.read_text().replace('price = "0.21"', 'price = "0.31"')
    copy = tmp_path / "copy.toml"
    copy.write_text(text)
    card = parse(text, copy)
    rows = [UsageRow("c", P, D.BROKER_MS, "kafka.m5.large", 10 * HOUR)]
    assert compute_invoice("2026-11", rows, card).total == Decimal("3.10")
