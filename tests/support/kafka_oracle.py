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

import atexit
import base64
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from .java_client import FETCH_HINT, JAVA_CACHE, REPO_ROOT, java_missing

KAFKA_DIR = JAVA_CACHE / "kafka"
LOG4J_CONFIG = REPO_ROOT / "tools" / "java" / "log4j2-quiet.xml"
STOP_GRACE_SECONDS = 10.0

_live: set[KafkaOracle] = set()


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def random_cluster_id() -> str:
    """A Kafka Uuid string (URL-safe base64 of 16 random bytes), as `kafka-storage random-uuid`."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class KafkaOracle:
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
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        props = self.workdir / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))

        env = {**os.environ, "LOG_DIR": str(self.workdir / "logs")}
        fmt = subprocess.run(
            kafka_java_command(
                "kafka.tools.StorageTool",
                "format",
                "--config",
                str(props),
                "--cluster-id",
                random_cluster_id(),
                "--standalone",
                "--ignore-formatted",
                heap="-Xmx256m",
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{fmt.stdout}\n{fmt.stderr}")

        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            kafka_java_command(
                "kafka.Kafka",
                str(props),
                heap=self.heap,
                jvm_opts=[f"-Dkafka.logs.dir={self.workdir / 'logs'}"],
            ),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent if _die_with_parent_ok() else None,
        )
        _live.add(self)
        try:
            self._wait_ready(started + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin: Any = None
        last_error = "broker port not open"
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"Apache Kafka exited with {self._proc.returncode} during startup:\n"
                    + self.log_tail()
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            if admin is None:
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            try:
                md = admin.list_topics(timeout=2)
            except Exception as e:  # KafkaException while the broker is still fencing
                last_error = str(e)
                time.sleep(0.1)
                continue
            if md.brokers:
                return
            last_error = "metadata lists no brokers yet"
            time.sleep(0.1)
        raise TimeoutError(
            f"Apache Kafka not ready after {self.startup_timeout} s ({last_error}):\n"
            + self.log_tail()
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            else:
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        _live.discard(self)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _die_with_parent_ok() -> bool:
    # PR_SET_PDEATHSIG fires when the creating *thread* exits, so only use it from the main thread.
    return sys.platform == "linux" and threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL the broker if the test process dies without cleanup."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


@atexit.register
def _stop_all() -> None:
    for oracle in list(_live):
        oracle.stop()
