"""A real Apache Kafka 4.x broker (KRaft combined mode, one node) to compare Sluice against.

The jars come from ``tools/fetch-java-deps.sh`` (``make java-deps``) in ``.cache/java/kafka``.

    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    with KafkaOracle(tmp_path) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})

Everything listens on 127.0.0.1 on free ports; data and logs live under the given directory. The
broker process is always stopped on exit (SIGTERM, then SIGKILL after 10 s), and at interpreter
exit if a caller forgot to.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from confluent_kafka.admin import AdminClient

from .java_client import FETCH_HINT, JAVA_CACHE, REPO_ROOT, java_missing
from .processes import (
    StartStop,
    die_with_parent_preexec,
    free_ports,
    stop_group,
    track,
    untrack,
)

KAFKA_DIR = JAVA_CACHE / "kafka"
LOG4J_CONFIG = REPO_ROOT / "tools" / "java" / "log4j2-quiet.xml"
STOP_GRACE_SECONDS = 10.0


def oracle_available() -> str | None:
    """Skip reason when the Apache Kafka oracle cannot run here, else None."""
    reason = java_missing()
    if reason:
        return reason
    if not any(KAFKA_DIR.glob("kafka_2.13-*.jar")):
        return f"Apache Kafka jars missing from {KAFKA_DIR}; {FETCH_HINT}"
    return None


def kafka_version() -> str | None:
    """The Apache Kafka version in .cache/java (e.g. "4.3.1"), or None."""
    jars = sorted(KAFKA_DIR.glob("kafka_2.13-*.jar"))
    return jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar") if jars else None


def kafka_java_command(
    main_class: str, *args: str, heap: str = "-Xmx1g", jvm_opts: Sequence[str] = ()
) -> list[str]:
    """``java ... <main_class> args`` on the Kafka classpath, logging quietly (WARN). Also runs the
    perf tools: ``org.apache.kafka.tools.ProducerPerformance`` / ``ConsumerPerformance``."""
    return [
        shutil.which("java") or "java",
        heap,
        *jvm_opts,
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        "-cp",
        str(KAFKA_DIR / "*"),
        main_class,
        *args,
    ]


def random_cluster_id() -> str:
    """A Kafka Uuid string (URL-safe base64 of 16 random bytes), as `kafka-storage random-uuid`."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def kafka_env(workdir: Path) -> dict[str, str]:
    return {**os.environ, "LOG_DIR": str(workdir / "logs")}


def write_properties(path: Path, config: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))


def format_storage(props: Path, cluster_id: str, workdir: Path, *extra: str) -> None:
    """``kafka-storage format`` of the node described by ``props`` (idempotent)."""
    fmt = subprocess.run(
        kafka_java_command(
            "kafka.tools.StorageTool",
            "format",
            "--config",
            str(props),
            "--cluster-id",
            cluster_id,
            *extra,
            "--ignore-formatted",
            heap="-Xmx256m",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
        env=kafka_env(workdir),
    )
    if fmt.returncode != 0:
        raise RuntimeError(f"kafka-storage format failed:\n{fmt.stdout}\n{fmt.stderr}")


def spawn_kafka(
    props: Path, workdir: Path, log: IO[bytes], *, heap: str
) -> subprocess.Popen[bytes]:
    """``kafka.Kafka props`` in its own session, output to ``log``, killed if we die."""
    return subprocess.Popen(
        kafka_java_command(
            "kafka.Kafka",
            str(props),
            heap=heap,
            jvm_opts=[f"-Dkafka.logs.dir={workdir / 'logs'}"],
        ),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=kafka_env(workdir),
        start_new_session=True,
        preexec_fn=die_with_parent_preexec(),
    )


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_kafka_ready(
    proc: subprocess.Popen[bytes],
    port: int,
    deadline: float,
    *,
    what: str,
    log_path: Path,
    brokers: int = 1,
) -> None:
    """Until the broker on ``port`` answers Metadata listing at least ``brokers`` brokers;
    raises with the log's tail if the process exits or the deadline passes."""
    admin: Any = None
    last_error = "broker port not open"
    started = time.monotonic()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{what} exited with {proc.returncode} during startup:\n" + log_tail(log_path)
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
        except OSError:
            time.sleep(0.1)
            continue
        if admin is None:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})
        try:
            md = admin.list_topics(timeout=2)
        except Exception as e:  # KafkaException while the broker is still fencing
            last_error = str(e)
            time.sleep(0.1)
            continue
        if len(md.brokers) >= brokers:
            return
        last_error = f"metadata lists brokers {sorted(md.brokers)}, want {brokers}"
        time.sleep(0.1)
    raise TimeoutError(
        f"{what} not ready after {time.monotonic() - started:.0f} s ({last_error}):\n"
        + log_tail(log_path)
    )


class KafkaOracle(StartStop):
    """Context manager running one Apache Kafka broker+controller on 127.0.0.1.

    ``bootstrap`` is "127.0.0.1:PORT"; ``startup_seconds`` is how long format+start took.
    ``extra_config`` adds or overrides server.properties entries.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        extra_config: dict[str, str] | None = None,
        startup_timeout: float = 120.0,
        heap: str = "-Xmx1g",
    ) -> None:
        self.workdir = Path(workdir)
        self.extra_config = dict(extra_config or {})
        self.startup_timeout = startup_timeout
        self.heap = heap
        self.port = 0
        self.controller_port = 0
        self.startup_seconds = 0.0
        self.version = kafka_version()
        self.log_path = self.workdir / "kafka.out"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def server_properties(self) -> dict[str, str]:
        config = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        }
        config.update(self.extra_config)
        return config

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        reason = oracle_available()
        if reason:
            raise RuntimeError(reason)
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = free_ports(2)
        props = self.workdir / "server.properties"
        write_properties(props, self.server_properties())
        format_storage(props, random_cluster_id(), self.workdir, "--standalone")

        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._proc = spawn_kafka(props, self.workdir, self._log, heap=self.heap)
        track(self)
        try:
            self._wait_ready(started + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started

    def _wait_ready(self, deadline: float) -> None:
        assert self._proc is not None
        wait_kafka_ready(
            self._proc, self.port, deadline, what="Apache Kafka", log_path=self.log_path
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc, STOP_GRACE_SECONDS)
        if self._log is not None:
            self._log.close()
            self._log = None
        untrack(self)

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)
