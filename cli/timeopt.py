"""Time options (``--since``, ``--to-datetime``): ISO 8601 (``2026-11-25T08:00:00Z``, an
offset such as ``+01:00``, or no zone: UTC) or a time relative to now (``-1h``, ``-30m``,
``-2d``, ``-45s``, ``-1w``; the minus may be left out: ``10m`` is ten minutes ago)."""

from __future__ import annotations

import datetime
import re
from typing import Any

import click
from google.protobuf.timestamp_pb2 import Timestamp

RELATIVE = re.compile(r"^-?(\d+(?:\.\d+)?)([smhdw])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(text: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """An aware UTC datetime; ValueError with what is expected."""
    raw = text.strip()
    now = now or datetime.datetime.now(datetime.UTC)
    match = RELATIVE.match(raw)
    if match:
        return now - datetime.timedelta(seconds=float(match.group(1)) * UNITS[match.group(2)])
    try:
        when = datetime.datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(
            f"expected ISO 8601 (2026-11-25T08:00:00Z) or a relative time (-1h, -30m), got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.astimezone(datetime.UTC)


def timestamp_of(when: datetime.datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(when)
    return ts


class TimeParam(click.ParamType):
    """A time option's value, as a protobuf Timestamp."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Timestamp):
            return value
        try:
            return timestamp_of(parse_time(str(value)))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


TIME = TimeParam()
