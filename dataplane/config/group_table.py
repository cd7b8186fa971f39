"""Group configs: Kafka 4.3's GROUP config resource (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs with resource type 32).

Kafka keeps per-group overrides of its KIP-848 consumer, share and streams group
settings. Sluice stores and describes them (in the metadata log, so every broker answers
the same), validated with Kafka's rules and messages, but its groups use the classic
protocol only, which none of these settings affects: each says so in its documentation.

Each key falls back to a broker setting (``group.consumer.session.timeout.ms`` for
``consumer.session.timeout.ms``, …), reported as its synonym with Kafka's default.
Bounds come in two kinds, as in Kafka: a key's own lower limit ("Value must be at least
N") and the broker's min/max settings for it ("… must be greater than or equal to
group.consumer.min.session.timeout.ms").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from dataplane.config.defs import ConfigDef, ConfigType
from wire.errors import InvalidConfig

NOT_ACTED = (
    " Stored and described; Sluice's groups use the classic protocol, which this setting "
    "does not affect."
)
INT, STRING, BOOLEAN = ConfigType.INT, ConfigType.STRING, ConfigType.BOOLEAN


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    definition: ConfigDef
    broker_key: str | None
    """The broker setting it falls back to (its synonym); None when Kafka has none."""
    lower: tuple[str, int] | None = None
    """(broker key, value) of the broker's lower bound for the value, if any."""
    upper: tuple[str, int] | None = None


def _def(  # noqa: PLR0917 - one row of the table
    name: str,
    kind: ConfigType,
    default: object,
    doc: str,
    minimum: int | None = None,
    lower: int | None = None,
    upper: int | None = None,
    broker_key: bool = True,
) -> GroupConfigDef:
    group_kind, _, rest = name.partition(".")
    base = f"group.{name}"
    bound = rest.replace("num.standby.replicas", "standby.replicas")
    return GroupConfigDef(
        ConfigDef(name, kind, default, doc + NOT_ACTED, minimum=minimum),
        base if broker_key else None,
        None if lower is None else (f"group.{group_kind}.min.{bound}", lower),
        None if upper is None else (f"group.{group_kind}.max.{bound}", upper),
    )


_TABLE = [
    _def(
        "consumer.session.timeout.ms",
        INT,
        45000,
        "The timeout to detect client failures when using the consumer group protocol.",
        1,
        45000,
        60000,
    ),
    _def(
        "consumer.heartbeat.interval.ms",
        INT,
        5000,
        "The heartbeat interval given to the members of a consumer group.",
        1,
        5000,
        15000,
    ),
    _def(
        "consumer.assignment.interval.ms",
        INT,
        1000,
        "The interval between assignment updates for a consumer group.",
        0,
        None,
        15000,
    ),
    _def(
        "share.session.timeout.ms",
        INT,
        45000,
        "The timeout to detect client failures when using the share group protocol.",
        1,
        45000,
        60000,
    ),
    _def(
        "share.heartbeat.interval.ms",
        INT,
        5000,
        "The heartbeat interval given to the members of a share group.",
        1,
        5000,
        15000,
    ),
    _def(
        "share.assignment.interval.ms",
        INT,
        1000,
        "The interval between assignment updates for a share group.",
        0,
        None,
        15000,
    ),
    _def(
        "share.record.lock.duration.ms",
        INT,
        30000,
        "The record acquisition lock duration in milliseconds for share groups.",
        1000,
        15000,
        60000,
    ),
    _def(
        "share.delivery.count.limit",
        INT,
        5,
        "The maximum number of delivery attempts for a record delivered to a share group.",
        2,
        None,
        10,
    ),
    _def(
        "share.partition.max.record.locks",
        INT,
        2000,
        "Share-group record lock limit per share-partition.",
        100,
        None,
        4000,
    ),
    _def(
        "share.auto.offset.reset",
        STRING,
        "latest",
        "The strategy to initialize the share-partition start offset: earliest, latest or "
        "by_duration:<ISO-8601 duration>.",
        broker_key=False,
    ),
    _def(
        "share.isolation.level",
        STRING,
        "read_uncommitted",
        "Controls how to read records written transactionally (read_committed or "
        "read_uncommitted).",
        broker_key=False,
    ),
    _def(
        "share.renew.acknowledge.enable",
        BOOLEAN,
        True,
        "Whether the renew acknowledge type is enabled for the share group.",
        broker_key=False,
    ),
    _def(
        "streams.session.timeout.ms",
        INT,
        45000,
        "The timeout to detect client failures when using the streams group protocol.",
        1,
        45000,
        60000,
    ),
    _def(
        "streams.heartbeat.interval.ms",
        INT,
        5000,
        "The heartbeat interval given to the members.",
        1,
        5000,
        15000,
    ),
    _def(
        "streams.assignment.interval.ms",
        INT,
        1000,
        "The interval between assignment updates for a streams group.",
        0,
        None,
        15000,
    ),
    _def(
        "streams.initial.rebalance.delay.ms",
        INT,
        3000,
        "The amount of time the group coordinator will wait for more streams clients to "
        "join a new group before performing the first rebalance.",
        0,
    ),
    _def(
        "streams.num.standby.replicas",
        INT,
        0,
        "The number of standby replicas for each task.",
        0,
        None,
        2,
    ),
]
GROUP_CONFIGS: dict[str, GroupConfigDef] = {g.definition.name: g for g in _TABLE}

_ISO_DURATION = re.compile(
    r"P(?:\d+D)?(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d{1,9})?S)?)?", re.IGNORECASE
)
_CHOICES = {"share.isolation.level": ("read_committed", "read_uncommitted")}


def check_names(configs: Mapping[str, object]) -> None:
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise InvalidConfig(f"Unknown group config name: {name}")


def check_value(name: str, value: int | str | bool) -> None:
    """The checks beyond type and lower limit, with Kafka's messages."""
    spec = GROUP_CONFIGS[name]
    if isinstance(value, int) and not isinstance(value, bool):
        if spec.lower is not None and value < spec.lower[1]:
            raise InvalidConfig(f"{name} must be greater than or equal to {spec.lower[0]}")
        if spec.upper is not None and value > spec.upper[1]:
            raise InvalidConfig(f"{name} must be less than or equal to {spec.upper[0]}")
    if name == "share.auto.offset.reset":
        text = str(value)
        duration = text.removeprefix("by_duration:")
        if text not in ("earliest", "latest") and (
            duration in (text, "P") or not _ISO_DURATION.fullmatch(duration)
        ):
            raise InvalidConfig(
                f"Invalid value {text} for configuration {name}: Invalid value `{text}` for "
                f"configuration {name}. The value must be either 'earliest', 'latest' or of "
                "the format 'by_duration:<PnDTnHnMn.nS>'."
            )
    choices = _CHOICES.get(name)
    if choices and value not in choices:
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: String must be one of: "
            + ", ".join(choices)
        )


def check_together(values: Mapping[str, object]) -> None:
    """Session timeouts above heartbeat intervals, over the effective values."""
    for kind in ("consumer", "share", "streams"):
        session = values.get(f"{kind}.session.timeout.ms")
        heartbeat = values.get(f"{kind}.heartbeat.interval.ms")
        if isinstance(session, int) and isinstance(heartbeat, int) and session <= heartbeat:
            raise InvalidConfig(
                f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms"
            )
