"""Broker, topic and group configuration: every limit has a number and a key.

Keys and defaults follow Apache Kafka's where Kafka has the setting. Topic configs fall
back to the broker setting named by ``broker_key`` (as ``retention.ms`` falls back to
``log.retention.ms``). Values are validated once, here; a bad value raises InvalidConfig
naming the key.

The package: ``defs`` (how a setting is defined and parsed), ``broker_table``,
``topic_table`` and ``group_table`` (every setting), ``rules`` (the one validation, with
Kafka's messages, that the handlers and the control plane both call), and here
``BrokerConfig``, the broker's effective settings with typed accessors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dataplane.config.broker_table import BROKER_CONFIGS
from dataplane.config.defs import COMPRESSION_TYPES, ConfigDef, ConfigType
from dataplane.config.group_table import GROUP_CONFIGS, GroupConfigDef
from dataplane.config.topic_table import TOPIC_CONFIGS
from wire.errors import InvalidConfig

WATCHDOG_FILE = "watchdog"
"""In a broker's data directory: touched every ``watchdog.interval.ms`` while it serves; its
supervisor reads it (``controlplane/supervision.py``)."""

__all__ = [
    "BROKER_CONFIGS",
    "COMPRESSION_TYPES",
    "GROUP_CONFIGS",
    "TOPIC_CONFIGS",
    "WATCHDOG_FILE",
    "BrokerConfig",
    "ConfigDef",
    "ConfigType",
    "GroupConfigDef",
    "Settings",
    "TopicConfigView",
    "TopicSettings",
    "ViewSettings",
    "parse_overrides",
    "read_properties",
]


def parse_overrides(
    defs: Mapping[str, ConfigDef], raw: Mapping[str, object], *, what: str
) -> dict[str, Any]:
    """Validate ``raw`` key/values against ``defs``; unknown keys are InvalidConfig."""
    parsed: dict[str, Any] = {}
    for key, value in raw.items():
        definition = defs.get(key)
        if definition is None:
            raise InvalidConfig(f"unknown {what} config {key!r}")
        parsed[key] = definition.parse(value)
    return parsed


class Settings:
    """Typed reads of parsed settings (values are parsed once, when they are set): each
    accessor checks the value's type, so a wrong key or type fails loudly, naming the key,
    instead of a cast hiding it at the point of use."""

    def __getitem__(self, key: str) -> Any:
        raise NotImplementedError

    def _typed(self, key: str, kind: type | tuple[type, ...]) -> Any:
        value = self[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise TypeError(f"setting {key} is {type(value).__name__}, not {kind}")
        return value

    def get_int(self, key: str) -> int:
        return int(self._typed(key, int))

    def get_float(self, key: str) -> float:
        return float(self._typed(key, (int, float)))

    def get_bool(self, key: str) -> bool:
        return bool(self._typed(key, bool))

    def get_str(self, key: str) -> str:
        return str(self._typed(key, str))

    def get_list(self, key: str) -> list[str]:
        return list(self._typed(key, list))

    def get_seconds(self, key: str) -> float:
        """A duration setting in milliseconds (``*.ms``), in seconds."""
        return self.get_int(key) / 1000


class TopicSettings(Settings, Mapping[str, Any]):
    """A topic's effective settings (its overrides over the broker's), parsed once."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class ViewSettings(Settings):
    """Settings read through a function of the key (a topic's effective settings)."""

    __slots__ = ("_view",)

    def __init__(self, view: Callable[[str], Any]) -> None:
        self._view = view

    def __getitem__(self, key: str) -> Any:
        return self._view(key)


@dataclass(frozen=True)
class BrokerConfig(Settings):
    """Effective broker settings: defaults overlaid with the config file and --set (and the
    dynamic broker configs of the metadata log, applied in place by the broker)."""

    values: dict[str, Any] = field(default_factory=dict)
    overrides: frozenset[str] = frozenset()
    data_dir: str = "."
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092

    @classmethod
    def build(
        cls,
        *,
        data_dir: str,
        listen: str,
        overrides: Mapping[str, object] = {},
    ) -> BrokerConfig:
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidConfig(f"--listen must be HOST:PORT, got {listen!r}")
        parsed = parse_overrides(BROKER_CONFIGS, overrides, what="broker")
        values = {name: d.default for name, d in BROKER_CONFIGS.items()}
        values.update(parsed)
        return cls(values, frozenset(parsed), data_dir, host, int(port))

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def topic_default(self, key: str) -> Any:
        definition = TOPIC_CONFIGS[key]
        if definition.broker_key is not None:
            return self.values[definition.broker_key]
        return definition.default

    @property
    def advertised(self) -> tuple[str, int]:
        """The address other brokers and clients are given for the --listen listener."""
        raw = str(self.values["advertised.listeners"])
        if raw and "://" not in raw:
            host, _, port = raw.rpartition(":")
            return host, int(port)
        primary = "PLAINTEXT"
        for name, address in _named(str(self.values["listeners"])).items():
            if address == (self.listen_host, self.listen_port):
                primary = name
        return _named(raw).get(primary, (self.listen_host, self.listen_port))

    def advertised_for(self, name: str, bound: tuple[str, int]) -> tuple[str, int]:
        """The address clients are given for listener ``name`` (bound at ``bound``):
        its entry in advertised.listeners (Kafka's NAME://host:port form), else ``bound``."""
        raw = str(self.values["advertised.listeners"])
        return _named(raw).get(name.upper(), bound) if "://" in raw else bound


def _named(raw: str) -> dict[str, tuple[str, int]]:
    """NAME://host:port,... as {NAME: (host, port)} (entries that do not parse are left
    out: ``listeners`` is validated by dataplane.security.listeners at start)."""
    out: dict[str, tuple[str, int]] = {}
    for item in raw.split(","):
        name, sep, address = item.strip().partition("://")
        host, _, port = address.rpartition(":")
        if sep and port.isdigit():
            out[name.strip().upper()] = (host.strip("[]"), int(port))
    return out


def read_properties(lines: Iterable[str]) -> dict[str, str]:
    """Parse Java-properties style ``key=value`` lines (``#`` comments)."""
    out: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        key, sep, value = text.partition("=")
        if not sep:
            raise InvalidConfig(f"line {number}: expected key=value, got {text!r}")
        out[key.strip()] = value.strip()
    return out


TopicConfigView = Callable[[str], Any]
