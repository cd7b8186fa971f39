"""Requests that change metadata run on the active controller.

``via_controller(ctx, request, decide)``: on the active controller, ``decide(ctx, request,
changes)`` builds the answer while recording metadata changes, inside
``QuorumController.decide`` (under the controller's lock, reading the image only there);
the changes commit as one metadata-log entry before the answer leaves. On any other
broker the request is forwarded as it is (same API version) to the active controller and
its answer relayed, as KRaft brokers forward admin requests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

from dataplane.cluster.changes import Changes
from dataplane.cluster.member import ControllerIsLocal
from dataplane.handlers.context import RequestContext
from wire.errors import NotController

Decide = Callable[[RequestContext, Any, Changes], Any]
FORWARD_TIMEOUT_S = 30.0
SETTLE_WAIT_S = 5.0


def via_controller(
    ctx: RequestContext,
    request: Any,
    decide: Decide,
    settled: Callable[[Any], bool] | None = None,
) -> Any:
    """``settled(response)``: for a forwarded request, true once this broker's image shows
    the change, so a client reading from this broker right after sees its own write."""
    member = ctx.broker.cluster
    if member.local_controller() is None:
        return _forward(ctx, request, decide, settled)
    return _decide_here(ctx, request, decide)


def via_controller_except(
    ctx: RequestContext,
    request: Any,
    decide: Decide,
    settled: Callable[[Any], bool] | None,
    *,
    items: str,
    results: str,
    refusal: Callable[[Any], Any | None],
) -> Any:
    """``via_controller`` for the items of ``request.<items>`` the caller may change.
    ``refusal(item)`` is the answer for an item it may not (None: allowed); refused items
    are taken out of the request before it runs or is forwarded (the controller sees the
    forwarding broker, not the client), and their answers added to ``response.<results>``."""
    refused: list[Any] = []
    kept: list[Any] = []
    for item in getattr(request, items):
        answer = refusal(item)
        (kept if answer is None else refused).append(item if answer is None else answer)
    if not refused:
        return via_controller(ctx, request, decide, settled)
    narrowed = dataclasses.replace(request, **{items: tuple(kept)})
    return _with_refusals(via_controller(ctx, narrowed, decide, settled), results, refused)


async def _with_refusals(pending: Awaitable[Any], results: str, refused: list[Any]) -> Any:
    response = await pending
    return dataclasses.replace(response, **{results: (*getattr(response, results), *refused)})


async def _forward(
    ctx: RequestContext, request: Any, decide: Decide, settled: Callable[[Any], bool] | None
) -> Any:
    try:
        response = await ctx.broker.cluster.send_to_controller(request, timeout=FORWARD_TIMEOUT_S)
    except ControllerIsLocal:
        return await _decide_here(ctx, request, decide)
    if settled is not None:
        deadline = time.monotonic() + SETTLE_WAIT_S
        while not settled(response) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
    return response


async def _decide_here(ctx: RequestContext, request: Any, decide: Decide) -> Any:
    member = ctx.broker.cluster
    controller = member.controller
    assert controller is not None
    try:
        return await controller.decide(lambda changes: decide(ctx, request, changes))
    except NotController:
        if member.local_controller() is not None:
            raise
        return await member.send_to_controller(request, timeout=FORWARD_TIMEOUT_S)
