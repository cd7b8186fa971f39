"""The one validation of settings, with Apache Kafka's messages word for word: topic names
(``check_topic_name``, ``colliding_topic``), single values (``parse_value``: "Invalid value
abc for configuration retention.ms: Not a number of type LONG"), a topic's overrides
(``validate_topic_configs``, Kafka's LogConfig.validate plus the tiered-storage rules),
dynamic broker settings (``validate_broker_configs``) and group overrides
(``validate_group_configs``). The admin handlers and the control plane both call these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from dataplane.config import group_table
from dataplane.config.broker_table import BROKER_CONFIGS
from dataplane.config.defs import ConfigDef, ConfigType
from dataplane.config.topic_table import TOPIC_CONFIGS
from wire.errors import InvalidConfig, InvalidRequest, InvalidTopic

DYNAMIC_BROKER_KEYS = frozenset(
    d.broker_key for d in TOPIC_CONFIGS.values() if d.broker_key is not None
)
"""Broker settings that may change at run time: those backing a topic setting (Kafka's
DynamicLogConfig)."""
assert DYNAMIC_BROKER_KEYS.issubset(BROKER_CONFIGS)

MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)"
)


def check_topic_name(name: str) -> None:
    """Raise InvalidTopic with Kafka's message (``Topic.validate``) for an illegal name."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME}"
    elif not _LEGAL_TOPIC.fullmatch(name):
        reason = (
            f"'{name}' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    else:
        return
    raise InvalidTopic(f"Topic name is invalid: {reason}")


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic that differs from ``name`` only by '.' versus '_' (Kafka refuses
    such pairs: their metric names would collide)."""
    if "." not in name and "_" not in name:
        return None
    unified = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == unified:
            return other
    return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def parse_value(definition: ConfigDef, raw: str) -> Any:  # noqa: C901, PLR0912 - Kafka's ConfigDef checks, in its order
    """Parse ``raw`` as Kafka's ConfigDef would, raising InvalidConfig with its message
    ("Invalid value abc for configuration retention.ms: Not a number of type LONG")."""
    name = definition.name
    kind = definition.type
    text = raw.strip()

    def invalid(shown: object, reason: str) -> InvalidConfig:
        return InvalidConfig(f"Invalid value {shown} for configuration {name}: {reason}")

    if kind is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise invalid(raw, "Expected value to be either true or false")
    elif kind in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        bits = {ConfigType.INT: 32, ConfigType.SHORT: 16, ConfigType.LONG: 64}[kind]
        if not JAVA_INT.fullmatch(text) or not -(2 ** (bits - 1)) <= int(text) < 2 ** (bits - 1):
            raise invalid(raw, f"Not a number of type {kind.name}")
    elif kind is ConfigType.DOUBLE and not _JAVA_DOUBLE.fullmatch(text):
        raise invalid(raw, "Not a number of type DOUBLE")
    try:
        value = replace(definition, minimum=None, maximum=None, choices=()).parse(raw)
    except InvalidConfig:
        raise invalid(raw, f"Not a value of type {kind.name}") from None
    if (
        definition.also
        and value not in definition.also
        and (
            (definition.minimum is not None and value < definition.minimum)
            or (definition.maximum is not None and value > definition.maximum)
        )
    ):
        allowed = " or ".join(str(v) for v in definition.also)
        raise invalid(
            definition.render(value),
            f"Value must be between {_number(definition.minimum or 0)} and "
            f"{_number(definition.maximum or 0)} or equal to {allowed}",
        )
    if value in definition.also:
        return value
    if definition.minimum is not None and value < definition.minimum:
        raise invalid(
            definition.render(value), f"Value must be at least {_number(definition.minimum)}"
        )
    if definition.maximum is not None and value > definition.maximum:
        raise invalid(
            definition.render(value), f"Value must be no more than {_number(definition.maximum)}"
        )
    if definition.choices:
        allowed = ", ".join(definition.choices)  # in declared order, as Kafka lists them
        for item in value if isinstance(value, list) else [value]:
            if item not in definition.choices:
                raise invalid(item, f"String must be one of: {allowed}")
    try:  # the parse the log manager will make of the stored value
        return definition.parse(raw)
    except InvalidConfig as exc:
        raise invalid(raw, exc.message or "invalid") from None


def validate_topic_configs(configs: Mapping[str, str | None], *, tiered: bool = True) -> None:
    """Kafka's LogConfig.validate: every name known, every value valid (InvalidConfig);
    ``remote.storage.enable=true`` only where the brokers have tiered storage (``tiered``)
    and not with compaction."""
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise InvalidConfig(f"Null value not supported for topic configs: {','.join(nulls)}")
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"Unknown topic config name: {name}")
    for name, value in configs.items():
        assert value is not None
        parse_value(TOPIC_CONFIGS[name], value)
    if str(configs.get("remote.storage.enable", "")).strip().lower() == "true":
        if not tiered:
            raise InvalidConfig(
                "Tiered Storage functionality is disabled in the broker. Topic cannot be "
                "configured with remote log storage (set remote.log.storage.system.enable "
                "and the tiered.s3.* settings on the brokers)."
            )
        if "compact" in str(configs.get("cleanup.policy", "delete")):
            raise InvalidConfig("Remote log storage is unsupported for the compacted topics")


def validate_broker_configs(configs: Mapping[str, str]) -> None:
    """Dynamic broker configs; failures are INVALID_REQUEST as in Kafka (KAFKA-13609)."""
    fixed = sorted(name for name in configs if name not in DYNAMIC_BROKER_KEYS)
    if fixed:
        raise InvalidRequest(f"Cannot update these configs dynamically: [{', '.join(fixed)}]")
    for name, value in configs.items():
        try:
            parse_value(BROKER_CONFIGS[name], value)
        except InvalidConfig as exc:
            raise InvalidRequest(exc.message or str(exc)) from None


def validate_group_configs(configs: Mapping[str, str | None]) -> None:
    """Kafka's GroupConfig.validate over a group's overrides (InvalidConfig)."""
    group_table.check_names(configs)
    effective: dict[str, object] = {
        name: spec.definition.default for name, spec in group_table.GROUP_CONFIGS.items()
    }
    for name, raw in configs.items():
        if raw is None:
            raise InvalidConfig(f"Null value not supported for group configs: {name}")
        value = parse_value(group_table.GROUP_CONFIGS[name].definition, raw)
        group_table.check_value(name, value)
        effective[name] = value
    group_table.check_together(effective)
