"""How a setting is defined: its type, default, limits and meaning, and how a raw value
parses (``ConfigDef.parse``, raising InvalidConfig naming the key). The tables are
``broker_table``, ``topic_table`` and ``group_table``; Kafka's exact validation messages
are ``rules``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from wire.errors import InvalidConfig


class ConfigType(enum.IntEnum):
    """DescribeConfigs config_type values."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    broker_key: str | None = None
    """For topic configs: the broker setting that provides the default."""
    read_only: bool = False
    also: tuple[int, ...] = ()
    """Values allowed outside [minimum, maximum] (gzip's -1 beside 1-9)."""

    def parse(self, raw: object) -> Any:
        """Parse and validate a raw (usually string) value, raising InvalidConfig."""
        try:
            value = _parse_typed(self.type, raw)
        except (TypeError, ValueError) as exc:
            raise InvalidConfig(
                f"invalid value {raw!r} for {self.name}: expected {self.type.name.lower()}"
            ) from exc
        if value in self.also:
            return value
        if self.minimum is not None and value < self.minimum:
            raise InvalidConfig(
                f"invalid value {raw!r} for {self.name}: must be >= {self.minimum:g}"
            )
        if self.maximum is not None and value > self.maximum:
            raise InvalidConfig(
                f"invalid value {raw!r} for {self.name}: must be <= {self.maximum:g}"
            )
        if self.choices:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.choices:
                    raise InvalidConfig(
                        f"invalid value {raw!r} for {self.name}: one of {', '.join(self.choices)}"
                    )
        return value

    def render(self, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(value)
        return str(value)


def _parse_typed(kind: ConfigType, raw: object) -> Any:  # noqa: PLR0911 - one return per config type
    if kind is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(text)
        return text == "true"
    if kind in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        if isinstance(raw, bool):
            raise TypeError("bool")
        return int(str(raw).strip())
    if kind is ConfigType.DOUBLE:
        return float(str(raw).strip())
    if kind is ConfigType.LIST:
        if isinstance(raw, list):
            return [str(x) for x in raw]
        return [x.strip() for x in str(raw).split(",") if x.strip()]
    return str(raw).strip()  # as Kafka's ConfigDef: " gzip" is gzip


B, S, I, L, D, LST = (  # noqa: E741 - short names keep the tables readable
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
WEEK_MS = 7 * 24 * 3600 * 1000
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
NOT_ACTED = "Accepted for compatibility; Sluice does not act on it"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # Kafka's order
COMPRESSION_DOC = (
    "uncompressed, zstd, lz4, snappy or gzip (a batch the producer compressed otherwise is "
    "decompressed and recompressed on the leader), or producer: as the producer sent it."
)
COMPRESSION_LEVELS = [
    ConfigDef(
        "compression.gzip.level",
        I,
        -1,
        "Level of gzip recompression: 1-9, or -1 for gzip's default (6).",
        minimum=1,
        maximum=9,
        also=(-1,),
    ),
    ConfigDef(
        "compression.lz4.level",
        I,
        9,
        "Level of lz4 recompression: 9 uses lz4's fast compressor, other levels lz4 HC (as Kafka).",
        minimum=1,
        maximum=17,
    ),
    ConfigDef(
        "compression.zstd.level",
        I,
        3,
        "Level of zstd recompression.",
        minimum=-131072,
        maximum=22,
    ),
]
