"""A replicator's MirrorMaker 2 process: its files, its command line, finding it again.

Each replicator runs Apache Kafka's ``org.apache.kafka.connect.mirror.MirrorMaker`` in
dedicated mode (``mm2.properties --clusters TARGET``: only the herder that writes to the
target runs) from the jars of ``make connect-deps`` (``.cache/java/connect``, or
``replicator.classpath``), with ``java`` from ``replicator.java``, ``$JAVA_HOME`` or PATH.

Files (``$SLUICE_HOME/replicators/NAME/``, 0700; every file 0600):

- ``mm2.properties``, written by :func:`mm2_properties` before each start: the two clusters
  (aliases, bootstrap servers, how they log in), the flow ``SOURCE->TARGET`` with its topic
  and group expressions, the replication policy, replication factors that the target can
  hold, and the control plane's intervals;
- ``credentials.properties``, for a secured cluster of this control plane only: the JAAS
  line of its internal user (MirrorMaker reaches the brokers' internal SASL_PLAINTEXT
  listener, as the control plane does). ``mm2.properties`` refers to it through Kafka's
  ``FileConfigProvider`` (``${file:PATH:KEY}``), so the password is on no command line, in
  no log, and not even in the connector configs MirrorMaker stores in the target's
  ``mm2-configs.ALIAS.internal`` topic;
- ``log4j2.properties``: MirrorMaker's own INFO lines, everything else WARN, to stdout.

Its output goes to ``$SLUICE_HOME/logs/replicators/NAME.log``. The process runs in its own
session (it outlives a control plane killed with -9, as brokers do) and is found again by
its command line: the MirrorMaker class and this replicator's ``mm2.properties``
(:func:`scan`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controlplane.process import BrokerProcess, is_zombie, log_time, read_cmdline
from wire.sasl import SaslCredentials

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
REPLICATORS_DIR = "replicators"
LOG_DIR = Path("logs") / "replicators"
PROPERTIES = "mm2.properties"
CREDENTIALS = "credentials.properties"
LOG4J = "log4j2.properties"
MIN_JAVA = 17
REQUIRED_JARS = ("connect-runtime-", "connect-mirror-", "connect-mirror-client-")
DEFAULT_CLASSPATH = Path(__file__).resolve().parents[1] / ".cache" / "java" / "connect"
"""The checkout's jars (``make connect-deps``, tools/fetch-connect.sh)."""
FETCH_HINT = "run `make connect-deps` (tools/fetch-connect.sh), or set replicator.classpath"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
INTERNAL_TOPICS = (r".*[\-\.]internal", r".*\.replica", r"__.*")
"""MirrorMaker's default ``topics.exclude``: topics it never copies."""
LOG4J_TEXT = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %c{1}: %m%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.mirror.name = org.apache.kafka.connect.mirror
logger.mirror.level = INFO
logger.scheduler.name = org.apache.kafka.connect.mirror.Scheduler
logger.scheduler.level = WARN
"""
"""MirrorMaker's INFO lines (flows, connectors, topics found), the rest at WARN. The
scheduler's line per sync (every few seconds) is left out."""


@dataclass(frozen=True)
class ClusterAccess:
    """How MirrorMaker reaches one cluster."""

    bootstrap: str
    """host:port[,host:port...]"""
    credentials: SaslCredentials | None = None
    """The SASL login (over SASL_PLAINTEXT); None: PLAINTEXT."""


@dataclass(frozen=True)
class Flow:
    """What one replicator's MirrorMaker copies, and how."""

    source_alias: str
    target_alias: str
    source: ClusterAccess
    target: ClusterAccess
    topics: str
    groups: str
    sync_group_offsets: bool
    identical_names: bool
    replication_factor: int
    """Of the topics it creates on the target (capped by the target's broker count)."""
    source_replication_factor: int
    """Of the topic it creates on the source (``mm2-offset-syncs.TARGET.internal``); -1:
    the source brokers' default (an external source)."""
    refresh_s: int
    sync_s: int
    offset_flush_ms: int


def directory(home: Path, name: str) -> Path:
    return home / REPLICATORS_DIR / name


def log_path(home: Path, name: str) -> Path:
    return home / LOG_DIR / f"{name}.log"


def target_topic(alias: str, topic: str, identical: bool) -> str:
    """The name a source topic gets on the target (DefaultReplicationPolicy: ALIAS.TOPIC)."""
    return topic if identical else f"{alias}.{topic}"


def replicated(topic: str, topics: re.Pattern[str], target_alias: str, identical: bool) -> bool:
    """Whether MirrorMaker copies ``topic``: it matches ``topics`` (as a whole, as Java's
    ``Pattern.matches``), is no internal topic, and (prefixed names) is no copy made from
    the target itself (MirrorMaker's cycle detection)."""
    if not topics.fullmatch(topic) or any(re.fullmatch(p, topic) for p in INTERNAL_TOPICS):
        return False
    return identical or not topic.startswith(f"{target_alias}.")


def seconds(ms: int) -> int:
    """A setting in ms as MirrorMaker's whole seconds (at least 1)."""
    return max(1, (ms + 999) // 1000)


def jaas(credentials: SaslCredentials) -> str:
    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f"username={quoted(credentials.username)} password={quoted(credentials.password)};"
    )


def mm2_properties(flow: Flow, credentials_file: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(mm2.properties, credentials.properties): the second holds the JAAS lines the first
    refers to (empty when neither cluster is secured)."""
    src, dst = flow.source_alias, flow.target_alias
    rf = str(flow.replication_factor)
    props = {
        "clusters": f"{src}, {dst}",
        f"{src}.bootstrap.servers": flow.source.bootstrap,
        f"{dst}.bootstrap.servers": flow.target.bootstrap,
        f"{src}->{dst}.enabled": "true",
        f"{dst}->{src}.enabled": "false",
        f"{src}->{dst}.topics": flow.topics,
        f"{src}->{dst}.groups": flow.groups,
        f"{src}->{dst}.sync.group.offsets.enabled": str(flow.sync_group_offsets).lower(),
        "replication.policy.class": IDENTITY_POLICY if flow.identical_names else DEFAULT_POLICY,
        "replication.factor": rf,
        "checkpoints.topic.replication.factor": rf,
        "heartbeats.topic.replication.factor": rf,
        "offset-syncs.topic.replication.factor": str(flow.source_replication_factor),
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        "config.storage.replication.factor": rf,
        # the topics' ACLs are not copied (as MSK Replicator): a Sluice cluster's are its own
        "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": str(flow.refresh_s),
        "refresh.groups.interval.seconds": str(flow.refresh_s),
        "emit.checkpoints.interval.seconds": str(flow.sync_s),
        "sync.group.offsets.interval.seconds": str(flow.sync_s),
        "sync.topic.configs.interval.seconds": str(flow.sync_s),
        "emit.heartbeats.interval.seconds": str(flow.sync_s),
        # an offset sync for every replicated record (MirrorMaker keeps some of them)
        "offset.lag.max": "0",
        # the connectors are found through their ServiceLoader manifests: no class scan
        "plugin.discovery": "service_load",
        # Connect's worker settings of the herder writing to the target: prefixed by its alias
        f"{dst}.offset.flush.interval.ms": str(flow.offset_flush_ms),
    }
    secrets: dict[str, str] = {}
    for alias, access in ((src, flow.source), (dst, flow.target)):
        if access.credentials is None:
            continue
        key = f"{alias}.jaas"
        secrets[key] = jaas(access.credentials)
        props[f"{alias}.security.protocol"] = "SASL_PLAINTEXT"
        props[f"{alias}.sasl.mechanism"] = access.credentials.mechanism.value
        props[f"{alias}.sasl.jaas.config"] = f"${{file:{credentials_file}:{key}}}"
    if secrets:
        props["config.providers"] = "file"
        props["config.providers.file.class"] = (
            "org.apache.kafka.common.config.provider.FileConfigProvider"
        )
    return props, secrets


def properties_text(props: Mapping[str, str]) -> str:
    """Java properties: ``key=value`` lines, with the characters Java's parser treats
    specially escaped (``\\``, ``:``, ``=``, ``#``, ``!`` and leading spaces in keys)."""

    def escape(text: str, key: bool) -> str:
        out = text.replace("\\", "\\\\").replace("\n", "\\n")
        if key:
            out = out.replace(" ", "\\ ").replace("=", "\\=").replace(":", "\\:")
        return out.replace("#", "\\#").replace("!", "\\!")

    return "".join(f"{escape(k, True)}={escape(v, False)}\n" for k, v in props.items())


def write_private(path: Path, text: str) -> None:
    """A 0600 file (from its creation), replaced atomically."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def write_files(home: Path, name: str, flow: Flow) -> Path:
    """Write the replicator's files; the path of its mm2.properties."""
    where = directory(home, name)
    credentials = where / CREDENTIALS
    props, secrets = mm2_properties(flow, credentials)
    if secrets:
        write_private(credentials, properties_text(secrets))
    else:
        credentials.unlink(missing_ok=True)
    write_private(where / LOG4J, LOG4J_TEXT)
    path = where / PROPERTIES
    write_private(path, properties_text(props))
    return path


def java_binary(configured: str) -> str | None:
    """``replicator.java``, else ``$JAVA_HOME/bin/java``, else java on PATH; None: none."""
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


@functools.cache
def java_major(java: str) -> int | None:
    """The major version ``java -version`` reports (None when it does not run)."""
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def classpath_dir(configured: str) -> Path:
    return Path(configured).expanduser() if configured else DEFAULT_CLASSPATH


def missing(java_setting: str, classpath_setting: str) -> str | None:
    """Why MirrorMaker cannot run here (None: it can): no Java 17+, or no jars."""
    java = java_binary(java_setting)
    if java is None:
        where = f"replicator.java ({java_setting})" if java_setting else "$JAVA_HOME or PATH"
        return f"replicators run MirrorMaker 2 on Java {MIN_JAVA}+, and {where} has no java"
    major = java_major(java)
    if major is None or major < MIN_JAVA:
        return f"{java} is Java {major or '?'}; replicators need Java {MIN_JAVA}+"
    jars = classpath_dir(classpath_setting)
    names = [p.name for p in jars.glob("*.jar")] if jars.is_dir() else []
    absent = [j.rstrip("-") for j in REQUIRED_JARS if not any(n.startswith(j) for n in names)]
    if absent:
        return f"the MirrorMaker jars ({', '.join(absent)}) are not in {jars}: {FETCH_HINT}"
    return None


def command(
    java: str, classpath: Path, properties: Path, target_alias: str, heap_mb: int
) -> list[str]:
    """``java … MirrorMaker mm2.properties --clusters TARGET`` (the properties file comes
    first: ``--clusters`` takes every argument after it)."""
    return [
        java,
        f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={properties.parent / LOG4J}",
        "-cp",
        f"{classpath}/*",
        MAIN_CLASS,
        str(properties),
        "--clusters",
        target_alias,
    ]


def runs_mirror_maker(cmdline: list[str] | None, properties: str) -> bool:
    return cmdline is not None and MAIN_CLASS in cmdline and properties in cmdline


class MirrorMakerProcess(BrokerProcess):
    """A replicator's process: started by us, or adopted after a control-plane restart
    (``data_dir`` is its mm2.properties)."""

    kind = "MirrorMaker"

    @classmethod
    def launch(cls, argv: list[str], properties: Path, log: Path) -> MirrorMakerProcess:
        """Start ``argv`` in its own session, its output appended to ``log`` after a line
        that records the start."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(f"{log_time()} --- starting: {' '.join(argv)}\n".encode())
            out.flush()
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                close_fds=True,
            )
        return cls(popen.pid, str(properties), popen)

    def identifies(self) -> bool:
        return runs_mirror_maker(read_cmdline(self.pid), self.data_dir) and not is_zombie(self.pid)


def scan(home: Path) -> dict[str, list[int]]:
    """Live MirrorMaker processes of this home's replicators: name -> pids."""
    prefix = str(home / REPLICATORS_DIR) + "/"
    found: dict[str, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        cmdline = read_cmdline(pid)
        if cmdline is None or MAIN_CLASS not in cmdline:
            continue
        for arg in cmdline:
            if arg.startswith(prefix) and arg.endswith("/" + PROPERTIES) and not is_zombie(pid):
                name = arg.removeprefix(prefix).removesuffix("/" + PROPERTIES)
                found.setdefault(name, []).append(pid)
    return found
