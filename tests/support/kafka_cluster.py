"""A real Apache Kafka KRaft cluster of N nodes on 127.0.0.1: the oracle for replication.

    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    with KafkaCluster(tmp_path, brokers=3) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        kafka.kill(0)       # SIGKILL node 0
        kafka.start(0)      # restart it on the same ports and data

Combined mode: every node is broker and controller (``process.roles=broker,controller``). The
quorum is static: ``controller.quorum.voters`` lists the first three nodes (or node 0 alone
with fewer than three), as Sluice's ``controller.quorum.voters``; every node is formatted with
``kafka-storage format`` and the same cluster id. Nodes beyond the voters are brokers only.

Settings chosen so that failover is comparable with Sluice's defaults (see ``FAILOVER``):
``broker.session.timeout.ms=1500``, ``broker.heartbeat.interval.ms=250``,
``leader.imbalance.check.interval.seconds=5``; internal topics are replicated to
min(3, N) nodes with min.insync.replicas 2 (1 on a one-node cluster). Small machine: heap
512 MiB per node, 2 network and 2 I/O threads, a 16 MiB cleaner buffer, log4j at WARN.

Processes are always stopped on exit (SIGTERM, SIGKILL after 10 s), at interpreter exit if a
caller forgot, and by the kernel if the test process dies (Linux).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

from confluent_kafka.admin import AdminClient

from .kafka_oracle import (
    STOP_GRACE_SECONDS,
    format_storage,
    kafka_version,
    log_tail,
    oracle_available,
    random_cluster_id,
    spawn_kafka,
    wait_kafka_ready,
    write_properties,
)
from .processes import StartStop, free_ports, kill_group, stop_group, track, untrack

# Kafka's defaults are 9000 / 2000 / 300; these match Sluice's defaults.
FAILOVER = {
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "250",
    "leader.imbalance.check.interval.seconds": "5",
}
SMALL_MACHINE = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
    "background.threads": "2",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(16 << 20),
}


class KafkaNode:
    """One node of a KafkaCluster: its ports, directories and process."""

    def __init__(self, node_id: int, workdir: Path, port: int, controller_port: int) -> None:
        self.node_id = node_id
        self.workdir = workdir
        self.port = port
        self.controller_port = controller_port
        self.data_dir = workdir / "data"
        self.props = workdir / "server.properties"
        self.log_path = workdir / "kafka.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self, lines: int = 60) -> str:
        return log_tail(self.log_path, lines)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class KafkaCluster(StartStop):
    """N Apache Kafka nodes (KRaft, combined mode) on 127.0.0.1, started by ``start()`` or
    ``with``. ``kill(i)`` is ``kill -9`` of node i; ``start(i)`` brings it back on the same
    ports and data dir; ``stop()`` stops every node."""

    def __init__(
        self,
        workdir: Path,
        brokers: int = 3,
        *,
        extra_config: dict[str, str] | None = None,
        heap: str = "-Xmx512m",
        startup_timeout: float = 180.0,
    ) -> None:
        self.workdir = Path(workdir)
        self.size = brokers
        self.extra_config = dict(extra_config or {})
        self.heap = heap
        self.startup_timeout = startup_timeout
        self.version = kafka_version()
        self.cluster_id = random_cluster_id()
        self.startup_seconds = 0.0
        ports = free_ports(2 * brokers)
        self.nodes = [
            KafkaNode(i, self.workdir / f"node{i}", ports[2 * i], ports[2 * i + 1])
            for i in range(brokers)
        ]
        self.voters = list(range(min(3, brokers)))
        self._formatted = False

    # ------------------------------------------------------------------ addresses

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, i: int) -> KafkaNode:
        return self.nodes[i]

    broker = node

    def ports(self, i: int) -> tuple[int, int]:
        """(Kafka listener, controller listener) of node i."""
        return self.nodes[i].port, self.nodes[i].controller_port

    def log_dir(self, i: int) -> Path:
        """Node i's ``log.dirs``: partition directories ``<topic>-<partition>/``."""
        return self.nodes[i].data_dir

    def logs(self, i: int, lines: int = 60) -> str:
        return self.nodes[i].logs(lines)

    def server_properties(self, i: int) -> dict[str, str]:
        node = self.nodes[i]
        voters = ",".join(f"{v}@127.0.0.1:{self.nodes[v].controller_port}" for v in self.voters)
        replication = str(min(3, self.size))
        min_isr = "2" if self.size >= 3 else "1"
        listeners = f"PLAINTEXT://127.0.0.1:{node.port}"
        if i in self.voters:
            listeners += f",CONTROLLER://127.0.0.1:{node.controller_port}"
        config = {
            "process.roles": "broker,controller" if i in self.voters else "broker",
            "node.id": str(i),
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(node.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": min_isr,
            **FAILOVER,
            **SMALL_MACHINE,
        }
        config.update(self.extra_config)
        return config

    # ------------------------------------------------------------------ lifecycle

    def start(self, i: int | None = None, *, wait: bool = True) -> None:
        """Start every node (None) or node i; waits until each started node answers Metadata
        listing every node of the cluster (a restarted node: itself registered again)."""
        reason = oracle_available()
        if reason:
            raise RuntimeError(reason)
        started = time.monotonic()
        which = range(self.size) if i is None else [i]
        track(self)
        try:
            if not self._formatted:
                for n in range(self.size):
                    node = self.nodes[n]
                    write_properties(node.props, self.server_properties(n))
                    format_storage(node.props, self.cluster_id, node.workdir)
                self._formatted = True
            for n in which:
                self._spawn(n)
            if wait:
                deadline = started + self.startup_timeout
                for n in which:
                    self.wait_ready(n, deadline)
        except BaseException:
            self.stop()
            raise
        if i is None:
            self.startup_seconds = time.monotonic() - started

    def _spawn(self, i: int) -> None:
        node = self.nodes[i]
        if node.alive():
            raise RuntimeError(f"Kafka node {i} is already running")
        node._close_log()
        node._log = open(node.log_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        node.proc = spawn_kafka(node.props, node.workdir, node._log, heap=self.heap)

    def wait_ready(self, i: int, deadline: float) -> None:
        node = self.nodes[i]
        assert node.proc is not None
        wait_kafka_ready(
            node.proc,
            node.port,
            deadline,
            what=f"Apache Kafka node {i}",
            log_path=node.log_path,
            brokers=self.size,
        )
        # Metadata from this node lists the others; make sure it is registered (unfenced) too.
        self._wait_listed(i, deadline)

    def _wait_listed(self, i: int, deadline: float) -> None:
        admin = AdminClient({"bootstrap.servers": self.nodes[i].bootstrap, "log_level": 0})
        while time.monotonic() < deadline:
            try:
                if i in admin.list_topics(timeout=2).brokers:
                    return
            except Exception:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"Kafka node {i} not registered:\n{self.logs(i)}")

    def kill(self, i: int) -> None:
        """SIGKILL node i (its whole process group)."""
        node = self.nodes[i]
        if node.proc is not None:
            kill_group(node.proc)
        node._close_log()

    def stop(self, i: int | None = None) -> None:
        """Stop every node (None) or node i: SIGTERM (all at once), SIGKILL after 10 s."""
        which = [self.nodes[n] for n in (range(self.size) if i is None else [i])]
        for node in which:
            if node.alive():
                assert node.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for node in which:
            if node.proc is not None:
                stop_group(node.proc, max(0.1, deadline - time.monotonic()))
            node._close_log()
        if i is None:
            untrack(self)

    def alive(self, i: int) -> bool:
        return self.nodes[i].alive()
