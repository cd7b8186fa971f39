"""Control-plane benchmark: create-cluster to ACTIVE, heal time, restart, idle CPU.

    python -m bench.bench_controlplane [--runs N] [--idle-seconds S] [--no-write]

Starts a control plane (``python -m controlplane.main``) under a temporary SLUICE_HOME on a
free loopback port and measures, over its gRPC API:

- create-cluster of 3 brokers to ACTIVE (every broker answers ApiVersions), median of N runs
  (target: at most 3 s), and delete-cluster until the cluster is gone;
- heal: a broker killed with -9 until the cluster is ACTIVE again (target: within 2 s);
- control-plane restart: kill -9 and start again until the cluster is ACTIVE (re-adopted);
- idle CPU of the control plane with one 3-broker cluster (target: under 2 %).

Prints a table and replaces the "Control plane" section of bench/RESULTS.md (between its
markers) unless --no-write. Everything it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.common import replace_section
from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import clusters_pb2_grpc

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- BEGIN controlplane (bench/bench_controlplane.py) -->"
END = "<!-- END controlplane -->"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def wait(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(step)


class Plane:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.endpoint = f"127.0.0.1:{free_port()}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.channel: grpc.Channel | None = None

    def start(self) -> float:
        """Start; returns seconds until gRPC health says SERVING."""
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.home / "logs" / "controlplane.log", "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "controlplane.main",
                    "--home",
                    str(self.home),
                    "--listen",
                    self.endpoint,
                ],
                stdout=log,
                stderr=log,
                cwd=REPO,
                start_new_session=True,
            )

        def serving() -> bool:
            # a fresh channel per probe: a channel that failed to connect backs off for seconds
            with grpc.insecure_channel(self.endpoint) as channel:
                try:
                    reply = health_pb2_grpc.HealthStub(channel).Check(
                        health_pb2.HealthCheckRequest(), timeout=1
                    )
                except grpc.RpcError:
                    return False
            return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

        wait(serving, 30, "control plane health")
        self.channel = grpc.insecure_channel(self.endpoint)
        self.stub = clusters_pb2_grpc.ClustersStub(self.channel)
        self.md = (("authorization", f"Bearer {(self.home / 'token').read_text().strip()}"),)
        return time.monotonic() - started

    def get(self, name: str) -> pb.Cluster | None:
        try:
            return self.stub.GetCluster(
                pb.GetClusterRequest(name=name), metadata=self.md, timeout=5
            )
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def active(self, name: str) -> pb.Cluster | None:
        cluster = self.get(name)
        if cluster is None or cluster.state != pb.CLUSTER_STATE_ACTIVE or cluster.operation:
            return None
        return cluster

    def create(self, name: str, brokers: int = 3) -> float:
        started = time.monotonic()
        self.stub.CreateCluster(
            pb.CreateClusterRequest(name=name, broker_count=brokers), metadata=self.md, timeout=10
        )
        wait(lambda: self.active(name), 60, f"{name} ACTIVE")
        return time.monotonic() - started

    def delete(self, name: str) -> float:
        started = time.monotonic()
        self.stub.DeleteCluster(pb.DeleteClusterRequest(name=name), metadata=self.md, timeout=10)
        wait(lambda: self.get(name) is None, 60, f"{name} deleted")
        return time.monotonic() - started

    def kill9(self) -> None:
        assert self.proc is not None
        if self.channel is not None:
            self.channel.close()
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def kill_under(home: Path) -> None:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            args = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a == str(home).encode() or a.startswith(str(home).encode() + b"/") for a in args):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def fmt(values: list[float]) -> str:
    return (
        f"{statistics.median(values):.2f} s "
        f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
    )


def measure(runs: int, idle_seconds: float) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="sluice-bench-cp-"))
    plane = Plane(home)
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    try:
        out["startup"] = plane.start()
        plane.create("warmup-0")  # first broker start pays for cold page cache
        plane.delete("warmup-0")
        creates, deletes = [], []
        for i in range(runs):
            creates.append(plane.create(f"bench-{i}"))
            deletes.append(plane.delete(f"bench-{i}"))
            print(f"  run {i + 1}: create {creates[-1]:.2f} s, delete {deletes[-1]:.2f} s")
        out["create"], out["delete"] = creates, deletes

        plane.create("steady")
        heals = []
        for i in range(runs):
            cluster = plane.active("steady")
            assert cluster is not None
            victim = cluster.brokers[i % 3]
            started = time.monotonic()
            os.kill(victim.pid, signal.SIGKILL)

            def healed(victim: pb.Broker = victim) -> bool:
                now = plane.active("steady")
                return now is not None and now.brokers[victim.id].pid not in (0, victim.pid)

            wait(healed, 30, "heal")
            heals.append(time.monotonic() - started)
            print(f"  heal {i + 1} (broker {victim.id}): {heals[-1]:.2f} s")
            time.sleep(0.5)
        out["heal"] = heals

        time.sleep(2)
        assert plane.proc is not None
        pid = plane.proc.pid
        before, started = cpu_seconds(pid), time.monotonic()
        time.sleep(idle_seconds)
        out["idle_cpu"] = (cpu_seconds(pid) - before) / (time.monotonic() - started) * 100
        out["idle_seconds"] = idle_seconds
        print(f"  idle CPU: {out['idle_cpu']:.2f} %")

        pids = [b.pid for b in (plane.active("steady") or pb.Cluster()).brokers]
        plane.kill9()
        restarted = Plane(home)
        restarted.endpoint = plane.endpoint
        started = time.monotonic()
        restarted.start()
        cluster = wait(lambda: restarted.active("steady"), 30, "re-adoption")
        out["restart"] = time.monotonic() - started
        out["readopted"] = [b.pid for b in cluster.brokers] == pids
        print(f"  control-plane restart to ACTIVE: {out['restart']:.2f} s")
        plane = restarted
        plane.delete("steady")
    finally:
        plane.stop()
        kill_under(home)
    out["load_after"] = os.getloadavg()
    return out


def render(result: dict[str, Any]) -> str:
    create_median = statistics.median(result["create"])
    heal_max = max(result["heal"])
    readopted = "yes" if result["readopted"] else "NO"
    rows = [
        ("create-cluster, 3 brokers, to ACTIVE", fmt(result["create"]), "median <= 3 s",
         "PASS" if create_median <= 3 else "FAIL"),
        ("delete-cluster, 3 brokers, until gone", fmt(result["delete"]), "-", "-"),
        ("heal: broker killed -9 until ACTIVE again", fmt(result["heal"]), "each <= 2 s",
         "PASS" if heal_max <= 2 else "FAIL"),
        ("control plane idle CPU, one 3-broker cluster",
         f"{result['idle_cpu']:.2f} % over {result['idle_seconds']:.0f} s", "< 2 %",
         "PASS" if result["idle_cpu"] < 2 else "FAIL"),
        ("control plane start to gRPC SERVING", f"{result['startup']:.2f} s", "-", "-"),
        ("control plane kill -9 + start until the cluster is ACTIVE",
         f"{result['restart']:.2f} s (brokers re-adopted: {readopted})",
         "-", "-"),
    ]  # fmt: skip
    lines = [
        BEGIN,
        "## Control plane (issue 3)",
        "",
        f"`python -m bench.bench_controlplane` on {platform.node()} ({os.cpu_count()} cores), "
        f"{time.strftime('%Y-%m-%d %H:%M')}; load average before "
        f"{result['load_before'][0]:.1f}, after {result['load_after'][0]:.1f} (a shared machine: "
        "other processes compete for the 2 cores).",
        "",
        "| measurement | result | target | verdict |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "Create: CreateCluster until GetCluster says ACTIVE, i.e. three `sluice-broker` processes "
        "started in parallel and each answering a Kafka ApiVersions request (a broker process "
        "alone needs about 0.5 s to start, mostly Python imports). Heal: from SIGKILL of one "
        "broker to ACTIVE with a new broker process answering (exit seen at once through a "
        "pidfd). Idle CPU: utime+stime of the control-plane process over the interval.",
        END,
    ]
    return "\n".join(lines) + "\n"


def write(section: str) -> None:
    replace_section(RESULTS, BEGIN, END, section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    args = parser.parse_args()
    result = measure(args.runs, args.idle_seconds)
    section = render(result)
    print(section)
    if not args.no_write:
        write(section)
        print(f"updated {RESULTS}")


if __name__ == "__main__":
    main()
