"""Control-plane settings and request validation (names, broker counts, broker configs).

Every limit has a number and a key. Settings come from ``$SLUICE_HOME/controlplane.properties``
(``key=value`` lines, optional) and ``python -m controlplane.main --set key=value``.

Broker settings in CreateCluster / UpdateClusterConfig are validated with the broker's own
definitions (``dataplane.config.BROKER_CONFIGS``): the control plane imports that one table so
a bad key or value is refused before a process starts, never after. Keys the control plane
owns (``node.id``, ``cluster.id``, ``advertised.listeners``, the ``controller.*`` quorum keys)
and read-only keys are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

from controlplane.errors import BadRequest, InvalidBrokerCount, InvalidConfig, InvalidName
from dataplane.config import BROKER_CONFIGS
from wire.errors import InvalidConfig as BrokerInvalidConfig

# As MSK: 1-64 characters, ASCII letters, digits and hyphens. The first character may not be a
# hyphen (a name like "-x" would read as an option on every command line).
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")

MANAGED_BROKER_KEYS = frozenset(
    {
        "node.id",
        "cluster.id",
        "advertised.listeners",
        "controller.quorum.voters",
        "controller.quorum.voter.listeners",
        "controller.listener",
    }
)
"""Broker settings the control plane sets itself for every broker."""
ZERO_ALLOWED = frozenset(
    {"billing.schedule.interval.ms", "billing.schedule.offset.ms", "broker.watchdog.timeout.ms"}
)
"""Integer settings where 0 means something (no schedule; on the hour; no watchdog)."""


@dataclass(frozen=True)
class Settings:
    """Control-plane limits and timings; attribute ``a_b_c`` is key ``a.b.c``."""

    cluster_max_brokers: int = 15
    """Most brokers in one cluster (MSK's default quota is 30 per account; a laptop is smaller)."""
    cluster_default_brokers: int = 3
    """Brokers of a cluster created without a broker count."""
    cluster_max_tags: int = 50
    """Most tags on one cluster (MSK's limit per resource)."""
    configuration_max_revisions: int = 100
    """Most revisions of one configuration (``configurations.py``)."""
    broker_host: str = "127.0.0.1"
    """Address brokers listen on and advertise."""
    broker_hosts: str = ""
    """Addresses of hosts of their own for brokers, comma-separated: broker N (ids count from
    0) listens on and advertises the (N mod count)-th, counted from 0 (network namespaces,
    say); empty: ``broker.host``."""
    broker_exec_prefix: str = ""
    """A command each broker runs under, split as a shell would (no shell runs it), with
    ``{broker_id}`` and ``{host}`` replaced: ``ip netns exec ns{broker_id}`` runs broker N in
    that network namespace, ``taskset -c {broker_id}`` pins it; empty: none."""
    broker_ready_timeout_ms: int = 30_000
    """How long a starting broker may take to answer ApiVersions and show itself registered and
    unfenced in its metadata before the start fails."""
    broker_stop_timeout_ms: int = 15_000
    """How long a stopping broker gets after SIGTERM before SIGKILL."""
    broker_start_attempts: int = 3
    """Failed starts of one broker before a CREATING or UPDATING cluster turns FAILED."""
    broker_restart_backoff_max_ms: int = 10_000
    """Longest wait between restarts of a broker that keeps crashing (doubles from 100 ms)."""
    supervisor_interval_ms: int = 500
    """How often every broker is checked (process exits are also noticed at once via pidfd)."""
    broker_exit_fencing_enable: bool = True
    """When a broker's process exits unasked, have the controller fence it at once
    (FenceBroker) instead of after ``broker.session.timeout.ms``; false: wait for the
    session, as Kafka and MSK do (benchmarks compare the two)."""
    broker_watchdog_timeout_ms: int = 1_500
    """A running broker whose watchdog file (``watchdog`` in its data directory, touched
    every ``watchdog.interval.ms`` by its event loop) has not changed for this long, none
    of whose threads used CPU, ran or waited on the disk for the last half of it, is
    stopped or hung: it is fenced and killed, so that the requests clients
    have in flight to it fail at once and they move to the new leaders, and then
    restarted. As long as ``broker.session.timeout.ms`` (the controller fences it then
    anyway); 0: no watchdog (only the ApiVersions probes below)."""
    broker_health_interval_ms: int = 5_000
    """How often a running broker is probed with ApiVersions."""
    broker_health_failures: int = 3
    """Consecutive failed probes after which a running but unresponsive broker is restarted."""
    kafka_request_timeout_ms: int = 15_000
    """Timeout of one Kafka admin request sent by the Topics API."""
    reassignment_timeout_ms: int = 600_000
    """How long a scale-in waits for its partition reassignments before it fails."""
    reassignment_poll_ms: int = 500
    """How often a scale-in polls ListPartitionReassignments."""
    s3_start_timeout_ms: int = 30_000
    """Time the embedded S3 server gets to open its port (it reloads its data first)."""
    s3_restart_backoff_max_ms: int = 10_000
    """Longest wait between restarts of an embedded S3 server that keeps crashing."""
    s3_health_interval_ms: int = 5_000
    """How often the embedded S3 server is probed (a HEAD request)."""
    s3_health_failures: int = 3
    """Consecutive failed probes after which an unresponsive embedded S3 server is restarted."""
    s3_request_timeout_ms: int = 5_000
    """Read timeout of the control plane's own S3 requests (bucket create/delete, probes)."""
    broker_retention_check_interval_ms: int = 5_000
    """``log.retention.check.interval.ms`` given to brokers whose cluster config does not set
    it (the broker's own default is Kafka's 300000): local retention, e.g. a tiered topic's
    ``local.retention.bytes``, acts within seconds. A check walks the partitions' segment
    lists in memory; every 5 s costs nothing a laptop notices."""
    broker_reboot_timeout_ms: int = 300_000
    """How long a reboot (RebootBroker) waits for the ISR of every partition to be full, before
    it stops the broker and after it restarts it; past it the reboot fails."""
    topic_default_replication_factor: int = 3
    """Replication factor of a topic created without one, capped by the cluster's broker count
    (MSK's default: 3); ignored when the cluster's config sets default.replication.factor."""
    cluster_max_private_endpoints: int = 10
    """Most private endpoints of one cluster (each is a listener on every broker)."""
    private_endpoint_network: str = "127.0.16.0/20"
    """The loopback network private endpoints get their addresses from, one each (4094
    addresses by default; it must lie in 127.0.0.0/8)."""
    logs_max_lines: int = 100_000
    """Most lines of history one ReadLogs call sends (the newest; the others are counted)."""
    logs_follow_interval_ms: int = 200
    """How often a followed log (ReadLogs with follow) is checked for new lines."""
    metering_interval_ms: int = 10_000
    """How often the control plane meters every cluster's provisioned capacity: each pass
    sends the minute buckets completed since the last one it sent (``metering.py``)."""
    metering_catchup_max_ms: int = 31 * 24 * 3_600_000
    """Most history one pass meters for a cluster after the control plane was down (31
    days): older buckets are skipped, with a warning that names them."""
    metering_batch_events: int = 500
    """Most usage events (minute buckets) one Produce request to a usage topic carries."""
    billing_schedule_interval_ms: int = 3_600_000
    """How often the billing pipeline runs (``billing.py``); 0: only on demand."""
    billing_schedule_offset_ms: int = 300_000
    """How long after each multiple of the interval a scheduled run starts (hourly runs at
    :05, once the last hour's usage has been written)."""
    billing_run_timeout_ms: int = 10_800_000
    """How long a billing run may take before its job is stopped and the run FAILED."""
    billing_output: str = ""
    """Where the pipeline writes its tables and invoices: a directory, or an s3://BUCKET/PREFIX
    URI of the object store; empty: ``$SLUICE_HOME/billing``."""
    billing_rate_card: str = ""
    """The rate card (TOML) invoices are priced with; empty: billing's packaged MSK card."""
    spark_master: str = "local[*]"
    """The Spark master the billing pipeline runs on (any master: the job is unchanged)."""
    billing_usage_recent_max_records: int = 1_000_000
    """Most usage records GetUsage reads per cluster after the pipeline's offsets."""
    replicator_max_count: int = 20
    """Most replicators of one control plane (each runs MirrorMaker 2 in its own JVM)."""
    replicator_heap_mb: int = 512
    """Java heap (-Xmx, MiB) of one replicator's MirrorMaker process."""
    replicator_java: str = ""
    """The java binary replicators run; empty: ``$JAVA_HOME/bin/java``, else java on PATH."""
    replicator_classpath: str = ""
    """Directory of the Kafka Connect / MirrorMaker jars; empty: the checkout's
    ``.cache/java/connect`` (``make connect-deps``)."""
    replicator_check_interval_ms: int = 2_000
    """How often every replicator's process and MirrorMaker's status topic are checked
    (an exit is also noticed at once through a pidfd)."""
    replicator_restart_backoff_max_ms: int = 30_000
    """Longest wait between restarts of a replicator that keeps failing (doubles from 1 s)."""
    replicator_stop_timeout_ms: int = 15_000
    """How long a stopping MirrorMaker process gets after SIGTERM before SIGKILL."""
    replicator_refresh_interval_ms: int = 10_000
    """How often MirrorMaker looks for new topics and groups on the source
    (``refresh.topics.interval.seconds``, ``refresh.groups.interval.seconds``)."""
    replicator_sync_interval_ms: int = 5_000
    """How often MirrorMaker emits checkpoints, syncs group offsets and topic configs
    (``emit.checkpoints.interval.seconds``, ``sync.group.offsets.interval.seconds``,
    ``sync.topic.configs.interval.seconds``)."""
    replicator_offset_flush_interval_ms: int = 5_000
    """How often MirrorMaker commits its source offsets (Connect's
    ``offset.flush.interval.ms``): the replicated position the lag is computed from."""
    schema_registry_listen: str = "127.0.0.1:0"
    """HOST:PORT of the schema registry's HTTP server (``schema_registry/``); port 0: the
    port it had last time when free, else any free one."""
    schema_registry_max_request_bytes: int = 1_048_576
    """Largest request body the registry reads (a schema must fit one Kafka record)."""
    schema_registry_max_header_bytes: int = 16_384
    """Largest request line and headers the registry reads."""
    schema_registry_max_connections: int = 256
    """Most HTTP connections the registry serves at once (more are answered 503)."""
    schema_registry_idle_timeout_ms: int = 60_000
    """How long an idle (or stalled) registry connection is kept open."""
    schema_registry_auth_cache_ms: int = 60_000
    """How long a checked basic-auth login to a secured cluster's registry is trusted."""
    schema_registry_protoc_timeout_ms: int = 10_000
    """Time protoc gets to compile one Protobuf schema."""

    def host_for(self, broker_id: int) -> str:
        """The address broker ``broker_id`` listens on and advertises."""
        hosts = [h.strip() for h in self.broker_hosts.split(",") if h.strip()]
        return hosts[broker_id % len(hosts)] if hosts else self.broker_host

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name.replace("_", ".") for f in fields(cls)]

    @classmethod
    def from_properties(cls, raw: Mapping[str, str]) -> Settings:
        """Build from ``key=value`` strings; unknown keys and bad values raise InvalidConfig."""
        known = {f.name.replace("_", "."): f for f in fields(cls)}
        values: dict[str, object] = {}
        for key, text in raw.items():
            spec = known.get(key)
            if spec is None:
                raise InvalidConfig(
                    f"unknown control-plane setting {key!r} (known: {', '.join(sorted(known))})",
                    key=key,
                )
            if spec.type in (int, "int"):
                try:
                    number = int(text)
                except ValueError:
                    raise InvalidConfig(
                        f"invalid value {text!r} for {key}: expected an integer", key=key
                    ) from None
                least = 0 if key in ZERO_ALLOWED else 1
                if number < least:
                    raise InvalidConfig(
                        f"invalid value {text!r} for {key}: must be >= {least}", key=key
                    )
                values[spec.name] = number
            elif spec.type in (bool, "bool"):
                if text.strip().lower() not in ("true", "false"):
                    raise InvalidConfig(
                        f"invalid value {text!r} for {key}: expected true or false", key=key
                    )
                values[spec.name] = text.strip().lower() == "true"
            else:
                values[spec.name] = text
        return cls(**values)  # type: ignore[arg-type]


def validate_cluster_name(name: str) -> None:
    if not CLUSTER_NAME.match(name):
        raise InvalidName(
            f"invalid cluster name {name!r}: use 1-64 ASCII letters, digits and hyphens, "
            "not starting with a hyphen",
            cluster=name,
        )


TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256


def validate_tags(tags: Mapping[str, str], settings: Settings, cluster: str) -> dict[str, str]:
    """Tags as MSK takes them: at most ``cluster.max.tags``; keys of 1-128 characters, not
    starting with ``aws:``; values of at most 256 characters."""
    if len(tags) > settings.cluster_max_tags:
        raise BadRequest(
            f"{len(tags)} tags: a cluster has at most {settings.cluster_max_tags} "
            "(cluster.max.tags)",
            cluster=cluster,
        )
    for key, value in tags.items():
        if not 1 <= len(key) <= TAG_KEY_MAX or key.lower().startswith("aws:"):
            raise BadRequest(
                f"tag key {key[:TAG_KEY_MAX]!r}: 1-{TAG_KEY_MAX} characters, not starting "
                "with 'aws:'",
                cluster=cluster,
                key=key[:TAG_KEY_MAX],
            )
        if len(value) > TAG_VALUE_MAX:
            raise BadRequest(
                f"tag {key!r}: a value of at most {TAG_VALUE_MAX} characters",
                cluster=cluster,
                key=key,
            )
    return dict(sorted(tags.items()))


def validate_broker_count(count: int, settings: Settings, cluster: str = "") -> None:
    if not 1 <= count <= settings.cluster_max_brokers:
        raise InvalidBrokerCount(
            f"invalid broker count {count}: must be between 1 and "
            f"{settings.cluster_max_brokers} (cluster.max.brokers)",
            cluster=cluster,
        )


def validate_broker_config(config: Mapping[str, str], cluster: str = "") -> dict[str, str]:
    """Check broker settings against the broker's definitions; returns them normalised.
    Errors name ``cluster`` (the cluster being created or changed) and the key."""
    out: dict[str, str] = {}
    for raw_key, value in config.items():
        key = raw_key.strip()
        definition = BROKER_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfig(f"unknown broker config {key!r}", cluster=cluster, key=key)
        if key in MANAGED_BROKER_KEYS or definition.read_only:
            raise InvalidConfig(
                f"broker config {key!r} is set by the control plane and cannot be changed",
                cluster=cluster,
                key=key,
            )
        try:
            parsed = definition.parse(value)
        except BrokerInvalidConfig as exc:
            raise InvalidConfig(
                exc.message or f"invalid value {value!r} for {key}", cluster=cluster, key=key
            ) from None
        out[key] = definition.render(parsed)
    return out


def validate_config_keys(keys: Iterable[str], cluster: str = "") -> list[str]:
    """Check keys to reset (UpdateClusterConfig.remove)."""
    out = []
    for raw_key in keys:
        key = raw_key.strip()
        if key not in BROKER_CONFIGS:
            raise InvalidConfig(f"unknown broker config {key!r}", cluster=cluster, key=key)
        out.append(key)
    return out
