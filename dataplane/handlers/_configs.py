"""Shared by the admin handlers: Kafka-style validation of names and configs, config
entries for DescribeConfigs and CreateTopics, and the alter operations.

Config resources are topics (type 2), brokers (type 4) and groups (type 32, the settings of
``dataplane.config.group_table``). Where a value comes from (the ``config_source`` of
DescribeConfigs), most specific first::

    DYNAMIC_GROUP_CONFIG           8   group override (AlterConfigs on GROUP)
    DYNAMIC_TOPIC_CONFIG           1   topic override (CreateTopics, AlterConfigs on TOPIC)
    DYNAMIC_BROKER_CONFIG          2   AlterConfigs on BROKER "N" (this broker)
    DYNAMIC_DEFAULT_BROKER_CONFIG  3   AlterConfigs on BROKER "" (cluster-wide default)
    STATIC_BROKER_CONFIG           4   the config file or --set
    DEFAULT_CONFIG                 5   built-in default

Dynamic broker configs are limited to the broker settings that back a topic config
(``log.retention.ms`` for ``retention.ms`` …, the ones Kafka's DynamicLogConfig also
reconfigures): partition logs read them through ``LogManager.topic_config``, so a change
takes effect at once. Every other broker key answers INVALID_REQUEST, as Kafka does for
keys it cannot update dynamically.

Error messages follow Apache Kafka 4.x word for word where Kafka has the check, so that
clients and scripts written against Kafka read the same text.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.config import BROKER_CONFIGS, GROUP_CONFIGS, TOPIC_CONFIGS, ConfigDef, ConfigType
from dataplane.config.rules import (
    DYNAMIC_BROKER_KEYS,
    JAVA_INT,
    check_topic_name,
    validate_broker_configs,
    validate_group_configs,
    validate_topic_configs,
)
from dataplane.handlers._controller import via_controller_except
from wire.errors import (
    BrokerError,
    ClusterAuthorizationFailed,
    GroupAuthorizationFailed,
    InvalidConfig,
    InvalidRequest,
    TopicAuthorizationFailed,
    UnknownTopicOrPartition,
    error_code_for,
    error_message_for,
)

if TYPE_CHECKING:
    from dataplane.broker import Broker
    from dataplane.cluster.changes import Changes
    from dataplane.handlers.context import RequestContext

_ZERO = datetime.timedelta(0)
DENIED = "Authorization failed."


class ResourceType(enum.IntEnum):
    """ConfigResource.Type of Kafka's admin API."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


KNOWN_RESOURCE_TYPES = frozenset(int(t) for t in ResourceType if t is not ResourceType.UNKNOWN)


def refused(ctx: RequestContext, resource: Any, operation: Operation) -> BrokerError | None:
    """The error for a config resource the caller may not DESCRIBE_CONFIGS / ALTER_CONFIGS
    (a topic or a group by name, brokers through the cluster, as Kafka's), else None."""
    kind, name = resource.resource_type, resource.resource_name
    if kind == ResourceType.TOPIC:
        return None if ctx.on_topic(operation, name) else TopicAuthorizationFailed(DENIED)
    if kind == ResourceType.GROUP:
        return None if ctx.on_group(operation, name) else GroupAuthorizationFailed(DENIED)
    if kind in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        return None if ctx.on_cluster(operation) else ClusterAuthorizationFailed(DENIED)
    return None


class ConfigSource(enum.IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_GROUP_CONFIG = 8


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs config_operation."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)
"""Kafka's default message for INVALID_REQUEST, sent when a whole request is refused."""

# --------------------------------------------------------------------------- names


def broker_scope(broker: Broker, name: str, *, describe: bool) -> str:
    """The dynamic-config scope of BROKER resource ``name``: "", this node's id, or (to
    alter, on the controller) any registered broker's."""
    if not name:
        return ""
    if not JAVA_INT.fullmatch(name):
        what = "Broker" if describe else "Node"
        raise InvalidRequest(f"{what} id must be an integer, but it is: {name}")
    if not describe and int(name) in broker.metadata.brokers:
        return str(int(name))  # on the controller: any registered broker's scope
    if int(name) != broker.node_id:
        tail = " or empty string," if describe else ","
        raise InvalidRequest(
            f"Unexpected broker id, expected {broker.node_id}{tail} but received {name}"
        )
    return str(broker.node_id)


# --------------------------------------------------------------------------- values


def apply_ops(
    current: Mapping[str, str],
    ops: Iterable[tuple[str, int, str | None]],
    definitions: Mapping[str, ConfigDef],
) -> dict[str, str]:
    """The configs after IncrementalAlterConfigs operations (name, op, value)."""
    updated = dict(current)
    for name, op, value in ops:
        if op == AlterOp.SET:
            assert value is not None
            updated[name] = value
        elif op == AlterOp.DELETE:
            updated.pop(name, None)
        else:
            definition = definitions.get(name)
            if definition is None or definition.type is not ConfigType.LIST:
                raise InvalidConfig(
                    f"Can't {AlterOp(op).name} to key {name} because its type is not LIST."
                )
            base = updated.get(name)
            if base is None:
                base = definition.render(definition.default)
            items = [item for item in base.split(",") if item]
            for item in (value or "").split(","):
                if op == AlterOp.APPEND and item not in items:
                    items.append(item)
                elif op == AlterOp.SUBTRACT and item in items:
                    items.remove(item)
            updated[name] = ",".join(items)
    return updated


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs and CreateTopics (v5+) report it."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    config_type: ConfigType
    documentation: str
    synonyms: tuple[Synonym, ...]
    """Every level that sets the value, the effective one first."""
    is_sensitive: bool = False


def _render(definition: ConfigDef, raw: object) -> str:
    try:
        return definition.render(definition.parse(raw))
    except InvalidConfig:
        return str(raw)


def _broker_synonyms(broker: Broker, key: str) -> list[Synonym]:
    definition = BROKER_CONFIGS[key]
    found: list[Synonym] = []
    dynamic = broker.metadata.broker_configs
    for scope, source in (
        (str(broker.node_id), ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ):
        raw = dynamic.get(scope, {}).get(key)
        if raw is not None:
            found.append(Synonym(key, _render(definition, raw), source))
    if key in broker.config.overrides:
        static = broker.static_config_values[key]
        found.append(Synonym(key, definition.render(static), ConfigSource.STATIC_BROKER_CONFIG))
    found.append(Synonym(key, definition.render(definition.default), ConfigSource.DEFAULT_CONFIG))
    return found


def topic_entries(broker: Broker, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic config of a topic with ``overrides``, sorted by name."""
    entries: list[ConfigEntry] = []
    for name in sorted(TOPIC_CONFIGS):
        definition = TOPIC_CONFIGS[name]
        synonyms: list[Synonym] = []
        value: str | None
        if name in overrides:
            value = _render(definition, overrides[name])
            synonyms.append(Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if definition.broker_key is not None:
            synonyms += _broker_synonyms(broker, definition.broker_key)
        if synonyms:
            value, source = synonyms[0].value, synonyms[0].source
        else:
            value, source = definition.render(definition.default), ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name, value, source, False, definition.type, definition.doc, tuple(synonyms)
            )
        )
    return entries


def group_entries(broker: Broker, group: str) -> list[ConfigEntry]:
    """Every group config of ``group``: its override, else Kafka's broker-level default."""
    if not group:
        raise InvalidRequest("Group name must not be empty")
    overrides = broker.metadata.group_configs.get(group, {})
    entries: list[ConfigEntry] = []
    for name in sorted(GROUP_CONFIGS):
        spec = GROUP_CONFIGS[name]
        definition = spec.definition
        default = definition.render(definition.default)
        synonyms = [Synonym(spec.broker_key or name, default, ConfigSource.DEFAULT_CONFIG)]
        if name in overrides:
            value = _render(definition, overrides[name])
            synonyms.insert(0, Synonym(name, value, ConfigSource.DYNAMIC_GROUP_CONFIG))
        top = synonyms[0]
        entries.append(
            ConfigEntry(
                name, top.value, top.source, False, definition.type, definition.doc, tuple(synonyms)
            )
        )
    return entries


def broker_entries(broker: Broker, scope: str) -> list[ConfigEntry]:
    """Broker configs: all of them for this node's scope, the dynamic ones for ""."""
    entries: list[ConfigEntry] = []
    if scope:
        for name in sorted(BROKER_CONFIGS):
            synonyms = _broker_synonyms(broker, name)
            entries.append(_broker_entry(name, synonyms))
    else:
        for name, raw in sorted(broker.metadata.broker_configs.get("", {}).items()):
            definition = BROKER_CONFIGS.get(name)
            value = _render(definition, raw) if definition is not None else raw
            synonym = Synonym(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            entries.append(_broker_entry(name, [synonym]))
    return entries


def _broker_entry(name: str, synonyms: list[Synonym]) -> ConfigEntry:
    definition = BROKER_CONFIGS.get(name)
    return ConfigEntry(
        name,
        synonyms[0].value,
        synonyms[0].source,
        name not in DYNAMIC_BROKER_KEYS,
        definition.type if definition is not None else ConfigType.STRING,
        definition.doc if definition is not None else "",
        tuple(synonyms),
    )


# --------------------------------------------------------------------------- alter


def duplicates(keys: Iterable[object]) -> set[object]:
    seen: set[object] = set()
    repeated: set[object] = set()
    for key in keys:
        if key in seen:
            repeated.add(key)
        seen.add(key)
    return repeated


def check_config_list(names: list[str], nulls: list[str]) -> None:
    """The per-resource checks Kafka makes before anything else (ConfigAdminManager)."""
    if duplicates(names):
        raise InvalidRequest("Error due to duplicate config keys")
    if nulls:
        raise InvalidRequest(f"Null value not supported for : {', '.join(nulls)}")


Compute = Callable[[dict[str, str]], dict[str, str]]


def alter_topic(
    broker: Broker, changes: Changes, name: str, compute: Compute, *, validate_only: bool
) -> None:
    """Replace topic ``name``'s overrides by ``compute(current)`` once they validate."""
    if not name:
        raise InvalidRequest("Default topic resources are not allowed.")
    check_topic_name(name)
    info = broker.metadata.topics.get(name)
    current = dict(info.configs) if info is not None else {}
    updated = compute(current)
    validate_topic_configs(
        updated, tiered=broker.config.get_bool("remote.log.storage.system.enable")
    )
    if info is None:
        raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
    if not validate_only and updated != current:
        changes.set_topic_configs(name, updated)


def alter_broker(
    broker: Broker, changes: Changes, name: str, compute: Compute, *, validate_only: bool
) -> None:
    """Replace the dynamic configs of BROKER resource ``name`` ("" or this node)."""
    scope = broker_scope(broker, name, describe=False)
    current = dict(broker.metadata.broker_configs.get(scope, {}))
    updated = compute(current)
    validate_broker_configs(updated)
    if not validate_only and updated != current:
        changes.set_broker_configs(scope, updated)


def alter_group(
    broker: Broker, changes: Changes, name: str, compute: Compute, *, validate_only: bool
) -> None:
    """Replace group ``name``'s overrides by ``compute(current)`` once they validate. As in
    Kafka, any non-empty name is accepted, whether or not such a group exists."""
    if not name:
        raise InvalidRequest("Default group resources are not allowed.")
    current = dict(broker.metadata.group_configs.get(name, {}))
    updated = compute(current)
    validate_group_configs(updated)
    if not validate_only and updated != current:
        changes.set_group_configs(name, updated)


def unsupported_resource(resource_type: int) -> InvalidRequest:
    try:
        label = ResourceType(resource_type).name
    except ValueError:
        return InvalidRequest(f"Unknown resource type {resource_type}")
    return InvalidRequest(f"Sluice does not support {label} config resources")


def alter_each(
    ctx: RequestContext,
    request: Any,
    alter: Callable[[RequestContext, Any, Changes], None],
    response: tuple[type, type],
) -> Any:
    """The answer of AlterConfigs / IncrementalAlterConfigs, decided on the active
    controller: ``alter(ctx, resource, changes)`` for each resource, a per-resource error
    code, repeated resources refused. ``response``: the API's response class and its
    per-resource class."""
    per_resource = response[1]

    def refusal(resource: Any) -> Any | None:
        """ALTER_CONFIGS, checked here: the controller sees this broker, not the client."""
        denied = refused(ctx, resource, Operation.ALTER_CONFIGS)
        if denied is None:
            return None
        return ctx.make(
            per_resource,
            error_code=error_code_for(denied),
            error_message=error_message_for(denied),
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )

    return via_controller_except(
        ctx,
        request,
        lambda c, req, changes: _alter_all(c, req, alter, changes, response),
        None,
        items="resources",
        results="responses",
        refusal=refusal,
    )


def _alter_all(
    ctx: RequestContext,
    request: Any,
    alter: Callable[[RequestContext, Any, Changes], None],
    changes: Changes,
    response: tuple[type, type],
) -> Any:
    whole, per_resource = response
    repeated = duplicates((r.resource_type, r.resource_name) for r in request.resources)
    responses: list[Any] = []
    for resource in request.resources:
        exc: BaseException | None = None
        try:
            if (resource.resource_type, resource.resource_name) in repeated:
                raise InvalidRequest("Each resource must appear at most once.")
            alter(ctx, resource, changes)
        except (BrokerError, OSError) as error:
            exc = error
        responses.append(
            ctx.make(
                per_resource,
                error_code=ErrorCode.none if exc is None else error_code_for(exc),
                error_message=None if exc is None else error_message_for(exc),
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return ctx.make(whole, throttle_time=_ZERO, responses=tuple(responses))
