"""Transforms (32002, Sluice's own; ``wire.internal``): deploy, pause, resume, delete and
describe WebAssembly transforms.

deploy (any broker): the module and the definition are validated (``transforms``'s
checks: WebAssembly, exports, imports, ABI, size, name, at most 8 outputs, variables), the
module is stored in ``__sluice_transform_modules`` (acknowledged by its ISR), then the
definition goes to the active controller as a "commit": there the input and output topics
must exist (and the outputs differ from the input), and the definition is recorded in the
metadata log — a redeploy of the same name replaces it and keeps its committed progress.
pause, resume and delete are decided by the controller (RESOURCE_NOT_FOUND for an unknown
name). describe answers from this broker: every definition, with the state of the runners
of the input partitions it leads (the control plane asks every broker and merges).
Errors: INVALID_REQUEST for a refused module or definition, UNKNOWN_TOPIC_OR_PARTITION for
a missing topic, RESOURCE_NOT_FOUND for an unknown transform; the message says why.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster import records as r
from dataplane.cluster.changes import Changes
from dataplane.handlers._controller import via_controller
from dataplane.handlers.context import RequestContext
from transforms import ModuleRejected, validate_module, validate_spec
from wire import internal as resp
from wire.errors import (
    BrokerError,
    InvalidRequest,
    InvalidTransform,
    TransformNotFound,
    UnknownTopicOrPartition,
    error_code_for,
    error_message_for,
)
from wire.internal import TransformsRequest

API_KEY = resp.TRANSFORMS_KEY
ZERO = datetime.timedelta(0)
TOPIC_WAIT_S = 2.0
"""How long a deploy waits for this broker's metadata to show topics it does not know yet."""
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: TransformsRequest) -> Any:
    try:
        doc = json.loads(request.payload or b"{}")
        if not isinstance(doc, dict):
            raise InvalidRequest("the payload is not a JSON object")
        # describing needs DESCRIBE on the cluster, everything else ALTER (checked here: a
        # forwarded request reaches the controller from this broker)
        ctx.require_cluster(
            Operation.DESCRIBE if request.operation == "describe" else Operation.ALTER
        )
        if request.operation == "deploy":
            return _deploy(ctx, doc, bytes(request.module))
        if request.operation == "describe":
            return _answer(ctx, {"transforms": _describe(ctx, doc.get("names"))})
        if request.operation == "commit":
            return via_controller(ctx, request, _decide)
        if request.operation in ("pause", "resume", "delete"):
            return via_controller(ctx, request, _decide, _applied(ctx, request.operation))
        raise InvalidRequest(f"unknown transforms operation {request.operation!r}")
    except (BrokerError, ValueError) as exc:
        return _error(ctx, exc)


async def _deploy(ctx: RequestContext, doc: dict[str, Any], module: bytes) -> Any:
    manager = ctx.broker.transforms
    try:
        validated = validate_module(module, max_bytes=manager.limits.module_max_bytes)
        spec = validate_spec(
            str(doc.get("name", "")),
            str(doc.get("input_topic", "")),
            [str(t) for t in doc.get("output_topics", [])],
            {str(k): str(v) for k, v in dict(doc.get("env", {})).items()},
        )
        await _topics_replayed(ctx, (spec.input_topic, *spec.output_topics))
        _check_topics(ctx.broker.metadata.topics, spec.input_topic, spec.output_topics)
        digest = await manager.modules.store(module, manager.new_producer())
        definition = r.Transform(
            name=spec.name,
            input_topic=spec.input_topic,
            output_topics=list(spec.output_topics),
            env=dict(spec.environment),
            module_sha256=digest,
            module_size=len(module),
            abi=validated.info.abi.value,
            deployed=0,
        )
        committed = await _commit(ctx, definition)
    except ModuleRejected as exc:
        return _error(ctx, InvalidTransform(exc.message))
    except (BrokerError, OSError, TimeoutError) as exc:
        return _error(ctx, exc)
    log.info("deployed transform %s (module %s)", spec.name, digest[:12])
    return _answer(ctx, {"transform": committed})


async def _topics_replayed(ctx: RequestContext, names: tuple[str, ...]) -> None:
    """Give this broker's image up to TOPIC_WAIT_S to replay topics the controller may have
    just created (a deploy right after CreateTopics through another broker); the controller
    checks again when it records the deploy."""
    image = ctx.broker.metadata
    if all(n in image.topics for n in names):
        return
    known = asyncio.Event()

    def seen(_delta: Any) -> None:
        if all(n in image.topics for n in names):
            known.set()

    image.listeners.append(seen)
    try:
        await asyncio.wait_for(known.wait(), TOPIC_WAIT_S)
    except TimeoutError:
        pass
    finally:
        image.listeners.remove(seen)


async def _commit(ctx: RequestContext, definition: r.Transform) -> dict[str, Any]:
    """Have the active controller record ``definition`` (a "commit", forwarded unless this
    broker is the controller); the recorded definition, once this broker's image has it."""
    payload = json.dumps({"version": 1, "transform": asdict(definition)}).encode()
    request = TransformsRequest(operation="commit", payload=payload, module=b"")
    image = ctx.broker.metadata

    def settled(response: Any) -> bool:
        if response.error_code != ErrorCode.none:
            return True
        recorded = json.loads(response.payload)["transform"]
        current = image.transforms.get(definition.name)
        return current is not None and current.deployed >= recorded["deployed"]

    response = await via_controller(ctx, request, _decide, settled)
    if response.error_code != ErrorCode.none:
        raise _remote_error(response)
    recorded: dict[str, Any] = json.loads(response.payload)["transform"]
    return recorded


def _remote_error(response: Any) -> BrokerError:
    error = BrokerError(response.error_message or ErrorCode(response.error_code).name)
    error.code = response.error_code
    return error


def _applied(ctx: RequestContext, operation: str) -> Callable[[Any], bool]:
    """For a forwarded pause, resume or delete: true once this broker's image shows it, so
    the caller's next describe here sees its own change."""
    image = ctx.broker.metadata

    def settled(response: Any) -> bool:
        if response.error_code != ErrorCode.none:
            return True
        decided = json.loads(response.payload)["transform"]
        current = image.transforms.get(decided["name"])
        if operation == "delete":
            return current is None or current.deployed > decided["deployed"]
        return current is not None and (
            current.deployed > decided["deployed"]
            or (current.paused, current.resumed) == (decided["paused"], decided["resumed"])
        )

    return settled


def _decide(ctx: RequestContext, request: TransformsRequest, changes: Changes) -> Any:
    """On the active controller: commit, pause, resume, delete."""
    try:
        doc = json.loads(request.payload or b"{}")
        if request.operation == "commit":
            recorded = _record(ctx, r.Transform(**doc["transform"]), changes)
            return _answer(ctx, {"transform": recorded})
        name = str(doc.get("name", ""))
        current = changes.image.transforms.get(name)
        if current is None:
            raise TransformNotFound(f"no transform named {name!r}")
        if request.operation == "delete":
            changes.remove_transform(name)
            log.info("deleted transform %s", name)
            return _answer(ctx, {"transform": asdict(current)})
        if request.operation == "pause":
            updated = replace(current, paused=True)
        else:
            updated = replace(current, paused=False, resumed=current.resumed + 1)
        changes.set_transform(updated)
        log.info("%s transform %s", "paused" if updated.paused else "resumed", name)
        return _answer(ctx, {"transform": asdict(updated)})
    except (BrokerError, ValueError, TypeError, KeyError) as exc:
        return _error(ctx, exc)


def _record(ctx: RequestContext, definition: r.Transform, changes: Changes) -> dict[str, Any]:
    _check_topics(changes.image.topics, definition.input_topic, definition.output_topics)
    previous = changes.image.transforms.get(definition.name)
    version = 1 if previous is None else previous.deployed + 1
    recorded = replace(definition, deployed=version, paused=False, resumed=0)
    changes.set_transform(recorded)
    return asdict(recorded)


def _check_topics(topics: Any, input_topic: str, outputs: Any) -> None:
    for name in (input_topic, *outputs):
        if name not in topics:
            raise UnknownTopicOrPartition(
                f"topic {name!r} does not exist: create it before deploying the transform"
            )
    if input_topic in outputs:
        raise InvalidTransform(f"the input topic {input_topic!r} cannot also be an output")


def _describe(ctx: RequestContext, names: Any) -> list[dict[str, Any]]:
    wanted = None if names is None else {str(n) for n in names}
    manager = ctx.broker.transforms
    out = []
    for name, definition in sorted(ctx.broker.metadata.transforms.items()):
        if wanted is not None and name not in wanted:
            continue
        entry: dict[str, Any] = asdict(definition)
        entry["partitions"] = manager.status(name)
        out.append(entry)
    missing = sorted((wanted or set()) - {e["name"] for e in out})
    if missing:
        raise TransformNotFound(f"no transform named {missing[0]!r}")
    return out


def _answer(ctx: RequestContext, doc: dict[str, Any]) -> Any:
    body = json.dumps({"version": 1, **doc}).encode()
    return ctx.make(
        resp.TransformsResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message=None,
        payload=body,
    )


def _error(ctx: RequestContext, exc: BaseException) -> Any:
    if isinstance(exc, (ValueError, KeyError, TypeError)) and not isinstance(exc, BrokerError):
        exc = InvalidRequest(f"malformed transforms request: {exc}")
    return ctx.make(
        resp.TransformsResponse,
        throttle_time=ZERO,
        error_code=error_code_for(exc),
        error_message=error_message_for(exc),
        payload=b"",
    )
