"""The control plane killed with -9 and started again: nothing lost, nothing duplicated."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from controlplane.process import scan_brokers
from proto.sluice.v1 import clusters_pb2 as cpb
from tests.controlplane.harness import ControlPlaneProcess, kill_everything_under, wait_until


def broker_processes(home: Path) -> dict[str, list[int]]:
    return scan_brokers(home / "clusters")


def test_restart_readopts_running_brokers_and_restarts_dead_ones(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plane = ControlPlaneProcess(home).start()
    try:
        cluster = plane.create("keep", brokers=3)
        pids = {b.id: b.pid for b in cluster.brokers}
        ports = {b.id: b.port for b in cluster.brokers}
        plane.kill9()
        assert sorted(p for ps in broker_processes(home).values() for p in ps) == sorted(
            pids.values()
        ), "brokers outlive the control plane"
        os.kill(pids[2], signal.SIGKILL)  # dies while nobody watches

        plane = ControlPlaneProcess(home)
        plane.start()

        def converged() -> cpb.Cluster | None:
            now = plane.get("keep")
            return now if now.state == cpb.CLUSTER_STATE_ACTIVE and now.brokers[2].pid else None

        cluster = wait_until(converged, 30, "cluster ACTIVE again")
        assert {b.id: b.port for b in cluster.brokers} == ports
        assert cluster.brokers[0].pid == pids[0]
        assert cluster.brokers[1].pid == pids[1]
        assert cluster.brokers[2].pid != pids[2]
        assert cluster.brokers[2].restarts == 1
        running = broker_processes(home)
        assert len(running) == 3
        assert all(len(ps) == 1 for ps in running.values()), f"duplicates: {running}"
    finally:
        plane.stop()
        assert kill_everything_under(home) == []
