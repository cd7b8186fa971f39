"""DescribeConfigs (32): topic, broker and group configs with their source, type and synonyms.

TOPIC resources list every topic config (the topic's override, or the broker setting
behind it, or the default); BROKER "N" (this node) lists every broker setting, BROKER ""
the cluster-wide dynamic ones only, as in Kafka. ``configuration_keys`` null or empty
means all. Synonyms (v1+, when asked) name every level that sets a value, the effective
one first; documentation (v3+) when asked. See ``_configs`` for the sources.

A resource type Kafka does not know fails the whole request (INVALID_REQUEST for every
resource, as Kafka); BROKER_LOGGER and CLIENT_METRICS are known to Kafka but not kept by
Sluice: INVALID_REQUEST for that resource. GROUP "G" lists the group configs of
``dataplane.config.group_table`` (G need not exist, as in Kafka; "" is INVALID_REQUEST).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.describe_configs.v4 import request as req
from kio.schema.describe_configs.v4 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.config import rules
from dataplane.handlers import _configs
from dataplane.handlers._configs import ConfigEntry, ResourceType
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, error_code_for

API_KEY = 32
ZERO = datetime.timedelta(0)


def handle(ctx: RequestContext, request: req.DescribeConfigsRequest) -> Any:
    if any(r.resource_type not in _configs.KNOWN_RESOURCE_TYPES for r in request.resources):
        results = tuple(
            _result(ctx, r, ErrorCode.invalid_request, _configs.INVALID_REQUEST_MESSAGE, ())
            for r in request.resources
        )
        return ctx.make(resp.DescribeConfigsResponse, throttle_time=ZERO, results=results)
    synonyms = bool(getattr(request, "include_synonyms", False))
    documentation = bool(getattr(request, "include_documentation", False))
    results_out: list[Any] = []
    for resource in request.resources:
        try:
            denied = _configs.refused(ctx, resource, Operation.DESCRIBE_CONFIGS)
            if denied is not None:
                raise denied
            entries = _entries(ctx, resource)
        except BrokerError as exc:
            results_out.append(_result(ctx, resource, error_code_for(exc), exc.message or "", ()))
            continue
        if entries is None:  # unknown topic: Kafka gives no message
            results_out.append(_result(ctx, resource, ErrorCode.unknown_topic_or_partition, "", ()))
            continue
        keys = resource.configuration_keys
        if keys:
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        configs = tuple(_config(ctx, e, synonyms, documentation) for e in entries)
        results_out.append(_result(ctx, resource, ErrorCode.none, "", configs))
    return ctx.make(resp.DescribeConfigsResponse, throttle_time=ZERO, results=tuple(results_out))


def _entries(ctx: RequestContext, resource: Any) -> list[ConfigEntry] | None:
    broker = ctx.broker
    kind = resource.resource_type
    name: str = resource.resource_name
    if kind == ResourceType.TOPIC:
        rules.check_topic_name(name)
        info = broker.metadata.topics.get(name)
        if info is None:
            return None
        return _configs.topic_entries(broker, info.configs)
    if kind == ResourceType.BROKER:
        return _configs.broker_entries(broker, _configs.broker_scope(broker, name, describe=True))
    if kind == ResourceType.GROUP:
        return _configs.group_entries(broker, name)
    raise _configs.unsupported_resource(kind)


def _config(ctx: RequestContext, entry: ConfigEntry, synonyms: bool, documentation: bool) -> Any:
    return ctx.make(
        resp.DescribeConfigsResourceResult,
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.is_sensitive,
        synonyms=tuple(
            ctx.make(resp.DescribeConfigsSynonym, name=s.name, value=s.value, source=int(s.source))
            for s in entry.synonyms
        )
        if synonyms
        else (),
        config_type=int(entry.config_type),
        documentation=entry.documentation if documentation else None,
    )


def _result(
    ctx: RequestContext, resource: Any, code: ErrorCode, message: str, configs: tuple[Any, ...]
) -> Any:
    return ctx.make(
        resp.DescribeConfigsResult,
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )
