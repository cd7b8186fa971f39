"""Identifying broker processes by their data directory (re-adoption after a restart)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from controlplane.process import broker_command, data_dir_of, runs_broker, scan_brokers
from tests.controlplane.harness import wait_until


def test_data_dir_of_broker_command_lines() -> None:
    cmd = broker_command("/h/clusters/a/broker-0", "127.0.0.1:9000", {"node.id": "0"})
    assert data_dir_of(cmd) == "/h/clusters/a/broker-0"
    assert "--set" in cmd
    assert "node.id=0" in cmd
    assert data_dir_of(["python", "-m", "dataplane.main", "--data-dir", "/d"]) == "/d"
    assert data_dir_of(["python", "other.py", "--data-dir", "/d"]) is None
    assert data_dir_of(["python", "-m", "dataplane.main"]) is None


def test_scan_finds_processes_below_a_directory(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "clusters" / "a" / "broker-0")
    # a stand-in with a broker's command line shape (sleeps instead of serving)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            "dataplane.main",
            "--data-dir",
            data_dir,
        ]
    )
    try:
        # Popen returns once exec has begun; /proc/<pid>/cmdline is empty until it is done
        found = wait_until(lambda: scan_brokers(tmp_path / "clusters"), 5, "the stand-in")
        assert found == {data_dir: [proc.pid]}
        assert runs_broker(proc.pid, data_dir)
        assert not runs_broker(proc.pid, data_dir + "x")
        assert scan_brokers(tmp_path / "elsewhere") == {}
    finally:
        proc.kill()
        proc.wait()
    assert not runs_broker(proc.pid, data_dir)
