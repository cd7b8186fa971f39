"""Every broker setting: its key (Kafka's where Kafka has it), type, default, limits and
meaning."""

from __future__ import annotations

from dataplane.config.defs import (
    COMPRESSION_DOC,
    COMPRESSION_LEVELS,
    COMPRESSION_TYPES,
    INT_MAX,
    LONG_MAX,
    LST,
    WEEK_MS,
    B,
    ConfigDef,
    ConfigType,
    D,
    I,
    L,
    S,
)
from dataplane.config.security_table import SECURITY_CONFIGS
from dataplane.config.transform_table import TRANSFORM_CONFIGS
from dataplane.config.usage_table import USAGE_CONFIGS
from tiered.config import ObjectStoreSettings
from wire.compression import MAX_DECOMPRESSED_BYTES

BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("node.id", I, 1, "Id of this broker in its cluster.", minimum=0, read_only=True),
        ConfigDef(
            "cluster.id", S, "", "Cluster id; generated and stored on first start.", read_only=True
        ),
        ConfigDef(
            "advertised.listeners",
            S,
            "",
            "host:port clients are told to use (default: --listen).",
            read_only=True,
        ),
        ConfigDef(
            "controller.quorum.voters",
            S,
            "",
            "The Raft voters of the metadata quorum as id@host:port,... (their controller "
            "listeners). Empty: this broker is a cluster of its own (a single voter).",
            read_only=True,
        ),
        ConfigDef(
            "controller.quorum.voter.listeners",
            S,
            "",
            "The Kafka listeners of the voters as id@host:port,...: where a broker sends its "
            "registration, heartbeats and forwarded admin requests to the active controller.",
            read_only=True,
        ),
        ConfigDef(
            "controller.listener",
            S,
            "",
            "host:port of this broker's Raft listener (metadata quorum traffic). Required "
            "with controller.quorum.voters; a voter's must equal its entry there.",
            read_only=True,
        ),
        ConfigDef(
            "broker.incarnation.id",
            S,
            "",
            "A UUID naming this broker process in its registration (empty: a random one). "
            "The control plane sets it, so that it can have the controller fence exactly this "
            "process the moment it exits (FenceBroker).",
            read_only=True,
        ),
        ConfigDef(
            "controller.quorum.request.timeout.ms",
            I,
            2000,
            "A Raft connection whose sent bytes stay unacknowledged this long is dropped and "
            "opened again (TCP_USER_TIMEOUT): a peer that died behind a network partition is "
            "reached again as soon as it is back, not after the kernel's retransmission backoff.",
            minimum=100,
            read_only=True,
        ),
        ConfigDef(
            "controller.quorum.election.timeout.ms",
            I,
            500,
            "A metadata-quorum voter that hears nothing from a leader for a time drawn from "
            "[this, twice this) starts an election (a voter the control plane tells that the "
            "leader's process exited campaigns at once). Counted in ticks of 50 ms.",
            minimum=100,
            read_only=True,
        ),
        ConfigDef(
            "inter.broker.unacked.timeout.ms",
            I,
            3000,
            "The same bound for a broker's connections to other brokers (replication, the "
            "active controller, transaction markers, transforms); a request that times out "
            "also closes its connection, as Kafka's clients do. 0: the kernel's default "
            "(about 15 minutes).",
            minimum=0,
            read_only=True,
        ),
        ConfigDef(
            "broker.heartbeat.interval.ms",
            I,
            250,
            "How often a broker heartbeats to the active controller.",
            minimum=10,
            read_only=True,
        ),
        ConfigDef(
            "broker.session.timeout.ms",
            I,
            1500,
            "A broker that has not heartbeated for this long is fenced: it leaves every ISR "
            "and loses its leaderships (Kafka's default is 9000; failover takes about this long).",
            minimum=100,
            read_only=True,
        ),
        ConfigDef(
            "replica.lag.time.max.ms",
            L,
            30000,
            "A follower that has not caught up with the leader's log end for this long leaves "
            "the ISR.",
            minimum=1,
        ),
        ConfigDef(
            "replica.fetch.max.bytes",
            I,
            1048576,
            "Bytes a follower asks for per partition in one fetch (at least one batch).",
            minimum=1,
        ),
        ConfigDef(
            "replica.fetch.response.max.bytes",
            I,
            10485760,
            "Bytes a follower asks for in one fetch over all partitions.",
            minimum=1,
        ),
        ConfigDef(
            "replica.fetch.wait.max.ms",
            I,
            500,
            "Longest a follower's fetch waits at the leader for new data.",
            minimum=0,
        ),
        ConfigDef(
            "replica.socket.timeout.ms",
            I,
            10000,
            "How long a follower waits for the answer to a fetch (at least "
            "replica.fetch.wait.max.ms + 1 s) or an OffsetForLeaderEpoch before it closes the "
            "connection and fetches again (Kafka's default is 30000). A leader that died behind "
            "a network partition holds its followers that long at most when their request "
            "was acknowledged by its kernel; unacknowledged bytes are bounded by "
            "inter.broker.unacked.timeout.ms.",
            minimum=1,
        ),
        ConfigDef(
            "replica.fetch.backoff.ms",
            I,
            100,
            "Pause before a follower retries after a failed fetch.",
            minimum=0,
        ),
        ConfigDef(
            "offsets.topic.replication.factor",
            I,
            3,
            "Replication factor of __consumer_offsets (capped at the number of registered "
            "brokers when it is created).",
            minimum=1,
        ),
        ConfigDef(
            "auto.leader.rebalance.enable",
            B,
            True,
            "Give leadership back to a partition's preferred replica once it is in the ISR again.",
        ),
        ConfigDef(
            "leader.imbalance.check.interval.seconds",
            L,
            5,
            "How often the controller looks for partitions led by other than their preferred "
            "replica (Kafka's default is 300).",
            minimum=1,
        ),
        ConfigDef(
            "socket.request.max.bytes",
            I,
            104857600,
            "Largest request frame accepted; larger frames close the connection.",
            minimum=1024,
        ),
        ConfigDef(
            "socket.sendfile.min.bytes",
            I,
            65536,
            "A fetch answer's batches of one partition that add up to at least this many bytes "
            "are sent from the segment file (or the remote tier's chunk cache) with sendfile, "
            "never read into the broker, on listeners without TLS (a TLS listener reads them "
            "back). 0: always read them.",
            minimum=0,
        ),
        ConfigDef(
            "queued.max.request.bytes",
            L,
            256 * 1024 * 1024,
            "Bytes of large request frames (over the 256 KiB read buffer of a connection) the "
            "broker holds at once, from their first byte until they are handled; a connection "
            "whose next frame does not fit stops being read until memory is released "
            "(backpressure). One frame is always let through when nothing else is held, so a "
            "frame up to socket.request.max.bytes is never refused. -1: no limit (Kafka's "
            "default).",
            minimum=-1,
        ),
        ConfigDef(
            "max.connections.per.ip",
            I,
            1000,
            "Connections one client address may hold open; more are closed as they arrive.",
            minimum=1,
        ),
        ConfigDef(
            "queued.max.requests.per.connection",
            I,
            500,
            "Requests read ahead on one connection before the broker stops reading from it.",
            minimum=1,
        ),
        ConfigDef(
            "shutdown.requests.drain.ms",
            L,
            1000,
            "At a stop (after the controlled shutdown), how long requests already read may "
            "take to be answered before every connection closes.",
            minimum=0,
        ),
        ConfigDef(
            "connections.max.idle.ms",
            L,
            600000,
            "Idle connections are closed after this long.",
            minimum=1000,
        ),
        ConfigDef(
            "message.max.bytes",
            I,
            1048588,
            "Largest record batch accepted (topic: max.message.bytes).",
            minimum=0,
        ),
        ConfigDef(
            "message.max.decompressed.bytes",
            I,
            MAX_DECOMPRESSED_BYTES,
            "Most bytes one batch's records may decompress to; a batch that would decompress "
            "to more is refused with MESSAGE_TOO_LARGE, judged from its frames' headers "
            "before it is decompressed (a decompression bomb). Sluice's own; Kafka has none.",
            minimum=1024,
            read_only=True,
        ),
        ConfigDef(
            "log.segment.bytes",
            I,
            1073741824,
            "Segment size before a roll.",
            minimum=14,
            maximum=INT_MAX,
        ),
        ConfigDef("log.roll.ms", L, WEEK_MS, "Segment age before a roll.", minimum=1),
        ConfigDef(
            "log.retention.ms",
            L,
            WEEK_MS,
            "Age after which closed segments are deleted (-1: forever).",
            minimum=-1,
        ),
        ConfigDef(
            "log.retention.bytes",
            L,
            -1,
            "Partition size beyond which old segments are deleted (-1: unlimited).",
            minimum=-1,
        ),
        ConfigDef(
            "log.retention.check.interval.ms",
            L,
            300000,
            "How often retention and compaction run.",
            minimum=1,
        ),
        ConfigDef(
            "log.index.interval.bytes",
            I,
            4096,
            "Bytes between two offset-index entries.",
            minimum=0,
        ),
        ConfigDef(
            "log.cleanup.policy",
            LST,
            ["delete"],
            "delete, compact or both.",
            choices=("compact", "delete"),
        ),
        ConfigDef(
            "log.cleaner.delete.retention.ms",
            L,
            86400000,
            "How long tombstones survive compaction.",
            minimum=0,
        ),
        ConfigDef(
            "log.cleaner.min.compaction.lag.ms",
            L,
            0,
            "Minimum age of a record before compaction may remove it.",
            minimum=0,
        ),
        ConfigDef("log.cleaner.enable", B, True, "Run the log cleaner (compaction)."),
        ConfigDef(
            "log.cleaner.backoff.ms",
            L,
            15000,
            "How often the log cleaner looks for a partition to compact.",
            minimum=1,
        ),
        ConfigDef(
            "log.cleaner.dedupe.buffer.size",
            L,
            134217728,
            "Memory for the cleaner's key-to-offset map; a pass covers as many dirty "
            "segments as fit (always at least one).",
            minimum=1024 * 1024,
        ),
        ConfigDef(
            "log.segment.delete.delay.ms",
            L,
            60000,
            "How long the descriptor of a deleted or replaced segment stays open for "
            "in-flight reads (topic: file.delete.delay.ms).",
            minimum=0,
        ),
        ConfigDef(
            "log.cleaner.min.cleanable.ratio",
            D,
            0.5,
            "Dirty ratio that triggers compaction.",
            minimum=0,
            maximum=1,
        ),
        ConfigDef(
            "log.message.timestamp.type",
            S,
            "CreateTime",
            "CreateTime or LogAppendTime.",
            choices=("CreateTime", "LogAppendTime"),
        ),
        ConfigDef(
            "log.flush.policy",
            S,
            "page_cache",
            "page_cache: acknowledge after write() (survives a process crash, not a power loss); "
            "fsync: acknowledge after fsync, one fsync shared by concurrent writes.",
            choices=("page_cache", "fsync"),
        ),
        ConfigDef(
            "auto.create.topics.enable",
            B,
            False,
            "Create unknown topics on Metadata/Produce "
            "(Kafka's default is true; MSK and Sluice default to false).",
        ),
        ConfigDef(
            "num.partitions",
            I,
            1,
            "Partitions of auto-created topics and of CreateTopics with -1.",
            minimum=1,
        ),
        ConfigDef(
            "default.replication.factor",
            I,
            1,
            "Replication factor of auto-created topics.",
            minimum=1,
        ),
        ConfigDef(
            "max.partitions.per.topic",
            I,
            10000,
            "Largest partition count a topic may have.",
            minimum=1,
        ),
        ConfigDef(
            "min.insync.replicas",
            I,
            1,
            "Replicas that must acknowledge an acks=all write.",
            minimum=1,
        ),
        ConfigDef(
            "unclean.leader.election.enable",
            B,
            False,
            "Allow an out-of-sync replica to become leader.",
        ),
        ConfigDef("delete.topic.enable", B, True, "Allow DeleteTopics."),
        ConfigDef(
            "offsets.topic.num.partitions", I, 50, "Partitions of __consumer_offsets.", minimum=1
        ),
        ConfigDef(
            "offsets.topic.segment.bytes",
            I,
            104857600,
            "Segment size of __consumer_offsets when it is created.",
            minimum=14,
        ),
        ConfigDef(
            "transaction.state.log.num.partitions",
            I,
            50,
            "Partitions of __transaction_state.",
            minimum=1,
        ),
        ConfigDef(
            "transaction.state.log.replication.factor",
            I,
            3,
            "Replication factor of __transaction_state (capped at the cluster's size).",
            minimum=1,
        ),
        ConfigDef(
            "transaction.state.log.segment.bytes",
            I,
            104857600,
            "Segment size of __transaction_state when it is created.",
            minimum=14,
        ),
        ConfigDef(
            "transaction.max.timeout.ms",
            I,
            900000,
            "Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT).",
            minimum=1,
        ),
        ConfigDef(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            I,
            10000,
            "How often the coordinator aborts transactions past their timeout.",
            minimum=1,
        ),
        ConfigDef(
            "transaction.marker.retry.backoff.ms",
            I,
            100,
            "Wait between attempts to write a transaction's markers to a partition leader.",
            minimum=1,
        ),
        ConfigDef(
            "offsets.retention.minutes",
            I,
            10080,
            "Committed offsets of empty groups expire after this.",
            minimum=1,
        ),
        ConfigDef(
            "offset.metadata.max.bytes", I, 4096, "Largest commit metadata string.", minimum=0
        ),
        ConfigDef(
            "group.initial.rebalance.delay.ms",
            I,
            3000,
            "Wait for more members before the first rebalance of an empty group.",
            minimum=0,
        ),
        ConfigDef(
            "group.min.session.timeout.ms",
            I,
            6000,
            "Smallest session timeout a member may ask for.",
            minimum=1,
        ),
        ConfigDef(
            "group.max.session.timeout.ms",
            I,
            1800000,
            "Largest session timeout a member may ask for.",
            minimum=1,
        ),
        ConfigDef("group.max.size", I, INT_MAX, "Most members in one group.", minimum=1),
        ConfigDef(
            "producer.id.expiration.ms",
            I,
            86400000,
            "Idle producer ids are forgotten after this.",
            minimum=1,
        ),
        ConfigDef(
            "max.producer.state.entries",
            I,
            5,
            "Batches remembered per producer and partition for deduplication.",
            minimum=1,
            read_only=True,
        ),
        ConfigDef(
            "producer.id.block.size",
            I,
            1000,
            "Producer ids the controller gives a broker at a time (KIP-730 blocks, as Kafka's "
            "1000); a broker asks for the next block when 90% of its block is handed out.",
            minimum=1,
            maximum=1_000_000,
            read_only=True,
        ),
        ConfigDef(
            "producer.id.wait.ms",
            I,
            10000,
            "Longest an InitProducerId waits for a block of producer ids from the controller "
            "before it answers COORDINATOR_LOAD_IN_PROGRESS (retriable).",
            minimum=1,
            read_only=True,
        ),
        ConfigDef("fetch.max.bytes", I, 57671680, "Largest fetch response.", minimum=0),
        ConfigDef(
            "log.message.timestamp.before.max.ms",
            L,
            LONG_MAX,
            "Largest age of a CreateTime timestamp a produced record may carry.",
            minimum=0,
        ),
        ConfigDef(
            "log.message.timestamp.after.max.ms",
            L,
            3600000,
            "How far in the future a CreateTime timestamp of a produced record may be.",
            minimum=0,
        ),
        ConfigDef(
            "compression.type",
            S,
            "producer",
            "Default compression.type of topics: " + COMPRESSION_DOC,
            choices=COMPRESSION_TYPES,
        ),
        *COMPRESSION_LEVELS,
        # tiered storage (see dataplane/remote/README.md and tiered/README.md)
        ConfigDef(
            "remote.log.storage.system.enable",
            B,
            False,
            "Tiered storage on this broker: topics may set remote.storage.enable "
            "(needs the tiered.s3.* settings).",
            read_only=True,
        ),
        ConfigDef(
            "remote.log.manager.task.interval.ms",
            L,
            5000,
            "How often a leader looks for segments to upload and remote data to expire "
            "(Kafka: 30000).",
            minimum=10,
        ),
        ConfigDef(
            "remote.log.manager.task.retry.backoff.ms",
            L,
            500,
            "First wait after a failed upload or deletion; doubles per failure.",
            minimum=1,
        ),
        ConfigDef(
            "remote.log.manager.task.retry.backoff.max.ms",
            L,
            30000,
            "Longest wait between retries of a failed upload or deletion.",
            minimum=1,
        ),
        ConfigDef(
            "remote.log.manager.copier.thread.pool.size",
            I,
            2,
            "Segments uploaded at once by this broker.",
            minimum=1,
            read_only=True,
        ),
        ConfigDef(
            "remote.log.reader.threads",
            I,
            4,
            "Threads serving fetches from the remote tier.",
            minimum=1,
            read_only=True,
        ),
        ConfigDef(
            "remote.fetch.chunk.bytes",
            I,
            16 * 1024 * 1024,
            "Size of one ranged GET of a remote segment, and of one cached chunk (16 MiB, as "
            "Redpanda's cloud_storage_cache_chunk_size: the embedded S3 serves a 16 MiB GET "
            "at 2-3x the rate of four 4 MiB ones).",
            minimum=64 * 1024,
            read_only=True,
        ),
        ConfigDef(
            "remote.fetch.cache.bytes",
            L,
            256 * 1024 * 1024,
            "Local disk cache of remote chunks (DATA_DIR/.remote-cache), least recently "
            "used evicted first.",
            minimum=0,
            read_only=True,
        ),
        ConfigDef(
            "remote.fetch.cache.admit.fetches",
            I,
            2,
            "A remote chunk is written to the disk cache the Nth time it is fetched (1: every "
            "fetched chunk): a consumer reading history once does not pay for writing a cache "
            "it never reads; a chunk read again soon is cached.",
            minimum=1,
            maximum=16,
            read_only=True,
        ),
        ConfigDef(
            "remote.fetch.memory.bytes",
            L,
            64 * 1024 * 1024,
            "Remote chunks fetched last that are also held in memory (least recently used "
            "dropped first, they stay in the disk cache): the fetches that read them are "
            "answered on the event loop, without a file read or a thread. 0: none.",
            minimum=0,
            read_only=True,
        ),
        ConfigDef(
            "remote.fetch.readahead.chunks",
            I,
            1,
            "Chunks of a remote segment fetched in the background, in parallel, ahead of a "
            "read that ends before them, continuing into the partition's next remote segment "
            "(0: none); needs a cache of at least this many chunks + 1.",
            minimum=0,
            maximum=16,
            read_only=True,
        ),
        ConfigDef(
            "remote.fetch.max.wait.ms",
            I,
            30000,
            "Longest time a fetch waits for the remote tier before it answers "
            "KAFKA_STORAGE_ERROR (retriable).",
            minimum=1,
        ),
        *[
            ConfigDef(
                key,
                ConfigType.PASSWORD if "secret" in key or "token" in key else S,
                "",
                "Object store setting (see tiered/README.md); empty: its default.",
                read_only=True,
            )
            for key in ObjectStoreSettings.keys()  # noqa: SIM118 - a classmethod
        ],
        ConfigDef(
            "log.dir.full.backoff.ms",
            I,
            1000,
            "After a write fails on a full disk, how long every write to that data "
            "directory is refused at once (KAFKA_STORAGE_ERROR): the requests in flight "
            "behind the refused one fail alike instead of arriving out of sequence, as "
            "Kafka's failed log directory goes offline. 0: only the failed write.",
            minimum=0,
            maximum=60_000,
        ),
        ConfigDef(
            "metadata.leader.loss.wait.ms",
            I,
            250,
            "When a partition leader closes this broker's fetch connection (its process "
            "died, or closed it) and is not fenced yet, how long after that a Metadata "
            "request naming it as a leader may wait for its fence, so that a client asking "
            "the instant its own connection reset learns the new leader, not the dead one "
            "(a supervised broker's fence lands within ~30 ms of its exit). 0: answer at once.",
            minimum=0,
            maximum=60_000,
        ),
        ConfigDef(
            "num.recovery.threads.per.data.dir",
            I,
            2,
            "Threads that open (and, after an unclean stop, recover) the partition logs at "
            "start-up, while the broker registers (Kafka's key).",
            minimum=1,
            maximum=64,
            read_only=True,
        ),
        ConfigDef(
            "watchdog.interval.ms",
            I,
            250,
            "How often a serving broker touches the file `watchdog` in its data directory, "
            "from its event loop. The control plane kills a broker whose file stops "
            "changing for its broker_watchdog_timeout_ms (a stopped or hung process), so "
            "that the requests clients have in flight to it fail at once and they move to "
            "the new leaders; a supervisor restarts it. 0: never touched (no watchdog).",
            minimum=0,
            maximum=60_000,
        ),
        ConfigDef(
            "clock.offset.file",
            S,
            "",
            "Fault injection: a file (relative paths: below the data directory) holding "
            "milliseconds, signed, that this broker adds to the system's wall clock, re-read "
            "every clock.offset.poll.ms (dataplane/clock.py); empty: the system's clock.",
        ),
        ConfigDef(
            "clock.offset.poll.ms",
            I,
            1000,
            "How often the clock.offset.file is re-read.",
            minimum=10,
            maximum=60_000,
        ),
        *TRANSFORM_CONFIGS,
        *SECURITY_CONFIGS,
        *USAGE_CONFIGS,
    ]
}
