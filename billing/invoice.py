"""Monthly invoices from usage and a rate card.

:func:`compute_invoice` sums the month's usage rows per (cluster, model, dimension,
resource), converts each sum to its billing unit (``units.py``: exact fractions), prices it
with the rate card version in force on the month's first day, and rounds the line's amount
once, half-up, to the cent. Subtotals (per cluster) and the total are sums of the rounded
lines, so they add up on paper. Money is :class:`~decimal.Decimal` throughout, never float.

Usage without a price is free: a line with unit price 0 and amount 0.00 (e.g. bytes out on
MSK Provisioned). Broker-hours of a broker type the card has no price for, or of a name that
is no broker type, are an :class:`InvoiceError` naming the type and the card: a cluster's
capacity is never billed as free by mistake.

``Invoice.to_json()`` (what ``invoices/YYYY-MM.json`` holds)::

    {"month": "2026-11", "currency": "USD",
     "rate_card": "msk-us-east-1", "rate_card_version": "2026-11-25",
     "lines": [{"cluster": "orders", "model": "provisioned", "dimension": "broker_ms",
                "resource": "kafka.m5.large", "quantity": "1.5", "unit": "hour",
                "unit_price": "0.21", "amount": "0.32",
                "raw_quantity": "5400000", "raw_unit": "ms"}],
     "subtotals": {"orders": "0.32"},
     "total": "0.32"}

Amounts are strings with two decimals, quantities and unit prices decimal strings (a
quantity with no finite decimal expansion, such as 1/60 hour, is shown rounded at 24
places; its amount was computed from the exact value, which ``raw_quantity`` /
``raw_unit`` give back: raw / divisor in ``units.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from billing import units
from billing.catalog import PricingModel, UnknownBrokerType, broker_type
from billing.ratecard import RateCard, RateCardError
from billing.units import CENT, BillingUnit
from wire.usage import UNITS, Dimension

_T = TypeVar("_T")
_DIMENSION_ORDER = {d: i for i, d in enumerate(Dimension)}
_MODEL_ORDER = {m: i for i, m in enumerate(PricingModel)}


class InvoiceError(ValueError):
    """Usage that cannot be invoiced, or an invoice document that does not add up."""


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One cluster's usage of one dimension (and resource) under one pricing model, in the
    dimension's raw unit; rows of the same key are summed."""

    cluster: str
    model: PricingModel
    dimension: Dimension
    resource: str
    quantity: int


@dataclass(frozen=True, slots=True)
class InvoiceLine:
    cluster: str
    model: PricingModel
    dimension: Dimension
    resource: str
    quantity: Decimal
    """In ``unit`` (display value: see the module's docstring)."""
    unit: BillingUnit
    unit_price: Decimal
    """Per ``unit``; 0 when the card has no price (free)."""
    amount: Decimal
    """``quantity x unit_price``, rounded once, half-up, to the cent."""
    raw_quantity: int
    """The month's sum in the raw unit of the usage events."""
    raw_unit: str

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "model": self.model.value,
            "dimension": self.dimension.value,
            "resource": self.resource,
            "quantity": units.format_decimal(self.quantity),
            "unit": self.unit.value,
            "unit_price": format(self.unit_price, "f"),
            "amount": _money(self.amount),
            "raw_quantity": str(self.raw_quantity),
            "raw_unit": self.raw_unit,
        }

    @classmethod
    def from_json(cls, doc: Any) -> InvoiceLine:
        if not isinstance(doc, Mapping):
            raise InvoiceError(f"an invoice line is not an object: {doc!r}")
        try:
            dimension = Dimension(_field(doc, "dimension", str))
            raw = _field(doc, "raw_quantity", str)
            if not raw.isdigit():
                raise ValueError(f"raw_quantity {raw!r} is not a non-negative integer")
            return cls(
                cluster=_field(doc, "cluster", str),
                model=PricingModel(_field(doc, "model", str)),
                dimension=dimension,
                resource=_field(doc, "resource", str),
                quantity=_decimal(_field(doc, "quantity", str), "quantity"),
                unit=BillingUnit(_field(doc, "unit", str)),
                unit_price=_decimal(_field(doc, "unit_price", str), "unit_price"),
                amount=_cents(_field(doc, "amount", str), "amount"),
                raw_quantity=int(raw),
                raw_unit=_field(doc, "raw_unit", str),
            )
        except ValueError as exc:
            raise InvoiceError(f"invoice line {dict(doc)}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Invoice:
    month: str
    """YYYY-MM (UTC)."""
    currency: str
    rate_card: str
    """The card's name."""
    rate_card_version: str
    """The version in force on the month's first day."""
    lines: tuple[InvoiceLine, ...]
    """By cluster, model, dimension (wire.usage order), resource."""

    @property
    def subtotals(self) -> dict[str, Decimal]:
        """Per cluster: the sum of its rounded lines."""
        sums: dict[str, Decimal] = {}
        for line in self.lines:
            sums[line.cluster] = sums.get(line.cluster, Decimal("0.00")) + line.amount
        return dict(sorted(sums.items()))

    @property
    def total(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal("0.00"))

    @property
    def clusters(self) -> list[str]:
        return sorted({line.cluster for line in self.lines})

    def for_cluster(self, cluster: str) -> Invoice:
        """This invoice with only ``cluster``'s lines (its subtotal is then the total)."""
        lines = tuple(line for line in self.lines if line.cluster == cluster)
        return Invoice(self.month, self.currency, self.rate_card, self.rate_card_version, lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "month": self.month,
            "currency": self.currency,
            "rate_card": self.rate_card,
            "rate_card_version": self.rate_card_version,
            "lines": [line.to_json() for line in self.lines],
            "subtotals": {cluster: _money(s) for cluster, s in self.subtotals.items()},
            "total": _money(self.total),
        }

    @classmethod
    def from_json(cls, doc: Any) -> Invoice:
        """An invoice written by :meth:`to_json`; InvoiceError when a field is missing or
        of the wrong type, or when the subtotals or the total are not the sums of the
        lines."""
        if not isinstance(doc, Mapping):
            raise InvoiceError(f"an invoice is not an object: {str(doc)[:80]}")
        try:
            month = _field(doc, "month", str)
            units.parse_month(month)
            lines = _field(doc, "lines", list)
            invoice = cls(
                month=month,
                currency=_field(doc, "currency", str),
                rate_card=_field(doc, "rate_card", str),
                rate_card_version=_field(doc, "rate_card_version", str),
                lines=tuple(InvoiceLine.from_json(line) for line in lines),
            )
            subtotals = _field(doc, "subtotals", dict)
            stated = {str(c): _cents(_str(v, f"subtotal of {c}"), c) for c, v in subtotals.items()}
            total = _cents(_field(doc, "total", str), "total")
        except ValueError as exc:
            raise InvoiceError(f"invoice {str(doc.get('month'))!r}: {exc}") from None
        if stated != invoice.subtotals:
            raise InvoiceError(
                f"invoice {month}: subtotals {_moneys(stated)} are not the sums of the lines "
                f"{_moneys(invoice.subtotals)}: the document was changed or is corrupt"
            )
        if total != invoice.total:
            raise InvoiceError(
                f"invoice {month}: total {_money(total)} is not the sum of the lines "
                f"{_money(invoice.total)}: the document was changed or is corrupt"
            )
        return invoice


def compute_invoice(month: str, rows: Iterable[UsageRow], card: RateCard) -> Invoice:
    """The invoice of ``month`` (YYYY-MM) for ``rows`` (that month's usage, raw units),
    priced by the version of ``card`` in force on the month's first day."""
    try:
        units.parse_month(month)
        version = card.version_for_month(month)
    except (ValueError, RateCardError) as exc:
        raise InvoiceError(f"cannot invoice {month!r}: {exc}") from None
    sums: dict[tuple[str, PricingModel, Dimension, str], int] = {}
    for row in rows:
        key = _key(row, card)
        sums[key] = sums.get(key, 0) + row.quantity
    lines = []
    for key in sorted(sums, key=lambda k: (k[0], _MODEL_ORDER[k[1]], _DIMENSION_ORDER[k[2]], k[3])):
        cluster, model, dimension, resource = key
        price = version.price(model, dimension, resource)
        if price is None and dimension is Dimension.BROKER_MS:
            raise InvoiceError(
                f"cluster {cluster!r} ran broker type {resource!r}, which rate card "
                f"{card.name!r} (version {version.version!r}, {card.path}) has no price for: "
                f'add a price with model = "{model}", dimension = "broker_ms", resource = '
                f'"{resource}" to the card, or move the cluster to a priced broker type'
            )
        quantity = units.billing_quantity(dimension, sums[key], month)
        unit_price = price.unit_price if price is not None else Decimal(0)
        lines.append(
            InvoiceLine(
                cluster=cluster,
                model=model,
                dimension=dimension,
                resource=resource,
                quantity=units.to_decimal(quantity),
                unit=units.BILLING_UNITS[dimension],
                unit_price=unit_price,
                amount=units.amount(quantity, unit_price),
                raw_quantity=sums[key],
                raw_unit=UNITS[dimension],
            )
        )
    return Invoice(month, card.currency, card.name, version.version, tuple(lines))


def _key(row: UsageRow, card: RateCard) -> tuple[str, PricingModel, Dimension, str]:
    try:
        model = PricingModel(row.model)
        dimension = Dimension(row.dimension)
    except ValueError as exc:
        raise InvoiceError(f"usage of cluster {row.cluster!r}: {exc}") from None
    quantity = row.quantity
    if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 0:
        raise InvoiceError(
            f"usage of cluster {row.cluster!r}: {dimension} quantity {quantity!r} is not a "
            "non-negative integer (raw units)"
        )
    if dimension is Dimension.BROKER_MS:
        try:
            found = broker_type(row.resource)
        except UnknownBrokerType as exc:
            raise InvoiceError(
                f"cluster {row.cluster!r} ran an unknown broker type {row.resource!r}, "
                f"which rate card {card.name!r} ({card.path}) cannot price: {exc}"
            ) from None
        if found.model is not model:
            raise InvoiceError(
                f"cluster {row.cluster!r}: broker type {row.resource} is billed under the "
                f"{found.model} model, but its usage says {model}"
            )
    return row.cluster, model, dimension, row.resource


def _money(value: Decimal) -> str:
    return format(value.quantize(CENT), "f")


def _moneys(values: Mapping[str, Decimal]) -> dict[str, str]:
    return {k: _money(v) for k, v in values.items()}


def _field(doc: Mapping[str, Any], name: str, kind: type[_T]) -> _T:
    if name not in doc:
        raise ValueError(f"no field {name!r}")
    value = doc[name]
    if not isinstance(value, kind):
        raise ValueError(f"{name} is not a {kind.__name__}: {value!r}")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} is not a string: {value!r}")
    return value


def _decimal(text: str, what: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{what} {text!r} is not a decimal") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"{what} {text!r} is not a finite amount of 0 or more")
    return value


def _cents(text: str, what: str) -> Decimal:
    value = _decimal(text, what)
    if value != value.quantize(CENT):
        raise ValueError(f"{what} {text!r} has more than two decimals")
    return value.quantize(CENT)
