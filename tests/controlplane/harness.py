"""A real control-plane process on loopback for tests, and helpers around its gRPC API.

Every test module that needs one starts its own (module-scoped fixture) under a temporary
SLUICE_HOME with a free port, and stops it, its brokers and anything else whose command line
names that home, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import clusters_pb2_grpc, controlplane_pb2_grpc, topics_pb2_grpc
from tests.conftest import REPO, free_port

FAST_SETTINGS = {"broker.health.interval.ms": "2000", "billing.schedule.interval.ms": "0"}
"""No hourly billing run (a Spark job) in the middle of a test."""


def processes_under(home: Path) -> list[tuple[int, str]]:
    """(pid, cmdline) of live processes with ``home`` (or a path below it) as an argument."""
    text = str(home)
    found = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            raw = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] in "ZX":
            continue
        args = raw.rstrip(b"\0").decode(errors="replace").split("\0")
        if any(arg == text or arg.startswith(text + "/") for arg in args):
            found.append((int(entry.name), " ".join(args)))
    return found


def kill_everything_under(home: Path) -> list[tuple[int, str]]:
    """SIGKILL every process whose command line names ``home``; returns what was left."""
    left = processes_under(home)
    for pid, _ in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def wait_until(predicate: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class ControlPlaneProcess:
    def __init__(
        self, home: Path, settings: dict[str, str] | None = None, s3_endpoint: str | None = None
    ) -> None:
        self.home = home
        self.s3_endpoint = s3_endpoint
        """``--s3-endpoint`` (an external object store); None: the embedded S3 server."""
        self.port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.settings = {**FAST_SETTINGS, **(settings or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = home / "logs" / "controlplane.log"
        self.channel: grpc.Channel | None = None

    def start(self, timeout: float = 30) -> ControlPlaneProcess:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "controlplane.main",
            "--home",
            str(self.home),
            "--listen",
            self.endpoint,
        ]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        if self.s3_endpoint is not None:
            cmd += ["--s3-endpoint", self.s3_endpoint]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=log, cwd=REPO, start_new_session=True
            )
        wait_until(self._ready, timeout, f"control plane health (log: {self.log_path})")
        self.channel = grpc.insecure_channel(self.endpoint)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"control plane exited {self.proc.returncode}:\n{self.logs()}")
        with grpc.insecure_channel(self.endpoint) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=1
                )
            except grpc.RpcError:
                return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    @property
    def clusters(self) -> Any:
        return clusters_pb2_grpc.ClustersStub(self.channel)

    @property
    def topics(self) -> Any:
        return topics_pb2_grpc.TopicsStub(self.channel)

    @property
    def status(self) -> Any:
        return controlplane_pb2_grpc.ControlPlaneStub(self.channel)

    def get(self, name: str) -> cpb.Cluster:
        return self.clusters.GetCluster(
            cpb.GetClusterRequest(name=name), metadata=self.metadata, timeout=10
        )

    def wait_state(
        self, name: str, state: int = cpb.CLUSTER_STATE_ACTIVE, timeout: float = 120
    ) -> cpb.Cluster:
        """Until the cluster is in ``state`` (ACTIVE: with no operation running); a timeout
        says where it was last seen (the bound is wide: a loaded machine starts brokers
        slowly, and a rolling restart or a scale-in starts several)."""
        last: list[cpb.Cluster] = []

        def reached() -> cpb.Cluster | None:
            cluster = self.get(name)
            last[:] = [cluster]
            if cluster.state == state and not (
                state == cpb.CLUSTER_STATE_ACTIVE and cluster.operation
            ):
                return cluster
            return None

        try:
            return wait_until(reached, timeout, f"cluster {name} {cpb.ClusterState.Name(state)}")
        except AssertionError as exc:
            seen = last[0] if last else None
            where = (
                f"{cpb.ClusterState.Name(seen.state)} {seen.operation!r}: {seen.state_message}"
                if seen is not None
                else "never read"
            )
            raise AssertionError(f"{exc}; last seen {where}") from None

    def wait_gone(self, name: str, timeout: float = 60) -> None:
        def gone() -> bool:
            try:
                self.get(name)
            except grpc.RpcError as exc:
                return bool(exc.code() == grpc.StatusCode.NOT_FOUND)
            return False

        wait_until(gone, timeout, f"cluster {name} deleted")

    def create(self, name: str, brokers: int = 1, **config: str) -> cpb.Cluster:
        self.clusters.CreateCluster(
            cpb.CreateClusterRequest(name=name, broker_count=brokers, config=config),
            metadata=self.metadata,
            timeout=10,
        )
        return self.wait_state(name)

    def kill9(self) -> None:
        """kill -9 the control plane only (its brokers keep running)."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 60) -> int | None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return None


@contextlib.contextmanager
def running_control_plane(
    home: Path, settings: dict[str, str] | None = None, s3_endpoint: str | None = None
) -> Iterator[ControlPlaneProcess]:
    plane = ControlPlaneProcess(home, settings, s3_endpoint).start()
    try:
        yield plane
    finally:
        plane.stop()
        kill_everything_under(home)
