"""FindCoordinator (10): the coordinator of a group (key type 0: the leader of its
``__consumer_offsets`` partition) or of a transactional id (key type 1: the leader of its
``__transaction_state`` partition).

v0-v3 ask for one key; v4+ for a batch (``coordinator_keys``), each answered on its own.
The first lookup of each kind creates its topic, as Kafka does. DESCRIBE on the group or
the transactional id is needed.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6 import request as req
from kio.schema.find_coordinator.v6 import response as resp

from dataplane.authorizer import Operation
from dataplane.coordinator_log import CoordinatorLog
from dataplane.groups.storage import OFFSETS_TOPIC
from dataplane.handlers._groups import DEFAULT_MESSAGES, ZERO, coordinator_of
from dataplane.handlers._txn import require_transactional_id
from dataplane.handlers.context import RequestContext
from dataplane.transactions.coordinator import TRANSACTION_STATE_TOPIC
from wire.errors import (
    BrokerError,
    CoordinatorNotAvailable,
    InvalidRequest,
    TransactionalIdAuthorizationFailed,
    error_code_for,
)

API_KEY = 10
BATCHED_VERSION = 4
TRANSACTION_KEY_TYPE = 1


def _lookup(ctx: RequestContext, key_type: int, key: str) -> tuple[int, str, int]:
    """The coordinator's id and its address on the listener the request came through;
    DESCRIBE on the group (key type 0) is needed, as Kafka's."""
    if key_type == 0:
        ctx.require_group(Operation.DESCRIBE, key)
        node, host, port = coordinator_of(ctx).find_coordinator(key_type, key)
    elif key_type == TRANSACTION_KEY_TYPE:
        require_transactional_id(ctx, Operation.DESCRIBE, key)
        node, host, port = ctx.broker.transactions.find_coordinator(key)
    else:
        raise InvalidRequest(f"unknown coordinator key type {key_type}")
    info = ctx.broker.metadata.brokers.get(node)
    if info is not None:
        address = info.address_on(ctx.listener)
        if address is None:  # Kafka's: a coordinator without the client's listener
            raise CoordinatorNotAvailable(
                f"the coordinator, broker {node}, has no listener {ctx.listener} yet"
            )
        host, port = address
    return node, host, port


def handle(ctx: RequestContext, request: req.FindCoordinatorRequest) -> Any:
    key_type = int(getattr(request, "key_type", 0))
    topics = ctx.broker.metadata.topics
    if key_type == 0 and OFFSETS_TOPIC not in topics:
        return _after_creating(ctx, request, key_type, ctx.broker.groups.storage)
    if key_type == TRANSACTION_KEY_TYPE and TRANSACTION_STATE_TOPIC not in topics:
        return _after_creating(ctx, request, key_type, ctx.broker.transactions.storage)
    return _answer(ctx, request, key_type)


async def _after_creating(
    ctx: RequestContext, request: Any, key_type: int, storage: CoordinatorLog
) -> Any:
    """The first FindCoordinator of a kind creates its topic (as Kafka does)."""
    with contextlib.suppress(BrokerError, OSError, TimeoutError):
        await storage.ensure_topic()
        await ctx.broker.await_topic(storage.topic.name)
    return _answer(ctx, request, key_type)


def _answer(ctx: RequestContext, request: Any, key_type: int) -> Any:
    if ctx.api_version >= BATCHED_VERSION:
        return ctx.make(
            resp.FindCoordinatorResponse,
            throttle_time=ZERO,
            coordinators=tuple(_one(ctx, key_type, key) for key in request.coordinator_keys),
        )
    try:
        node, host, port = _lookup(ctx, key_type, request.key)
    except BrokerError as exc:
        code = error_code_for(exc)
        return ctx.make(
            resp.FindCoordinatorResponse,
            throttle_time=ZERO,
            error_code=code,
            error_message=_message(exc, DEFAULT_MESSAGES.get(code.value, exc.message)),
            node_id=-1,
            host="",
            port=-1,
        )
    return ctx.make(
        resp.FindCoordinatorResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message="NONE",
        node_id=node,
        host=host,
        port=port,
    )


def _one(ctx: RequestContext, key_type: int, key: str) -> Any:
    try:
        node, host, port = _lookup(ctx, key_type, key)
    except BrokerError as exc:
        code = error_code_for(exc)
        # An unknown key type fails the whole request in Kafka: every key carries the text.
        default = DEFAULT_MESSAGES[42] if code is ErrorCode.invalid_request else ""
        message = _message(exc, default)
        return ctx.make(
            resp.Coordinator,
            key=key,
            node_id=-1,
            host="",
            port=-1,
            error_code=code,
            error_message=message,
        )
    return ctx.make(
        resp.Coordinator,
        key=key,
        node_id=node,
        host=host,
        port=port,
        error_code=ErrorCode.none,
        error_message="",
    )


def _message(exc: BrokerError, default: str | None) -> str | None:
    return exc.message if isinstance(exc, TransactionalIdAuthorizationFailed) else default
