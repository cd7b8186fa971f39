"""``cloudctl cost-chart``'s picture: cost per day, stacked by cluster and dimension (PNG).

matplotlib (the ``billing`` extra) draws it off-screen with its Agg backend (a Figure and
its canvas, no pyplot: no global state, no display). It is loaded only when a chart is
drawn (``importlib``): it takes about 0.4 s to import, which every other command would
otherwise pay at start.
"""

from __future__ import annotations

import calendar
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

DPI = 100
"""Pixels per inch of the PNG: width and height in pixels are the figure's inches x DPI."""
MAX_SERIES = 12
"""Series drawn one by one in the legend; the smallest of the rest are summed as "other"."""


class ChartUnavailable(Exception):
    """matplotlib is not installed."""


@dataclass(frozen=True)
class Series:
    label: str
    """``cluster / dimension``."""
    amounts: tuple[float, ...]
    """One per day of the month."""
    total: Decimal


def series_of(
    month: str, rows: Sequence[tuple[str, str, str, Decimal]]
) -> tuple[list[int], list[Series]]:
    """(days 1..N of ``month``, one series per cluster and dimension) from (day YYYY-MM-DD,
    cluster, dimension, amount) rows; the largest first, small ones beyond MAX_SERIES as
    "other"; series that cost nothing are left out."""
    year, number = (int(x) for x in month.split("-"))
    days = list(range(1, calendar.monthrange(year, number)[1] + 1))
    sums: dict[str, list[Decimal]] = {}
    for day, cluster, dimension, amount in rows:
        values = sums.setdefault(f"{cluster} / {dimension}", [Decimal(0)] * len(days))
        values[int(day[8:10]) - 1] += amount
    ordered = sorted(
        ((label, values) for label, values in sums.items() if any(values)),  # free: not drawn
        key=lambda kv: (-sum(kv[1]), kv[0]),
    )
    if len(ordered) > MAX_SERIES:
        rest = ordered[MAX_SERIES - 1 :]
        other = [sum((v[i] for _, v in rest), Decimal(0)) for i in range(len(days))]
        ordered = [*ordered[: MAX_SERIES - 1], (f"other ({len(rest)} series)", other)]
    return days, [
        Series(label, tuple(float(v) for v in values), sum(values, Decimal(0)))
        for label, values in ordered
    ]


def draw(
    path: Path,
    month: str,
    rows: Sequence[tuple[str, str, str, Decimal]],
    *,
    currency: str,
    title: str,
    width: int,
    height: int,
) -> list[Series]:
    """Write the PNG (``width`` x ``height`` pixels) to ``path``; the series drawn."""
    try:
        figure_module: Any = importlib.import_module("matplotlib.figure")
        agg: Any = importlib.import_module("matplotlib.backends.backend_agg")
    except ImportError:
        raise ChartUnavailable(
            "cost-chart needs matplotlib: pip install 'sluice[billing]'"
        ) from None
    days, series = series_of(month, rows)
    figure = figure_module.Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    agg.FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    bottom = [0.0] * len(days)
    for one in series:
        axes.bar(days, one.amounts, bottom=bottom, label=one.label, width=0.8)
        bottom = [b + a for b, a in zip(bottom, one.amounts, strict=True)]
    axes.set_title(title)
    axes.set_xlabel(f"day of {month} (UTC)")
    axes.set_ylabel(f"cost per day ({currency})")
    axes.set_xlim(0.4, len(days) + 0.6)
    axes.set_xticks(days)
    axes.tick_params(axis="x", labelsize=7)
    axes.grid(axis="y", alpha=0.3)
    if series:
        axes.legend(loc="upper left", fontsize=7, ncols=2)
    else:
        axes.text(0.5, 0.5, "no usage", ha="center", va="center", transform=axes.transAxes)
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=DPI)
    return series
