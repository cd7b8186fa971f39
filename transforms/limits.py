"""Sandbox limits: one frozen value, each field with the broker config key that sets it.

The broker owns the keys (``dataplane.config``); this package only names them and their
defaults, so the two stay in step (``Limits.from_config`` reads a mapping of those keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

MIB = 1024 * 1024

MAX_OUTPUT_TOPICS = 8
"""As Redpanda: a transform writes to at most 8 topics."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one instance may use. Defaults are the proposed broker defaults."""

    module_max_bytes: int = 10 * MIB
    """``transforms.module.max.bytes``: largest deployable module (Redpanda's
    ``data_transforms_binary_max_size`` default, 10 MiB; a Go SDK module is ~2.3 MB)."""

    memory_max_bytes: int = 64 * MIB
    """``transforms.memory.max.bytes``: the guest's linear memory limit. Go's runtime
    starts at ~2.2 MiB and reserves heap in 4 MiB arenas; 64 MiB leaves room for batches
    of 1 MiB records."""

    fuel_per_record: int = 20_000_000
    """``transforms.cpu.fuel.per.record``: CPU budget in wasmtime fuel (about one
    WebAssembly instruction each; ~10 ms of guest CPU here). A call gets
    ``fuel_per_record * max(1, records) + fuel_per_batch``."""

    fuel_per_batch: int = 20_000_000
    """``transforms.cpu.fuel.per.batch``: the fixed part of a call's budget (a Go guest's
    garbage collector runs between records)."""

    fuel_startup: int = 2_000_000_000
    """``transforms.cpu.fuel.startup``: budget of ``_start`` until the guest asks for its
    first batch (Go's runtime initialisation uses ~10-30 M)."""

    output_max_bytes: int = 16 * MIB
    """``transforms.output.max.bytes``: the most output (Kafka record framing included)
    one input batch may produce, over all output topics."""

    log_line_max_bytes: int = 1024
    """``transforms.logging.line.max.bytes``: longer log lines are cut (Redpanda's
    ``data_transforms_logging_line_max_bytes``, 1 KiB)."""

    log_max_bytes_per_call: int = 64 * 1024
    """``transforms.logging.max.bytes.per.call``: log text kept per call; the rest is
    counted and dropped (one line says how much)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) <= 0:
                raise ValueError(f"{CONFIG_KEYS[f.name]} must be positive")
        if self.memory_max_bytes > 4 * 1024 * MIB:
            raise ValueError("transforms.memory.max.bytes is at most 4 GiB (32-bit memory)")
        if self.output_max_bytes >= 2**31:
            raise ValueError("transforms.output.max.bytes must be below 2 GiB")
        if self.memory_max_bytes < 2 * self.output_max_bytes + MIB:
            # the limit bounds each memory of the sandbox, the host's output buffer too
            raise ValueError(
                "transforms.memory.max.bytes must be at least twice "
                "transforms.output.max.bytes + 1 MiB"
            )

    def batch_fuel(self, records: int) -> int:
        return self.fuel_per_record * max(1, records) + self.fuel_per_batch

    @classmethod
    def from_config(cls, config: Mapping[str, int]) -> Limits:
        """Limits from broker settings by key; keys not given keep their defaults."""
        by_key = {key: name for name, key in CONFIG_KEYS.items()}
        unknown = sorted(k for k in config if k.startswith("transforms.") and k not in by_key)
        if unknown:
            raise ValueError(f"unknown transforms settings: {', '.join(unknown)}")
        return cls(**{by_key[k]: int(v) for k, v in config.items() if k in by_key})


CONFIG_KEYS: dict[str, str] = {
    "module_max_bytes": "transforms.module.max.bytes",
    "memory_max_bytes": "transforms.memory.max.bytes",
    "fuel_per_record": "transforms.cpu.fuel.per.record",
    "fuel_per_batch": "transforms.cpu.fuel.per.batch",
    "fuel_startup": "transforms.cpu.fuel.startup",
    "output_max_bytes": "transforms.output.max.bytes",
    "log_line_max_bytes": "transforms.logging.line.max.bytes",
    "log_max_bytes_per_call": "transforms.logging.max.bytes.per.call",
}
"""Field name -> broker config key."""
