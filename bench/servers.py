"""The systems under measurement, each started by the bench on free loopback ports.

``SluiceServer``   ``python -m dataplane.main`` with its own data dir (optionally under
                   cProfile, see ``bench/profiled_broker.py``)
``KafkaServer``    Apache Kafka, KRaft single node, through tests/support/kafka_oracle.py
``RedisServer``    Debian's redis-server, appendonly yes, appendfsync everysec
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench import frames
from bench.common import REPO, cpu_seconds, free_port, python, spawn, stop_process, tool, wait_port
from tests.support.kafka_oracle import KafkaOracle, oracle_available


class SluiceServer:
    name = "Sluice"

    def __init__(self, workdir: Path, *, profile_dir: Path | None = None) -> None:
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.port = free_port()
        self.profile_dir = profile_dir
        self.proc: subprocess.Popen[Any] | None = None
        self.log_path = workdir / "broker.log"
        self.settings = {
            "auto.create.topics.enable": "true",
            "group.initial.rebalance.delay.ms": "0",
        }

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> SluiceServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        main = ["-m", "bench.profiled_broker"] if self.profile_dir else ["-m", "dataplane.main"]
        cmd = [python(), *main, "--data-dir", str(self.data_dir), "--listen", self.bootstrap]
        cmd += ["--log-level", "WARNING"]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        env = dict(os.environ)
        if self.profile_dir:
            env["SLUICE_BENCH_PROFILE_DIR"] = str(self.profile_dir)
        with open(self.log_path, "ab") as log:
            self.proc = spawn(cmd, stdout=log, stderr=log, cwd=REPO, env=env)
        try:
            wait_port(self.port, self.proc, 30, "sluice broker")
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"{exc}: {self.log_tail()}") from None
        return self

    def log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def create_topic(self, topic: str) -> None:
        if not _admin_create(self.bootstrap, topic):
            code = frames.metadata_auto_create(self.bootstrap, topic)
            if code != 0:
                raise RuntimeError(f"auto-creating {topic} on Sluice: error code {code}")

    # Profiling: SIGUSR1 starts cProfile, SIGUSR2 stops it and dumps to PROFILE_DIR/NAME.prof.
    def profile_start(self, name: str) -> None:
        assert self.profile_dir is not None
        (self.profile_dir / "next-name").write_text(name)
        os.kill(self.pid, signal.SIGUSR1)
        time.sleep(0.2)

    def profile_stop(self, name: str) -> Path:
        assert self.profile_dir is not None
        target = self.profile_dir / f"{name}.prof"
        os.kill(self.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not target.exists():
            time.sleep(0.1)
        time.sleep(0.3)
        return target

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, grace=60 if self.profile_dir else 15)


class KafkaServer:
    name = "Kafka"

    def __init__(self, workdir: Path) -> None:
        self.oracle = KafkaOracle(workdir, startup_timeout=180, heap="-Xmx2g")

    @staticmethod
    def unavailable() -> str | None:
        return oracle_available()

    @property
    def version(self) -> str:
        return self.oracle.version or "?"

    @property
    def bootstrap(self) -> str:
        return self.oracle.bootstrap

    @property
    def pid(self) -> int:
        proc = self.oracle._proc
        assert proc is not None
        return proc.pid

    def start(self) -> KafkaServer:
        self.oracle.start()
        return self

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def alive(self) -> bool:
        proc = self.oracle._proc
        return proc is not None and proc.poll() is None

    def create_topic(self, topic: str) -> None:
        if not _admin_create(self.bootstrap, topic):
            raise RuntimeError(f"CreateTopics {topic} failed on Kafka")

    def log_tail(self, n: int = 15) -> str:
        return self.oracle.log_tail(n)

    def stop(self) -> None:
        self.oracle.stop()


def _admin_create(bootstrap: str, topic: str) -> bool:
    """CreateTopics through confluent-kafka's AdminClient; False if the broker refuses."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1)], request_timeout=15
    )
    try:
        futures[topic].result(timeout=20)
    except Exception as exc:
        return "TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc)
    # Wait until the topic shows up in metadata with a leader.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            md = admin.list_topics(topic=topic, timeout=5)
            t = md.topics.get(topic)
            if t is not None and t.error is None and t.partitions and t.partitions[0].leader >= 0:
                return True
        time.sleep(0.1)
    return False


class RedisServer:
    name = "Redis"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[Any] | None = None

    @staticmethod
    def unavailable() -> str | None:
        if not tool("redis-server") or not tool("redis-benchmark"):
            return "redis-server or redis-benchmark missing (tools/ensure-system-deps.sh)"
        return None

    def start(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [
            tool("redis-server") or "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.workdir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
        ]
        with open(self.workdir / "redis.log", "ab") as log:
            self.proc = spawn(cmd, stdout=log, stderr=log)
        wait_port(self.port, self.proc, 20, "redis-server")
        return self

    def cpu(self) -> float:
        assert self.proc is not None
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
