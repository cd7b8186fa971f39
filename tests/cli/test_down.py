"""`cloudctl down` stops what the control plane reports (ControlPlane.Shutdown): itself, the
embedded S3 server and every broker, waiting for exactly those processes; it scans /proc
only when the control plane does not answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.daemon import Process, start_time, wait_for_exit
from proto.sluice.v1 import controlplane_pb2 as spb
from sluice_client.client import Client
from tests.cli.conftest import Cloud
from tests.conftest import free_port
from tests.controlplane.harness import kill_everything_under, processes_under, wait_until


def decoy(home: Path) -> subprocess.Popen[bytes]:
    """A process that looks like a broker on a data directory of ``home`` (what the /proc
    scan looks for) but that no control plane started."""
    data_dir = home / "clusters" / "decoy-0000" / "broker-0"
    code = "import time; time.sleep(120)"
    return subprocess.Popen(
        [sys.executable, "-c", code, "dataplane.main", "--data-dir", str(data_dir)]
    )


def gone(pid: int) -> bool:
    return start_time(pid) is None


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    home = tmp_path / "home"
    running = Cloud(home, f"127.0.0.1:{free_port()}")
    up = running.run("up")
    assert up.returncode == 0, up.stderr
    try:
        yield running
    finally:
        running.run("down")
        kill_everything_under(home)


def reported(cloud: Cloud) -> list[spb.ManagedProcess]:
    token = (cloud.home / "token").read_text().strip()
    with Client(cloud.endpoint, token) as client:
        status = client.call(client.control_plane.GetStatus, spb.GetStatusRequest(), 10)
    return list(status.processes)


def test_down_stops_exactly_the_processes_the_control_plane_reports(cloud: Cloud) -> None:
    created = cloud.run("create-cluster", "downs", "--brokers", "2", "--wait")
    assert created.returncode == 0, created.stderr

    def with_s3() -> list[spb.ManagedProcess] | None:
        found = reported(cloud)
        kinds = [p.kind for p in found]
        return found if spb.PROCESS_KIND_EMBEDDED_S3 in kinds else None

    processes = wait_until(with_s3, 30, "the embedded S3 server running")
    assert sorted((p.kind, p.cluster, p.broker_id) for p in processes) == [
        (spb.PROCESS_KIND_CONTROL_PLANE, "", 0),
        (spb.PROCESS_KIND_EMBEDDED_S3, "", 0),
        (spb.PROCESS_KIND_BROKER, "downs", 0),
        (spb.PROCESS_KIND_BROKER, "downs", 1),
    ]
    pids = {p.pid for p in processes}
    assert pids == {pid for pid, _ in processes_under(cloud.home)}, "the list is complete"

    stranger = decoy(cloud.home)
    try:
        down = cloud.run("down")
        assert down.returncode == 0, down.stderr
        assert down.stdout == "control plane stopped\n"
        control_plane = next(p.pid for p in processes if p.kind == spb.PROCESS_KIND_CONTROL_PLANE)
        assert down.stderr == (
            f"stopping the control plane (pid {control_plane}), 2 broker(s) and the embedded S3 "
            "server\n"
        ), "no note: nothing had to be killed"
        assert [pid for pid in pids if not gone(pid)] == []
        assert stranger.poll() is None, "down stopped a process the control plane did not name"
    finally:
        stranger.kill()
        stranger.wait()
    assert processes_under(cloud.home) == []
    assert not (cloud.home / "endpoint").exists()
    assert cloud.run("down").stdout == f"control plane is not running (home {cloud.home})\n"


def test_down_scans_for_processes_when_the_control_plane_does_not_answer(cloud: Cloud) -> None:
    """A control plane that does not answer (stopped with SIGSTOP): down SIGKILLs it after
    --timeout and stops what runs on the home's directories, decoy included."""
    wait_until(
        lambda: spb.PROCESS_KIND_EMBEDDED_S3 in [p.kind for p in reported(cloud)],
        30,
        "the embedded S3 server running",
    )
    pid = int((cloud.home / "controlplane.pid").read_text())
    stranger = decoy(cloud.home)
    os.kill(pid, signal.SIGSTOP)
    try:
        down = cloud.run("down", "--timeout", "2")
        assert down.returncode == 0, down.stderr
        assert "the control plane does not answer" in down.stderr
        assert "the control plane did not stop in 2s; killed it" in down.stderr
        assert down.stdout == "control plane stopped\n"
        assert stranger.wait(10) is not None, "the /proc scan stops what looks like a broker"
    finally:
        stranger.kill()
        stranger.wait()
        if not gone(pid):
            os.kill(pid, signal.SIGCONT)
    wait_until(lambda: processes_under(cloud.home) == [], 15, "nothing left running")


def test_wait_for_exit_kills_exactly_what_outlives_the_timeout() -> None:
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
         "signal.SIG_IGN); print(flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert stubborn.stdout is not None
        stubborn.stdout.readline()  # its SIGTERM handler is set
        started = {p.pid: start_time(p.pid) for p in (stubborn, quick, bystander)}
        assert None not in started.values()
        processes = [
            Process(stubborn.pid, started[stubborn.pid] or 0, "stubborn"),
            Process(quick.pid, started[quick.pid] or 0, "quick"),
            # the bystander's pid with another start time: a pid reused, so not it
            Process(bystander.pid, (started[bystander.pid] or 0) + 1, "reused"),
        ]
        os.kill(stubborn.pid, signal.SIGTERM)
        killed = wait_for_exit(processes, 1.5)
        assert [p.label for p in killed] == ["stubborn"]
        assert stubborn.wait(5) == -signal.SIGKILL
        assert quick.wait(5) == 0
        assert bystander.poll() is None, "a process that is not the one reported is left alone"
    finally:
        for proc in (stubborn, quick, bystander):
            proc.kill()
            proc.wait()
        if stubborn.stdout is not None:
            stubborn.stdout.close()
