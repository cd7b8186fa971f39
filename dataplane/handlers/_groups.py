"""Small helpers the group handlers share (request fields to coordinator values)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dataplane.groups.coordinator import GroupCoordinator
    from dataplane.handlers.context import RequestContext

ZERO = datetime.timedelta(0)
ONE_MS = datetime.timedelta(milliseconds=1)

DEFAULT_MESSAGES = {
    15: "The coordinator is not available.",
    16: "This is not the correct coordinator.",
    42: (
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details."
    ),
}
"""Kafka's default texts of the errors FindCoordinator v1-v3 can carry."""


def coordinator_of(ctx: RequestContext) -> GroupCoordinator:
    return ctx.broker.groups


def millis(value: datetime.timedelta | None, default: int = -1) -> int:
    """A kio duration field as integer milliseconds."""
    if value is None:
        return default
    return value // ONE_MS


def client_host(ctx: RequestContext) -> str:
    """The client address as Kafka shows it in DescribeGroups ("/127.0.0.1")."""
    host = ctx.client_host.rpartition(":")[0] if ":" in ctx.client_host else ctx.client_host
    return f"/{host.strip('[]')}"
