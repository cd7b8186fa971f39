"""Rate cards: the default card covers every broker type and MSK's dimensions; versions
are picked by date; every malformed card is refused naming its file and line."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from billing.catalog import BROKER_TYPES, PricingModel
from billing.ratecard import DEFAULT_RATE_CARD, RateCardError, load, load_default, parse
from billing.units import BILLING_UNITS, BillingUnit
from wire.usage import Dimension

MSK_PRICING = "https://aws.amazon.com/msk/pricing/"

PRICE = """
[[versions.prices]]
model = "{model}"
dimension = "{dimension}"
resource = "{resource}"
unit = "{unit}"
price = "{price}"
"""


def version(name: str, start: str, end: str | None = None, prices: str = "") -> str:
    text = f'\n[[versions]]\nversion = "{name}"\neffective_from = {start}\n'
    if end is not None:
        text += f"effective_to = {end}\n"
    text += 'source = "test fixture"\nretrieved = 2026-11-25\n'
    return text + (prices or price())


def price(
    model: str = "provisioned",
    dimension: str = "broker_ms",
    resource: str = "kafka.m5.large",
    unit: str = "hour",
    value: str = "0.21",
) -> str:
    return PRICE.format(model=model, dimension=dimension, resource=resource, unit=unit, price=value)


HEAD = 'name = "test"\ncurrency = "USD"\n'
GOOD = HEAD + version("v1", "2025-01-01")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "card.toml"
    path.write_text(text)
    return path


def line_of(text: str, snippet: str, occurrence: int = 1) -> int:
    """The 1-based line of the ``occurrence``-th line containing ``snippet``."""
    hits = [n for n, line in enumerate(text.splitlines(), start=1) if snippet in line]
    return hits[occurrence - 1]


def refused(tmp_path: Path, text: str) -> RateCardError:
    path = write(tmp_path, text)
    with pytest.raises(RateCardError) as caught:
        load(path)
    assert str(path) in str(caught.value)
    return caught.value


def assert_at(error: RateCardError, line: int, *words: str) -> None:
    assert error.line == line, str(error)
    assert f"{error.path}:{line}: " in str(error)
    for word in words:
        assert word in str(error), str(error)


# -- the default card ----------------------------------------------------------------------


def test_default_card_loads() -> None:
    card = load_default()
    assert card.path == DEFAULT_RATE_CARD
    assert card.name == "msk-us-east-1"
    assert card.currency == "USD"
    assert DEFAULT_RATE_CARD.name == "msk-us-east-1.toml"
    assert DEFAULT_RATE_CARD.parent.name == "ratecards"


@pytest.mark.parametrize("name", sorted(BROKER_TYPES))
def test_every_broker_type_has_a_price(name: str) -> None:
    """Each type is priced, exactly (no wildcard), under its own model."""
    version = load_default().version_for_month("2026-11")
    model = BROKER_TYPES[name].model
    found = version.price(model, Dimension.BROKER_MS, name)
    assert found is not None, name
    assert found.resource == name
    assert found.unit is BillingUnit.HOUR
    assert found.unit_price > 0
    for other in PricingModel:
        if other is not model:
            assert version.price(other, Dimension.BROKER_MS, name) is None


@pytest.mark.parametrize(
    ("model", "dimension", "expected"),
    [
        (PricingModel.PROVISIONED, Dimension.HOT_STORAGE_BYTE_MS, "0.10"),
        (PricingModel.PROVISIONED, Dimension.TIERED_STORAGE_BYTE_MS, "0.06"),
        (PricingModel.PROVISIONED, Dimension.TIERED_RETRIEVAL_BYTES, "0.0015"),
        (PricingModel.PROVISIONED, Dimension.ENDPOINT_MS, "0.0225"),
        (PricingModel.PROVISIONED, Dimension.ENDPOINT_BYTES, "0.006"),
        (PricingModel.EXPRESS, Dimension.HOT_STORAGE_BYTE_MS, "0.10"),
        (PricingModel.EXPRESS, Dimension.BYTES_IN, "0.01"),
        (PricingModel.EXPRESS, Dimension.ENDPOINT_MS, "0.0225"),
        (PricingModel.EXPRESS, Dimension.ENDPOINT_BYTES, "0.006"),
        (PricingModel.SERVERLESS, Dimension.PARTITION_MS, "0.0015"),
        (PricingModel.SERVERLESS, Dimension.HOT_STORAGE_BYTE_MS, "0.10"),
        (PricingModel.SERVERLESS, Dimension.BYTES_IN, "0.10"),
        (PricingModel.SERVERLESS, Dimension.BYTES_OUT, "0.05"),
    ],
)
def test_default_dimensions(model: PricingModel, dimension: Dimension, expected: str) -> None:
    version = load_default().version_for_month("2026-11")
    found = version.price(model, dimension, "any-resource")
    assert found is not None
    assert found.unit_price == Decimal(expected)
    assert found.unit is BILLING_UNITS[dimension]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kafka.t3.small", "0.0456"),
        ("kafka.m5.large", "0.21"),
        ("kafka.m5.24xlarge", "10.08"),
        ("kafka.m7g.large", "0.204"),
        ("kafka.m7g.16xlarge", "6.528"),
        ("express.m7g.large", "0.408"),
        ("express.m7g.16xlarge", "13.056"),
        ("serverless", "0.75"),
    ],
)
def test_default_broker_prices(name: str, expected: str) -> None:
    version = load_default().version_for_month("2026-11")
    found = version.price(BROKER_TYPES[name].model, Dimension.BROKER_MS, name)
    assert found is not None
    assert found.unit_price == Decimal(expected)


def test_default_prices_scale_with_size() -> None:
    """Within a family each size costs twice the one below (per vCPU pricing), a check on
    typos in the card."""
    version = load_default().version_for_month("2026-11")
    for family in ("kafka.m5", "kafka.m7g", "express.m7g"):
        types = [t for t in BROKER_TYPES.values() if t.name.startswith(family + ".")]
        base = version.price(types[0].model, Dimension.BROKER_MS, types[0].name)
        assert base is not None
        for t in types:
            found = version.price(t.model, Dimension.BROKER_MS, t.name)
            assert found is not None
            assert found.unit_price == base.unit_price * t.vcpus / types[0].vcpus, t.name


def test_free_usage_has_no_price() -> None:
    version = load_default().version_for_month("2026-11")
    for dimension in (
        Dimension.BYTES_IN,
        Dimension.BYTES_OUT,
        Dimension.REPLICATION_BYTES,
        Dimension.PARTITION_MS,
    ):
        assert version.price(PricingModel.PROVISIONED, dimension, "") is None
    assert version.price(PricingModel.EXPRESS, Dimension.BYTES_OUT, "") is None


def test_every_default_price_has_its_source_and_date() -> None:
    for version in load_default().versions:
        for found in version.prices.values():
            assert found.source == MSK_PRICING
            assert found.retrieved == datetime.date(2026, 11, 25)
            assert found.checked is False  # see the card's header: not checked
            assert found.unit is BILLING_UNITS[found.dimension]


def test_default_card_header_says_what_was_not_checked() -> None:
    text = DEFAULT_RATE_CARD.read_text()
    assert MSK_PRICING in text
    assert "NOT CHECKED" in text
    assert "2026-11-25" in text


# -- versions --------------------------------------------------------------------------------

CARD_OF_VERSIONS = (
    HEAD
    + version("late", "2026-03-01", None, price(value="0.30"))
    + version("first", "2025-01-01", "2025-07-01", price(value="0.10"))
    + version("second", "2025-07-01", "2026-01-01", price(value="0.20"))
)


@pytest.mark.parametrize(
    ("day", "expected"),
    [
        ("2025-01-01", "first"),
        ("2025-06-30", "first"),
        ("2025-07-01", "second"),
        ("2025-12-31", "second"),
        ("2026-03-01", "late"),
        ("2099-12-31", "late"),
    ],
)
def test_version_at(day: str, expected: str) -> None:
    card = parse(CARD_OF_VERSIONS, "versions.toml")
    assert card.version_at(datetime.date.fromisoformat(day)).version == expected


def test_versions_are_sorted_by_date() -> None:
    card = parse(CARD_OF_VERSIONS, "versions.toml")
    assert [v.version for v in card.versions] == ["first", "second", "late"]
    assert card.versions[0].line == line_of(CARD_OF_VERSIONS, "[[versions]]", 2)
    assert card.versions[2].line == line_of(CARD_OF_VERSIONS, "[[versions]]", 1)


@pytest.mark.parametrize("day", ["2024-12-31", "2026-01-01", "2026-02-28"])
def test_no_version_in_force(day: str) -> None:
    card = parse(CARD_OF_VERSIONS, "versions.toml")
    with pytest.raises(RateCardError) as caught:
        card.version_at(datetime.date.fromisoformat(day))
    message = str(caught.value)
    assert "versions.toml" in message
    assert f"no version of rate card 'test' is in force on {day}" in message
    assert "'second' (2025-07-01 to 2026-01-01)" in message
    assert "'late' (2026-03-01 to open-ended)" in message


@pytest.mark.parametrize(
    ("month", "expected"),
    [("2025-01", "first"), ("2025-06", "first"), ("2025-07", "second"), ("2026-04", "late")],
)
def test_a_month_uses_the_version_of_its_first_day(month: str, expected: str) -> None:
    card = parse(CARD_OF_VERSIONS, "versions.toml")
    assert card.version_for_month(month).version == expected


def test_a_version_starting_mid_month_applies_from_the_next_month() -> None:
    text = HEAD + version("a", "2025-01-01", "2025-01-15") + version("b", "2025-01-15")
    card = parse(text)
    assert card.version_for_month("2025-01").version == "a"
    assert card.version_for_month("2025-02").version == "b"


# -- lookup ----------------------------------------------------------------------------------


def test_exact_resource_wins_over_the_wildcard() -> None:
    prices = (
        price("provisioned", "endpoint_ms", "", "hour", "0.02")
        + price("provisioned", "endpoint_ms", "vip", "hour", "0.05")
        + price("serverless", "endpoint_ms", "vip", "hour", "0.07")
    )
    version_ = parse(HEAD + version("v", "2025-01-01", None, prices)).versions[0]
    exact = version_.price(PricingModel.PROVISIONED, Dimension.ENDPOINT_MS, "vip")
    other = version_.price(PricingModel.PROVISIONED, Dimension.ENDPOINT_MS, "other")
    empty = version_.price(PricingModel.PROVISIONED, Dimension.ENDPOINT_MS, "")
    assert exact is not None
    assert exact.unit_price == Decimal("0.05")
    assert other is not None
    assert other.unit_price == Decimal("0.02")
    assert empty is not None
    assert empty.unit_price == Decimal("0.02")
    # serverless has only vip's price: no wildcard to fall back to
    assert version_.price(PricingModel.SERVERLESS, Dimension.ENDPOINT_MS, "other") is None
    assert version_.price(PricingModel.EXPRESS, Dimension.ENDPOINT_MS, "vip") is None


def test_per_price_source_overrides_the_version() -> None:
    text = GOOD + 'source = "contract 7"\nretrieved = 2026-01-02\nchecked = true\nnote = "x"\n'
    found = (
        parse(text)
        .versions[0]
        .prices[(PricingModel.PROVISIONED, Dimension.BROKER_MS, "kafka.m5.large")]
    )
    assert (found.source, found.retrieved, found.checked, found.note) == (
        "contract 7",
        datetime.date(2026, 1, 2),
        True,
        "x",
    )
    plain = (
        parse(GOOD)
        .versions[0]
        .price(PricingModel.PROVISIONED, Dimension.BROKER_MS, "kafka.m5.large")
    )
    assert plain is not None
    assert (plain.source, plain.retrieved, plain.checked) == (
        "test fixture",
        datetime.date(2026, 11, 25),
        False,
    )
    assert plain.line == line_of(GOOD, "[[versions.prices]]")


def test_prices_are_exact_decimals() -> None:
    text = HEAD + version("v", "2025-01-01", None, price(value="0.1000000000000000000000000001"))
    found = (
        parse(text)
        .versions[0]
        .price(PricingModel.PROVISIONED, Dimension.BROKER_MS, "kafka.m5.large")
    )
    assert found is not None
    assert found.unit_price == Decimal("0.1000000000000000000000000001")
    integer = GOOD.replace('price = "0.21"', "price = 2")
    found = (
        parse(integer)
        .versions[0]
        .price(PricingModel.PROVISIONED, Dimension.BROKER_MS, "kafka.m5.large")
    )
    assert found is not None
    assert found.unit_price == Decimal(2)


# -- malformed cards: each refused with its file and line ------------------------------------


def test_toml_syntax_error(tmp_path: Path) -> None:
    text = GOOD.replace('price = "0.21"', 'price = "0.21')
    assert_at(refused(tmp_path, text), line_of(text, 'price = "0.21'), "TOML syntax error")


def test_toml_syntax_error_bare_word(tmp_path: Path) -> None:
    text = GOOD.replace('model = "provisioned"', "model = provisioned")
    assert_at(refused(tmp_path, text), line_of(text, "model = provisioned"), "TOML syntax error")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "card.toml"
    path.write_bytes(GOOD.encode().replace(b"test", b"t\xffst"))
    with pytest.raises(RateCardError) as caught:
        load(path)
    assert_at(caught.value, 1, "UTF-8")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RateCardError, match=r"nope\.toml: cannot be read"):
        load(tmp_path / "nope.toml")


@pytest.mark.parametrize("field", ["model", "dimension", "unit", "price"])
def test_price_missing_a_field(tmp_path: Path, field: str) -> None:
    text = "\n".join(line for line in GOOD.splitlines() if not line.startswith(f"{field} ="))
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "[[versions.prices]]"), f"has no {field}")


@pytest.mark.parametrize("field", ["name", "currency"])
def test_card_missing_a_field(tmp_path: Path, field: str) -> None:
    text = "\n".join(line for line in GOOD.splitlines() if not line.startswith(f"{field} ="))
    assert_at(refused(tmp_path, text), 1, f"the card has no {field}")


def test_version_missing_fields(tmp_path: Path) -> None:
    text = GOOD.replace("effective_from = 2025-01-01\n", "")
    assert_at(refused(tmp_path, text), line_of(text, "[[versions]]"), "has no effective_from")
    text = GOOD.replace('version = "v1"\n', "")
    assert_at(refused(tmp_path, text), line_of(text, "[[versions]]"), "has no version")


def test_no_versions(tmp_path: Path) -> None:
    assert_at(refused(tmp_path, HEAD), 1, "has no versions")


def test_version_without_prices(tmp_path: Path) -> None:
    text = HEAD + '\n[[versions]]\nversion = "v"\neffective_from = 2025-01-01\n'
    assert_at(refused(tmp_path, text), line_of(text, "[[versions]]"), "has no prices")


def test_no_source(tmp_path: Path) -> None:
    text = GOOD.replace('source = "test fixture"\n', "")
    assert_at(refused(tmp_path, text), line_of(text, "[[versions.prices]]"), "has no source")
    text = GOOD.replace("retrieved = 2026-11-25\n", "")
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "[[versions.prices]]"), "has no retrieval date")


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ('price = "abc"', ("'abc' is not a decimal number",)),
        ('price = "0,21"', ("'0,21' is not a decimal number",)),
        ("price = 0.21", ("is a TOML float", 'price = "0.21"')),
        ('price = "-0.21"', ("finite amount of 0 or more",)),
        ('price = "NaN"', ("finite amount",)),
        ('price = "Infinity"', ("finite amount",)),
        ("price = true", ("decimal string",)),
        ("price = [1]", ("decimal string",)),
    ],
)
def test_non_decimal_price(tmp_path: Path, bad: str, words: tuple[str, ...]) -> None:
    text = GOOD.replace('price = "0.21"', bad)
    assert_at(refused(tmp_path, text), line_of(text, bad), *words)


def test_unknown_dimension(tmp_path: Path) -> None:
    text = GOOD.replace('dimension = "broker_ms"', 'dimension = "broker_hours"')
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "broker_hours"), "unknown dimension 'broker_hours'", "broker_ms")


def test_unknown_model(tmp_path: Path) -> None:
    text = GOOD.replace('model = "provisioned"', 'model = "dedicated"')
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "dedicated"), "unknown model 'dedicated'", "serverless")


def test_unknown_field(tmp_path: Path) -> None:
    text = GOOD.replace('unit = "hour"', 'unit = "hour"\nprise = "0.3"')
    assert_at(refused(tmp_path, text), line_of(text, "prise"), "unknown field 'prise'")
    text = GOOD.replace("effective_from", "effective_form")
    assert_at(refused(tmp_path, text), line_of(text, "effective_form"), "'effective_form'")
    text = GOOD.replace('currency = "USD"', 'currency = "USD"\nregion = "us-east-1"')
    assert_at(refused(tmp_path, text), line_of(text, "region"), "'region'")


def test_wrong_unit(tmp_path: Path) -> None:
    text = GOOD.replace('unit = "hour"', 'unit = "minute"')
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "minute"), "broker_ms is priced per hour, not per 'minute'")
    prices = price("provisioned", "hot_storage_byte_ms", "", "GB", "0.10")
    text = HEAD + version("v", "2025-01-01", None, prices)
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, 'unit = "GB"'), "priced per GB-month")


def test_unknown_broker_type(tmp_path: Path) -> None:
    text = GOOD.replace('"kafka.m5.large"', '"kafka.m5.huge"')
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "kafka.m5.huge"), "unknown broker type 'kafka.m5.huge'")


def test_broker_type_under_the_wrong_model(tmp_path: Path) -> None:
    text = GOOD.replace('"kafka.m5.large"', '"express.m7g.large"')
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "express.m7g.large"), "billed under the express model")


def test_two_prices_for_the_same_thing(tmp_path: Path) -> None:
    text = GOOD + price(value="0.22")
    error = refused(tmp_path, text)
    assert_at(
        error,
        line_of(text, "[[versions.prices]]", 2),
        f"twice (also at line {line_of(text, '[[versions.prices]]', 1)})",
    )


def test_overlapping_versions(tmp_path: Path) -> None:
    text = HEAD + version("a", "2025-01-01", "2025-08-01") + version("b", "2025-07-01")
    error = refused(tmp_path, text)
    assert_at(
        error,
        line_of(text, "[[versions]]", 2),
        "version 'b' (2025-07-01 to open-ended) overlaps version 'a'",
        "effective_to = 2025-07-01",
    )


def test_open_ended_version_overlaps_a_later_one(tmp_path: Path) -> None:
    # the later one is written first: the error is at the later one's line
    text = HEAD + version("new", "2026-01-01") + version("old", "2025-01-01")
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "[[versions]]", 1), "'new'", "overlaps version 'old'")


def test_adjacent_versions_do_not_overlap() -> None:
    text = HEAD + version("a", "2025-01-01", "2025-07-01") + version("b", "2025-07-01")
    assert [v.version for v in parse(text).versions] == ["a", "b"]


def test_version_ending_before_it_starts(tmp_path: Path) -> None:
    text = HEAD + version("a", "2025-01-01", "2025-01-01")
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, "effective_to"), "is not after effective_from")


def test_version_defined_twice(tmp_path: Path) -> None:
    text = HEAD + version("a", "2025-01-01", "2025-02-01") + version("a", "2025-02-01")
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, 'version = "a"', 2), "defined twice")


@pytest.mark.parametrize(
    "bad",
    ["effective_from = 2025-01-01T00:00:00", 'effective_from = "2025-13-01"', "effective_from = 1"],
)
def test_bad_date(tmp_path: Path, bad: str) -> None:
    text = GOOD.replace("effective_from = 2025-01-01", bad)
    assert_at(refused(tmp_path, text), line_of(text, "effective_from"), "must be a date")


def test_date_as_string_is_accepted() -> None:
    text = GOOD.replace("effective_from = 2025-01-01", 'effective_from = "2025-01-01"')
    assert parse(text).versions[0].effective_from == datetime.date(2025, 1, 1)


def test_wrong_types(tmp_path: Path) -> None:
    text = GOOD.replace('resource = "kafka.m5.large"', "resource = 5")
    assert_at(refused(tmp_path, text), line_of(text, "resource = 5"), "non-empty string")
    text = GOOD.replace("retrieved = 2026-11-25", "retrieved = 2026-11-25\nchecked = 1")
    assert_at(refused(tmp_path, text), line_of(text, "checked = 1"), "true or false")


def test_errors_later_in_a_long_card_point_at_their_own_entry(tmp_path: Path) -> None:
    """The 5th price of the 2nd version: the line comes from counting headers."""
    prices = "".join(
        price("provisioned", "broker_ms", n, "hour", "1") for n in list(BROKER_TYPES)[:4]
    )
    bad = price("provisioned", "tiered_storage_byte_ms", "", "GB-month", "x1")
    text = (
        HEAD
        + version("a", "2025-01-01", "2025-02-01")
        + version("b", "2025-02-01", None, prices + bad)
    )
    error = refused(tmp_path, text)
    assert_at(error, line_of(text, '"x1"'), "'x1' is not a decimal")
    assert error.line == line_of(text, "[[versions.prices]]", 6) + 5


def test_inline_tables_fall_back_to_the_versions_line(tmp_path: Path) -> None:
    text = HEAD + (
        'versions = [{version = "v", effective_from = 2025-01-01, source = "s", '
        'retrieved = 2025-01-01, prices = [{model = "cloud", dimension = "bytes_in", '
        'unit = "GB", price = "1"}]}]\n'
    )
    assert_at(refused(tmp_path, text), line_of(text, "versions = "), "unknown model 'cloud'")


def test_the_default_card_is_valid_line_by_line() -> None:
    """Each price's line is its own [[versions.prices]] header in the default card."""
    text = DEFAULT_RATE_CARD.read_text().splitlines()
    for found in load_default().versions[0].prices.values():
        assert text[found.line - 1].strip() == "[[versions.prices]]"
        block = "\n".join(text[found.line : found.line + 6])
        assert f'dimension = "{found.dimension}"' in block
