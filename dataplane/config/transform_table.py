"""The broker settings of WebAssembly transforms: the sandbox limits the engine reads
(``transforms.limits.Limits``, whose defaults these must equal — a test checks) and how
the broker runs transforms. The engine's limits are read once, at start (read-only, as
Kafka's static broker configs): running instances keep the limits they were made with."""

from __future__ import annotations

from dataplane.config.defs import LONG_MAX, B, ConfigDef, I, L, S

MIB = 1024 * 1024
WEEK_MS = 7 * 24 * 3600 * 1000

ENGINE_KEYS = (
    "transforms.module.max.bytes",
    "transforms.memory.max.bytes",
    "transforms.cpu.fuel.per.record",
    "transforms.cpu.fuel.per.batch",
    "transforms.cpu.fuel.startup",
    "transforms.output.max.bytes",
    "transforms.logging.line.max.bytes",
    "transforms.logging.max.bytes.per.call",
)
"""The keys the engine's ``Limits.from_config`` reads."""

TRANSFORM_CONFIGS: list[ConfigDef] = [
    ConfigDef(
        "transforms.enable",
        B,
        True,
        "Run the transforms whose input partitions this broker leads (false: deployments "
        "are kept, nothing runs here).",
        read_only=True,
    ),
    ConfigDef(
        "transforms.module.max.bytes",
        I,
        10 * MIB,
        "Largest WebAssembly module a deploy may carry (Redpanda's default).",
        minimum=1024,
        maximum=512 * MIB,
        read_only=True,
    ),
    ConfigDef(
        "transforms.memory.max.bytes",
        L,
        64 * MIB,
        "Linear memory limit of each transform instance; at least twice "
        "transforms.output.max.bytes + 1 MiB.",
        minimum=MIB,
        maximum=4096 * MIB,
        read_only=True,
    ),
    ConfigDef(
        "transforms.cpu.fuel.per.record",
        L,
        20_000_000,
        "CPU budget per input record, in wasmtime fuel (about one instruction each); a "
        "batch gets per.record x records + per.batch. Exhausting it fails the partition.",
        minimum=1,
        maximum=LONG_MAX,
        read_only=True,
    ),
    ConfigDef(
        "transforms.cpu.fuel.per.batch",
        L,
        20_000_000,
        "The fixed part of each batch's CPU budget, in wasmtime fuel.",
        minimum=1,
        maximum=LONG_MAX,
        read_only=True,
    ),
    ConfigDef(
        "transforms.cpu.fuel.startup",
        L,
        2_000_000_000,
        "CPU budget of a module's start until it asks for its first batch.",
        minimum=1,
        maximum=LONG_MAX,
        read_only=True,
    ),
    ConfigDef(
        "transforms.output.max.bytes",
        L,
        16 * MIB,
        "Most output one input batch may produce, over all output topics; more fails the "
        "partition.",
        minimum=1024,
        maximum=2**31 - 1,
        read_only=True,
    ),
    ConfigDef(
        "transforms.logging.line.max.bytes",
        I,
        1024,
        "Longer guest log lines are cut.",
        minimum=16,
        read_only=True,
    ),
    ConfigDef(
        "transforms.logging.max.bytes.per.call",
        I,
        64 * 1024,
        "Guest log text kept per batch; the rest is counted in one line.",
        minimum=1024,
        read_only=True,
    ),
    ConfigDef(
        "transforms.read.max.bytes",
        I,
        MIB,
        "Input bytes a transform reads from its partition per round (whole batches; at "
        "least one); its progress is committed after each round.",
        minimum=1024,
    ),
    ConfigDef(
        "transforms.produce.timeout.ms",
        I,
        30000,
        "How long a transform retries writing an output while its leader is away before it "
        "starts over from its committed offset.",
        minimum=100,
    ),
    ConfigDef(
        "transforms.start.offset",
        S,
        "earliest",
        "Where a transform starts on a partition it has no committed offset for: earliest "
        "(the whole log) or latest (records written from then on).",
        choices=("earliest", "latest"),
    ),
    ConfigDef(
        "transforms.logs.retention.ms",
        L,
        WEEK_MS,
        "Retention of the transform logs topic (_sluice.transform_logs).",
        minimum=1,
    ),
]
