"""From the raw units of usage events (``wire.usage.UNITS``) to billing units, exactly.

| raw unit | billing unit | divide by |
|---|---|---|
| ms (``*_ms``) | hour | 3,600,000 |
| byte-ms (``*_byte_ms``) | GB-month | 2^30 x 3,600,000 x the hours of the invoice's month |
| bytes | GB | 2^30 |
| records | record | 1 |

GB is 2^30 bytes (a GiB), as AWS meters storage and data transfer: a "GB-month" of MSK
storage is the GiB stored in each hour of the month, summed and divided by the hours of
that month (MSK: "prorated by the hour"), so a byte stored for all of November is a
byte-month and so is one stored for all of February. Months are UTC calendar months.

A billing quantity is a :class:`~fractions.Fraction` (raw / divisor), never rounded: an
hour is 3,600,000 ms, so a minute is 1/60 hour, which no decimal writes exactly. Money
is computed from the exact fraction and rounded once (:func:`amount`); the decimal shown
on an invoice line is exact when the fraction has a finite decimal expansion (always for
bytes to GB) and otherwise rounded at :data:`QUANTITY_PLACES` places, for display only.
"""

from __future__ import annotations

import calendar
import decimal
import enum
import re
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType

from wire.usage import UNITS, Dimension

BYTES_PER_GB = 2**30
MS_PER_HOUR = 3_600_000
QUANTITY_PLACES = 24
"""Decimal places of a displayed quantity that has no finite decimal expansion."""
CENT = Decimal("0.01")

_MONTH = re.compile(r"(\d{4})-(\d{2})")


class BillingUnit(enum.StrEnum):
    HOUR = "hour"
    GB_MONTH = "GB-month"
    GB = "GB"
    RECORD = "record"


_BY_RAW_UNIT = {
    "ms": BillingUnit.HOUR,
    "byte-ms": BillingUnit.GB_MONTH,
    "bytes": BillingUnit.GB,
    "records": BillingUnit.RECORD,
}

BILLING_UNITS: Mapping[Dimension, BillingUnit] = MappingProxyType(
    {dimension: _BY_RAW_UNIT[raw] for dimension, raw in UNITS.items()}
)
"""The billing unit of each dimension; a rate card's prices are per one of these."""


def parse_month(month: str) -> tuple[int, int]:
    """``"2026-11"`` as (2026, 11); ValueError for anything else."""
    found = _MONTH.fullmatch(month)
    if found is None or not 1 <= int(found.group(2)) <= 12:
        raise ValueError(f"month {month!r} is not of the form YYYY-MM (e.g. 2026-11)")
    return int(found.group(1)), int(found.group(2))


def hours_in_month(month: str) -> int:
    """The hours of a UTC calendar month: 672, 696, 720 or 744."""
    year, number = parse_month(month)
    return calendar.monthrange(year, number)[1] * 24


def divisor(dimension: Dimension, month: str) -> int:
    """Raw units of ``dimension`` in one billing unit, in ``month``."""
    unit = BILLING_UNITS[dimension]
    if unit is BillingUnit.HOUR:
        return MS_PER_HOUR
    if unit is BillingUnit.GB_MONTH:
        return BYTES_PER_GB * MS_PER_HOUR * hours_in_month(month)
    if unit is BillingUnit.GB:
        return BYTES_PER_GB
    return 1


def billing_quantity(dimension: Dimension, raw: int, month: str) -> Fraction:
    """``raw`` units of ``dimension`` in its billing unit, exactly."""
    if raw < 0:
        raise ValueError(f"negative {dimension} quantity {raw}")
    return Fraction(raw, divisor(dimension, month))


def amount(quantity: Fraction, unit_price: Decimal) -> Decimal:
    """``quantity x unit_price`` rounded once, half-up, to the cent (non-negative)."""
    exact = quantity * Fraction(unit_price) * 100
    if exact < 0:
        raise ValueError(f"negative amount {float(exact) / 100}")
    cents = (2 * exact.numerator + exact.denominator) // (2 * exact.denominator)
    return Decimal(cents).scaleb(-2)


def to_decimal(value: Fraction) -> Decimal:
    """``value`` as a Decimal: exact when its decimal expansion is finite, else rounded
    (half-even) at :data:`QUANTITY_PLACES` places."""
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    with decimal.localcontext() as context:
        context.prec = len(str(abs(value.numerator))) + max(twos, fives) + QUANTITY_PLACES + 4
        context.rounding = decimal.ROUND_HALF_EVEN
        result = Decimal(value.numerator) / Decimal(value.denominator)
        if denominator != 1:
            result = result.quantize(Decimal(1).scaleb(-QUANTITY_PLACES))
    return result


def format_decimal(value: Decimal) -> str:
    """Plain notation, no exponent, no trailing zeros after the point (``"0.5"``, ``"12"``)."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"
