"""Rate cards: prices as data, in TOML, versioned by effective dates.

A card (``billing/ratecards/*.toml``)::

    name = "msk-us-east-1"            # required: shown on every invoice
    currency = "USD"                  # required
    description = "..."               # optional

    [[versions]]
    version = "2026-11-25"            # required, unique in the card
    effective_from = 2024-01-01       # required: the first day it is in force
    effective_to = 2027-01-01         # optional, exclusive: the first day it is not
    source = "https://aws.amazon.com/msk/pricing/"   # default source of its prices
    retrieved = 2026-11-25            # default date the prices were taken from it
    checked = false                   # default: were they checked against the source?

    [[versions.prices]]
    model = "provisioned"             # required: provisioned | express | serverless
    dimension = "broker_ms"           # required: a wire.usage.Dimension
    resource = "kafka.m5.large"       # optional: "" (the default) applies to every resource
    unit = "hour"                     # required: the dimension's billing unit (units.py)
    price = "0.21"                    # required: a decimal string (or an integer)
    # source, retrieved, checked: per-price overrides; note: free text

A version is in force on the days ``effective_from <= day < effective_to``; versions may
not overlap (gaps are allowed, and a day in a gap has no prices). An invoice month uses
the version in force on the month's first day, for the whole month.

``RateCardVersion.price(model, dimension, resource)`` finds the price of that resource
(exact match) or else the one with ``resource = ""``; ``None`` means the usage is free
(e.g. bytes out on MSK Provisioned). Prices are TOML strings so that they stay exact
Decimals (a TOML float is refused); every price has a source and a retrieval date, its
own or its version's.

Every mistake in a card is a :class:`RateCardError` naming the file and the line: TOML's
own syntax errors (tomllib's line), a missing or unknown field, a value of the wrong
type, a price that is not a decimal, an unknown model, dimension, unit or broker type,
two prices for the same (model, dimension, resource), overlapping versions.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import itertools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from billing.catalog import PricingModel, UnknownBrokerType, broker_type
from billing.units import BILLING_UNITS, BillingUnit, parse_month
from wire.usage import Dimension

DEFAULT_RATE_CARD = Path(__file__).resolve().parent / "ratecards" / "msk-us-east-1.toml"
"""MSK's public us-east-1 price list (the card's header says where each number is from)."""

_CARD_KEYS = frozenset({"name", "currency", "description", "versions"})
_VERSION_KEYS = frozenset(
    {
        "version",
        "effective_from",
        "effective_to",
        "source",
        "retrieved",
        "checked",
        "note",
        "prices",
    }
)
_PRICE_KEYS = frozenset(
    {"model", "dimension", "resource", "unit", "price", "source", "retrieved", "checked", "note"}
)
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]#]+?)\s*\]\]?\s*(?:#.*)?$")
_SYNTAX_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


class RateCardError(ValueError):
    """A rate card that cannot be used: the message names the file and, where there is
    one, the line (``FILE:LINE``)."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"rate card {where}: {message}")


@dataclass(frozen=True, slots=True)
class Price:
    model: PricingModel
    dimension: Dimension
    resource: str
    """"" applies to every resource of the dimension that has no price of its own."""
    unit: BillingUnit
    unit_price: Decimal
    """Per one ``unit``, in the card's currency."""
    source: str
    retrieved: datetime.date
    checked: bool
    """Whether the number was checked against ``source`` on ``retrieved``."""
    note: str
    line: int
    """Where the price is in its card."""


@dataclass(frozen=True, slots=True, eq=False)
class RateCardVersion:
    version: str
    effective_from: datetime.date
    effective_to: datetime.date | None
    """Exclusive; None: open-ended."""
    prices: Mapping[tuple[PricingModel, Dimension, str], Price]
    line: int

    def in_force(self, when: datetime.date) -> bool:
        return self.effective_from <= when and (
            self.effective_to is None or when < self.effective_to
        )

    def price(self, model: PricingModel, dimension: Dimension, resource: str) -> Price | None:
        """The price of ``resource`` (exact match first, then ``resource = ""``), or None."""
        found = self.prices.get((model, dimension, resource))
        if found is None and resource:
            found = self.prices.get((model, dimension, ""))
        return found

    def describe_dates(self) -> str:
        end = self.effective_to.isoformat() if self.effective_to else "open-ended"
        return f"{self.version!r} ({self.effective_from.isoformat()} to {end})"


@dataclass(frozen=True, slots=True, eq=False)
class RateCard:
    name: str
    currency: str
    description: str
    path: Path
    versions: tuple[RateCardVersion, ...]
    """By effective_from."""

    def version_at(self, when: datetime.date) -> RateCardVersion:
        """The version in force on ``when``; RateCardError when none is."""
        for version in self.versions:
            if version.in_force(when):
                return version
        covered = ", ".join(v.describe_dates() for v in self.versions)
        raise RateCardError(
            self.path,
            None,
            f"no version of rate card {self.name!r} is in force on {when.isoformat()} "
            f"(its versions: {covered}): add a [[versions]] entry whose dates include it",
        )

    def version_for_month(self, month: str) -> RateCardVersion:
        """The version an invoice of ``month`` (YYYY-MM) uses: the one in force on the
        month's first day."""
        year, number = parse_month(month)
        return self.version_at(datetime.date(year, number, 1))


def load(path: Path) -> RateCard:
    """Read and check the rate card at ``path``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RateCardError(path, None, f"cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RateCardError(path, line, "is not UTF-8: save it as UTF-8") from None
    return parse(text, path)


@functools.cache
def load_default() -> RateCard:
    """The default card, :data:`DEFAULT_RATE_CARD` (read once per process)."""
    return load(DEFAULT_RATE_CARD)


def parse(text: str, path: Path | str = "<string>") -> RateCard:
    """The rate card in ``text``; ``path`` names it in errors."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = _SYNTAX_AT.search(message)
        line: int | None = None
        if at is not None:
            line = int(at.group(1))
            message = f"{message[: at.start()]} (column {at.group(2)})"
        elif "end of document" in message:
            line = max(1, len(text.splitlines()))
        raise RateCardError(path, line, f"TOML syntax error: {message}") from None
    return _Reader(text, Path(path)).card(doc)


class _Lines:
    """Where the tables and keys of a card are in its text (tomllib keeps no positions).

    The i-th ``[[versions]]`` header is the i-th version, the j-th ``[[versions.prices]]``
    header the j-th price of the card (TOML appends each to the last version). A key's
    line is searched between its table's header and the next header. Cards written with
    inline tables get the line of the ``versions`` key instead.
    """

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()
        self._headers: list[int] = []
        self.versions: list[int] = []
        self.prices: list[int] = []
        for number, line in enumerate(self._lines, start=1):
            found = _HEADER.match(line)
            if found is None:
                continue
            self._headers.append(number)
            name = re.sub(r"\s*\.\s*", ".", found.group(2))
            if found.group(1) == "[[" and name == "versions":
                self.versions.append(number)
            elif found.group(1) == "[[" and name == "versions.prices":
                self.prices.append(number)

    def key(self, table_line: int, key: str) -> int:
        """The line of ``key = …`` in the table whose header is at ``table_line`` (0: the
        top level); the header's line (or 1) when it is not there."""
        pattern = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=")
        for number in range(table_line + 1, len(self._lines) + 1):
            if number in self._headers:
                break
            if pattern.match(self._lines[number - 1]):
                return number
        return max(table_line, 1)


class _Reader:
    def __init__(self, text: str, path: Path) -> None:
        self.path = path
        self.lines = _Lines(text)
        self.price_index = 0
        self.price_count = 0

    def fail(self, line: int, message: str) -> NoReturn:
        raise RateCardError(self.path, max(line, 1), message)

    def card(self, doc: dict[str, Any]) -> RateCard:
        self.unknown_keys(doc, _CARD_KEYS, 0, "the card")
        name = self.text(doc, "name", 0, "the card", required=True)
        currency = self.text(doc, "currency", 0, "the card", required=True)
        description = self.text(doc, "description", 0, "the card")
        entries = doc.get("versions")
        if not isinstance(entries, list) or not entries:
            self.fail(
                self.lines.key(0, "versions"),
                "has no versions: add a [[versions]] table with version, effective_from "
                "and its [[versions.prices]]",
            )
        self.price_count = sum(
            len(e["prices"])
            for e in entries
            if isinstance(e, dict) and isinstance(e.get("prices"), list)
        )
        versions: list[RateCardVersion] = []
        for index, entry in enumerate(entries):
            line = self.table_line(self.lines.versions, index, len(entries))
            if not isinstance(entry, dict):
                self.fail(line, "each entry of versions must be a table ([[versions]])")
            version = self.version(entry, line)
            for other in versions:
                if other.version == version.version:
                    self.fail(
                        self.lines.key(line, "version"),
                        f"version {version.version!r} is defined twice (also at line "
                        f"{other.line}): give each version its own name",
                    )
            versions.append(version)
        versions.sort(key=lambda v: v.effective_from)
        for before, after in itertools.pairwise(versions):
            if before.effective_to is None or before.effective_to > after.effective_from:
                self.fail(
                    after.line,
                    f"version {after.describe_dates()} overlaps version "
                    f"{before.describe_dates()} (line {before.line}): set effective_to = "
                    f"{after.effective_from.isoformat()} (or earlier) on "
                    f"{before.version!r}",
                )
        return RateCard(name, currency, description, self.path, tuple(versions))

    def version(self, entry: dict[str, Any], line: int) -> RateCardVersion:
        what = "a version"
        self.unknown_keys(entry, _VERSION_KEYS, line, what)
        name = self.text(entry, "version", line, what, required=True)
        what = f"version {name!r}"
        start = self.date(entry, "effective_from", line, what)
        if start is None:
            self.fail(line, f"{what} has no effective_from: add effective_from = YYYY-MM-DD")
        end = self.date(entry, "effective_to", line, what)
        if end is not None and end <= start:
            self.fail(
                self.lines.key(line, "effective_to"),
                f"{what}: effective_to {end.isoformat()} is not after effective_from "
                f"{start.isoformat()} (effective_to is the first day it is no longer in "
                "force)",
            )
        defaults = {
            "source": self.text(entry, "source", line, what),
            "retrieved": self.date(entry, "retrieved", line, what),
            "checked": self.flag(entry, "checked", line, what),
        }
        entries = entry.get("prices")
        if not isinstance(entries, list) or not entries:
            self.fail(
                self.lines.key(line, "prices") if "prices" in entry else line,
                f"{what} has no prices: add [[versions.prices]] tables after it",
            )
        prices: dict[tuple[PricingModel, Dimension, str], Price] = {}
        for price_entry in entries:
            price_line = self.table_line(self.lines.prices, self.price_index, self.price_count)
            self.price_index += 1
            if not isinstance(price_entry, dict):
                self.fail(price_line, f"each price of {what} must be a table")
            price = self.price(price_entry, price_line, what, defaults)
            key = (price.model, price.dimension, price.resource)
            if key in prices:
                self.fail(
                    price_line,
                    f"{what} prices ({price.model}, {price.dimension}, "
                    f"{price.resource or 'all resources'}) twice (also at line "
                    f"{prices[key].line}): keep one",
                )
            prices[key] = price
        return RateCardVersion(name, start, end, MappingProxyType(prices), line)

    def price(
        self, entry: dict[str, Any], line: int, version: str, defaults: dict[str, Any]
    ) -> Price:
        what = f"a price of {version}"
        self.unknown_keys(entry, _PRICE_KEYS, line, what)
        model_name = self.text(entry, "model", line, what, required=True)
        try:
            model = PricingModel(model_name)
        except ValueError:
            self.fail(
                self.lines.key(line, "model"),
                f"{what}: unknown model {model_name!r}: use one of "
                f"{', '.join(m.value for m in PricingModel)}",
            )
        dimension_name = self.text(entry, "dimension", line, what, required=True)
        try:
            dimension = Dimension(dimension_name)
        except ValueError:
            self.fail(
                self.lines.key(line, "dimension"),
                f"{what}: unknown dimension {dimension_name!r}: use one of "
                f"{', '.join(d.value for d in Dimension)}",
            )
        resource = self.text(entry, "resource", line, what)
        if dimension is Dimension.BROKER_MS and resource:
            self.check_broker_type(resource, model, self.lines.key(line, "resource"), what)
        unit_name = self.text(entry, "unit", line, what, required=True)
        expected = BILLING_UNITS[dimension]
        if unit_name != expected.value:
            self.fail(
                self.lines.key(line, "unit"),
                f"{what}: {dimension} is priced per {expected.value}, not per "
                f'{unit_name!r}: write unit = "{expected.value}" and the price per '
                f"{expected.value}",
            )
        unit_price = self.decimal(entry, line, what)
        source = self.text(entry, "source", line, what) or defaults["source"]
        if not source:
            self.fail(
                line,
                f"{what} has no source: give it (or its version) source = the URL or "
                "document the number comes from",
            )
        retrieved = self.date(entry, "retrieved", line, what) or defaults["retrieved"]
        if retrieved is None:
            self.fail(
                line,
                f"{what} has no retrieval date: give it (or its version) retrieved = the "
                "date the number was taken from its source (YYYY-MM-DD)",
            )
        checked = self.flag(entry, "checked", line, what)
        if "checked" not in entry:
            checked = defaults["checked"]
        note = self.text(entry, "note", line, what)
        return Price(
            model=model,
            dimension=dimension,
            resource=resource,
            unit=expected,
            unit_price=unit_price,
            source=source,
            retrieved=retrieved,
            checked=checked,
            note=note,
            line=line,
        )

    def check_broker_type(self, name: str, model: PricingModel, line: int, what: str) -> None:
        try:
            found = broker_type(name)
        except UnknownBrokerType as exc:
            self.fail(line, f"{what}: {exc}")
        if found.model is not model:
            self.fail(
                line,
                f"{what}: broker type {name} is billed under the {found.model} model, not "
                f'{model}: write model = "{found.model.value}"',
            )

    # typed fields -----------------------------------------------------------------------

    def table_line(self, headers: list[int], index: int, count: int) -> int:
        if index < len(headers) and len(headers) == count:
            return headers[index]
        return self.lines.key(0, "versions")

    def unknown_keys(
        self, entry: dict[str, Any], allowed: frozenset[str], line: int, what: str
    ) -> None:
        for key in entry:
            if key not in allowed:
                self.fail(
                    self.lines.key(line, key),
                    f"{what} has an unknown field {key!r}: the fields are "
                    f"{', '.join(sorted(allowed))}",
                )

    def text(
        self, entry: dict[str, Any], key: str, line: int, what: str, *, required: bool = False
    ) -> str:
        if key not in entry:
            if required:
                self.fail(line, f'{what} has no {key}: add {key} = "..."')
            return ""
        value = entry[key]
        if not isinstance(value, str) or (required and not value.strip()):
            self.fail(
                self.lines.key(line, key),
                f"{what}: {key} must be a non-empty string, not {value!r}",
            )
        return value

    def date(self, entry: dict[str, Any], key: str, line: int, what: str) -> datetime.date | None:
        if key not in entry:
            return None
        value = entry[key]
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = datetime.date.fromisoformat(value)
        if isinstance(value, datetime.datetime) or not isinstance(value, datetime.date):
            self.fail(
                self.lines.key(line, key),
                f"{what}: {key} must be a date (YYYY-MM-DD, no time), not {value!r}",
            )
        return value

    def flag(self, entry: dict[str, Any], key: str, line: int, what: str) -> bool:
        value = entry.get(key, False)
        if not isinstance(value, bool):
            self.fail(
                self.lines.key(line, key), f"{what}: {key} must be true or false, not {value!r}"
            )
        return value

    def decimal(self, entry: dict[str, Any], line: int, what: str) -> Decimal:
        if "price" not in entry:
            self.fail(line, f'{what} has no price: add price = "0.00" (a decimal string)')
        value = entry["price"]
        at = self.lines.key(line, "price")
        if isinstance(value, float):
            self.fail(
                at,
                f"{what}: price {value!r} is a TOML float, which is not exact: write it as "
                f'a string, price = "{value!r}"',
            )
        if isinstance(value, bool) or not isinstance(value, int | str):
            self.fail(at, f'{what}: price must be a decimal string such as "0.21", not {value!r}')
        try:
            number = Decimal(value.strip() if isinstance(value, str) else value)
        except InvalidOperation:
            self.fail(
                at, f'{what}: price {value!r} is not a decimal number: write e.g. price = "0.21"'
            )
        if not number.is_finite() or number < 0:
            self.fail(at, f"{what}: price {value!r} must be a finite amount of 0 or more")
        return number
