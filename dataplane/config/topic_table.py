"""Every topic setting: its key, type, default (or the broker setting it falls back to,
``broker_key``), limits and meaning."""

from __future__ import annotations

from dataclasses import replace

from dataplane.config.defs import (
    COMPRESSION_DOC,
    COMPRESSION_LEVELS,
    COMPRESSION_TYPES,
    INT_MAX,
    LONG_MAX,
    LST,
    NOT_ACTED,
    WEEK_MS,
    B,
    ConfigDef,
    D,
    I,
    L,
    S,
)

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef(
            "cleanup.policy",
            LST,
            ["delete"],
            "delete, compact or both.",
            choices=("compact", "delete"),
            broker_key="log.cleanup.policy",
        ),
        ConfigDef(
            "retention.ms",
            L,
            WEEK_MS,
            "Age after which closed segments are deleted (-1: forever).",
            minimum=-1,
            broker_key="log.retention.ms",
        ),
        ConfigDef(
            "retention.bytes",
            L,
            -1,
            "Partition size beyond which old segments are deleted.",
            minimum=-1,
            broker_key="log.retention.bytes",
        ),
        ConfigDef(
            "segment.bytes",
            I,
            1073741824,
            "Segment size before a roll.",
            minimum=14,
            maximum=INT_MAX,
            broker_key="log.segment.bytes",
        ),
        ConfigDef(
            "segment.ms",
            L,
            WEEK_MS,
            "Segment age before a roll.",
            minimum=1,
            broker_key="log.roll.ms",
        ),
        ConfigDef(
            "max.message.bytes",
            I,
            1048588,
            "Largest record batch accepted.",
            minimum=0,
            broker_key="message.max.bytes",
        ),
        ConfigDef(
            "index.interval.bytes",
            I,
            4096,
            "Bytes between two offset-index entries.",
            minimum=0,
            broker_key="log.index.interval.bytes",
        ),
        ConfigDef(
            "file.delete.delay.ms",
            L,
            60000,
            "How long the descriptor of a deleted or replaced segment stays open.",
            minimum=0,
            broker_key="log.segment.delete.delay.ms",
        ),
        ConfigDef(
            "delete.retention.ms",
            L,
            86400000,
            "How long tombstones survive compaction.",
            minimum=0,
            broker_key="log.cleaner.delete.retention.ms",
        ),
        ConfigDef(
            "min.compaction.lag.ms",
            L,
            0,
            "Minimum age before compaction may remove a record.",
            minimum=0,
            broker_key="log.cleaner.min.compaction.lag.ms",
        ),
        ConfigDef(
            "min.cleanable.dirty.ratio",
            D,
            0.5,
            "Dirty ratio that triggers compaction.",
            minimum=0,
            maximum=1,
            broker_key="log.cleaner.min.cleanable.ratio",
        ),
        ConfigDef(
            "message.timestamp.type",
            S,
            "CreateTime",
            "CreateTime or LogAppendTime.",
            choices=("CreateTime", "LogAppendTime"),
            broker_key="log.message.timestamp.type",
        ),
        ConfigDef(
            "min.insync.replicas",
            I,
            1,
            "Replicas that must acknowledge an acks=all write.",
            minimum=1,
            broker_key="min.insync.replicas",
        ),
        ConfigDef(
            "unclean.leader.election.enable",
            B,
            False,
            "Allow an out-of-sync replica to become leader.",
            broker_key="unclean.leader.election.enable",
        ),
        ConfigDef(
            "compression.type",
            S,
            "producer",
            "Codec batches are stored in: " + COMPRESSION_DOC,
            choices=COMPRESSION_TYPES,
            broker_key="compression.type",
        ),
        ConfigDef(
            "remote.storage.enable",
            B,
            False,
            "Offload closed segments to object storage (tiered storage).",
        ),
        ConfigDef(
            "local.retention.ms",
            L,
            -2,
            "Hot-tier retention by age (-2: same as retention.ms).",
            minimum=-2,
        ),
        ConfigDef(
            "local.retention.bytes",
            L,
            -2,
            "Hot-tier retention by size (-2: same as retention.bytes).",
            minimum=-2,
        ),
        ConfigDef(
            "message.timestamp.before.max.ms",
            L,
            LONG_MAX,
            "Largest age of a CreateTime timestamp; a record beyond fails its batch with "
            "INVALID_TIMESTAMP and is named in the record errors.",
            minimum=0,
            broker_key="log.message.timestamp.before.max.ms",
        ),
        ConfigDef(
            "message.timestamp.after.max.ms",
            L,
            3600000,
            "How far in the future a CreateTime timestamp may be; a record beyond fails its "
            "batch with INVALID_TIMESTAMP and is named in the record errors.",
            minimum=0,
            broker_key="log.message.timestamp.after.max.ms",
        ),
        ConfigDef("flush.messages", L, LONG_MAX, NOT_ACTED + " (see log.flush.policy).", minimum=1),
        ConfigDef("flush.ms", L, LONG_MAX, NOT_ACTED + " (see log.flush.policy).", minimum=0),
        ConfigDef(
            "segment.index.bytes", I, 10485760, NOT_ACTED + " (indexes grow as needed).", minimum=4
        ),
        ConfigDef("segment.jitter.ms", L, 0, NOT_ACTED + ".", minimum=0),
        ConfigDef("max.compaction.lag.ms", L, LONG_MAX, NOT_ACTED + " yet.", minimum=1),
        ConfigDef("preallocate", B, False, NOT_ACTED + "."),
        *[
            replace(d, broker_key=d.name)
            for d in COMPRESSION_LEVELS  # levels of recompression (compression.type)
        ],
        ConfigDef("follower.replication.throttled.replicas", LST, [], NOT_ACTED + " yet."),
        ConfigDef("leader.replication.throttled.replicas", LST, [], NOT_ACTED + " yet."),
        ConfigDef(
            "remote.log.copy.disable",
            B,
            False,
            "Stop uploading new segments (what is remote stays readable; local retention waits).",
        ),
        ConfigDef(
            "remote.log.delete.on.disable", B, False, NOT_ACTED + " yet (remote data is kept)."
        ),
    ]
}
