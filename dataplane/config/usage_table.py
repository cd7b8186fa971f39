"""The broker settings of usage metering (issue 16): how often a broker turns its
counters into a usage event, how many unsent events it keeps, the usage topic's shape."""

from __future__ import annotations

from dataplane.config.defs import B, ConfigDef, I, L

HOUR_MS = 3_600_000

USAGE_CONFIGS: list[ConfigDef] = [
    ConfigDef(
        "usage.metering.enable",
        B,
        True,
        "Meter bytes in and out, replication, storage, tiered retrieval, endpoint bytes and "
        "transform compute into the cluster's __sluice_usage topic.",
        read_only=True,
    ),
    ConfigDef(
        "usage.flush.interval.ms",
        I,
        10_000,
        "How often a broker turns its usage counters into one usage event (aligned to the "
        "wall clock; intervals are also cut at every hour). It must divide an hour.",
        minimum=1000,
        maximum=600_000,
        read_only=True,
    ),
    ConfigDef(
        "usage.spool.max.events",
        I,
        100_000,
        "Unsent usage events a broker keeps in its spool file while the usage topic cannot "
        "take them (about 11 days at the default flush interval). A full spool drops the "
        "oldest event and logs what it held.",
        minimum=10,
        read_only=True,
    ),
    ConfigDef(
        "usage.topic.retention.ms",
        L,
        30 * 24 * HOUR_MS,
        "retention.ms of the __sluice_usage topic when a broker creates it: the billing "
        "pipeline must run at least this often.",
        minimum=HOUR_MS,
        read_only=True,
    ),
]
