"""AlterConfigs (33): the legacy API that replaces a resource's whole set of overrides.

Keys left out of the request go back to their defaults (kafka-python's and aiokafka's
admin clients use this API). Resources are TOPIC (overrides validated as in
CreateTopics: INVALID_CONFIG naming the key; UNKNOWN_TOPIC_OR_PARTITION after the
values pass, as Kafka checks existence last) and BROKER "" or "N" (dynamic broker
configs, see ``_configs``; failures are INVALID_REQUEST as in Kafka). Each resource may
appear once and each key once per resource; null values are INVALID_REQUEST.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from dataplane.errors import BrokerError, InvalidRequest, error_code_for, error_message_for
from dataplane.handlers import _configs
from dataplane.handlers._configs import ResourceType
from dataplane.handlers.context import RequestContext

API_KEY = 33
ZERO = datetime.timedelta(0)
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: Any) -> Any:
    repeated = _configs.duplicates((r.resource_type, r.resource_name) for r in request.resources)
    responses: list[Any] = []
    for resource in request.resources:
        try:
            if (resource.resource_type, resource.resource_name) in repeated:
                raise InvalidRequest("Each resource must appear at most once.")
            _alter(ctx, resource, validate_only=request.validate_only)
            responses.append(_response(ctx, resource, None))
        except (BrokerError, OSError) as exc:
            responses.append(_response(ctx, resource, exc))
    return ctx.make("AlterConfigsResponse", throttle_time=ZERO, responses=tuple(responses))


def _alter(ctx: RequestContext, resource: Any, *, validate_only: bool) -> None:
    names = [c.name for c in resource.configs]
    _configs.check_config_list(names, [c.name for c in resource.configs if c.value is None])
    replacement = {c.name: c.value for c in resource.configs}

    def compute(_current: dict[str, str]) -> dict[str, str]:
        return dict(replacement)

    kind, name = resource.resource_type, resource.resource_name
    if kind == ResourceType.TOPIC:
        _configs.alter_topic(ctx.broker, name, compute, validate_only=validate_only)
    elif kind == ResourceType.BROKER:
        _configs.alter_broker(ctx.broker, name, compute, validate_only=validate_only)
    else:
        raise _configs.unsupported_resource(kind)
    if not validate_only:
        log.info("configs of %s %r replaced by %s", ResourceType(kind).name, name, replacement)


def _response(ctx: RequestContext, resource: Any, exc: BaseException | None) -> Any:
    return ctx.make(
        "AlterConfigsResourceResponse",
        error_code=ErrorCode.none if exc is None else error_code_for(exc),
        error_message=None if exc is None else error_message_for(exc),
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
