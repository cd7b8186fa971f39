"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT single keys.

APPEND and SUBTRACT work on LIST configs only (``cleanup.policy``), starting from the
default when the key is not set; on other keys they are INVALID_CONFIG. Resources are
TOPIC (validated as in CreateTopics: INVALID_CONFIG naming the key, existence checked
last as Kafka does) and BROKER "" (cluster-wide) or "N" (this broker): the dynamic
broker configs of ``_configs``, whose failures are INVALID_REQUEST as in Kafka; GROUP "G"
(``dataplane.config.group_table``; any non-empty name, as Kafka). Each
resource may appear once and each key once per resource; a null value is INVALID_REQUEST
except for DELETE; an unknown operation is INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.incremental_alter_configs.v1 import request as req
from kio.schema.incremental_alter_configs.v1 import response as resp

from dataplane.cluster.changes import Changes
from dataplane.config import BROKER_CONFIGS, GROUP_CONFIGS, TOPIC_CONFIGS
from dataplane.handlers import _configs
from dataplane.handlers._configs import AlterOp, ResourceType
from dataplane.handlers.context import RequestContext
from wire.errors import InvalidRequest

API_KEY = 44
OPERATIONS = frozenset(int(op) for op in AlterOp)
GROUP_DEFINITIONS = {name: spec.definition for name, spec in GROUP_CONFIGS.items()}
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: req.IncrementalAlterConfigsRequest) -> Any:
    return _configs.alter_each(
        ctx,
        request,
        lambda c, resource, changes: _alter(
            c, resource, changes, validate_only=request.validate_only
        ),
        (resp.IncrementalAlterConfigsResponse, resp.AlterConfigsResourceResponse),
    )


def _alter(ctx: RequestContext, resource: Any, changes: Changes, *, validate_only: bool) -> None:
    configs = resource.configs
    nulls = [c.name for c in configs if c.value is None and c.config_operation != AlterOp.DELETE]
    _configs.check_config_list([c.name for c in configs], nulls)
    for c in configs:
        if c.config_operation not in OPERATIONS:
            raise InvalidRequest(f"Unknown operations type {c.config_operation}")
    ops = [(c.name, int(c.config_operation), c.value) for c in configs]
    kind, name = resource.resource_type, resource.resource_name
    if kind == ResourceType.TOPIC:
        _configs.alter_topic(
            ctx.broker,
            changes,
            name,
            lambda current: _configs.apply_ops(current, ops, TOPIC_CONFIGS),
            validate_only=validate_only,
        )
    elif kind == ResourceType.BROKER:
        _configs.alter_broker(
            ctx.broker,
            changes,
            name,
            lambda current: _configs.apply_ops(current, ops, BROKER_CONFIGS),
            validate_only=validate_only,
        )
    elif kind == ResourceType.GROUP:
        _configs.alter_group(
            ctx.broker,
            changes,
            name,
            lambda current: _configs.apply_ops(current, ops, GROUP_DEFINITIONS),
            validate_only=validate_only,
        )
    else:
        raise _configs.unsupported_resource(kind)
    if not validate_only:
        log.info("configs of %s %r altered: %s", ResourceType(kind).name, name, ops)
