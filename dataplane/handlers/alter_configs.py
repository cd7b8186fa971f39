"""AlterConfigs (33): the legacy API that replaces a resource's whole set of overrides.

Keys left out of the request go back to their defaults (kafka-python's and aiokafka's
admin clients use this API). Resources are TOPIC (overrides validated as in
CreateTopics: INVALID_CONFIG naming the key; UNKNOWN_TOPIC_OR_PARTITION after the
values pass, as Kafka checks existence last) and BROKER "" or "N" (dynamic broker
configs, see ``_configs``; failures are INVALID_REQUEST as in Kafka) and GROUP "G"
(``dataplane.config.group_table``). Each resource may
appear once and each key once per resource; null values are INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.alter_configs.v2 import request as req
from kio.schema.alter_configs.v2 import response as resp

from dataplane.cluster.changes import Changes
from dataplane.handlers import _configs
from dataplane.handlers._configs import ResourceType
from dataplane.handlers.context import RequestContext

API_KEY = 33
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: req.AlterConfigsRequest) -> Any:
    return _configs.alter_each(
        ctx,
        request,
        lambda c, resource, changes: _alter(
            c, resource, changes, validate_only=request.validate_only
        ),
        (resp.AlterConfigsResponse, resp.AlterConfigsResourceResponse),
    )


def _alter(ctx: RequestContext, resource: Any, changes: Changes, *, validate_only: bool) -> None:
    names = [c.name for c in resource.configs]
    _configs.check_config_list(names, [c.name for c in resource.configs if c.value is None])
    replacement = {c.name: c.value for c in resource.configs}

    def compute(_current: dict[str, str]) -> dict[str, str]:
        return dict(replacement)

    kind, name = resource.resource_type, resource.resource_name
    if kind == ResourceType.TOPIC:
        _configs.alter_topic(ctx.broker, changes, name, compute, validate_only=validate_only)
    elif kind == ResourceType.BROKER:
        _configs.alter_broker(ctx.broker, changes, name, compute, validate_only=validate_only)
    elif kind == ResourceType.GROUP:
        _configs.alter_group(ctx.broker, changes, name, compute, validate_only=validate_only)
    else:
        raise _configs.unsupported_resource(kind)
    if not validate_only:
        log.info("configs of %s %r replaced by %s", ResourceType(kind).name, name, replacement)
