"""`cloudctl up` run several times at once starts exactly one control plane, and every caller
names the pid that runs; `--wait` survives a control-plane restart; a wrong SLUICE_TOKEN is
reported as the environment's token."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cli.conftest import Cloud, running_cloud
from tests.conftest import free_port
from tests.controlplane.harness import kill_everything_under, processes_under


def control_planes(home: Path) -> list[int]:
    return [pid for pid, cmd in processes_under(home) if "controlplane.main" in cmd]


def test_concurrent_up_starts_one_control_plane(tmp_path: Path) -> None:
    cloud = Cloud(tmp_path / "home", f"127.0.0.1:{free_port()}")
    try:
        with ThreadPoolExecutor(4) as pool:
            runs = list(pool.map(lambda _: cloud.run("up", "-o", "json"), range(4)))
        assert [r.returncode for r in runs] == [0] * 4, [r.stderr for r in runs]
        answers = [json.loads(r.stdout) for r in runs]
        pids = {a["pid"] for a in answers}
        assert len(pids) == 1, f"every caller names the same pid: {answers}"
        assert sorted(a["started"] for a in answers) == [False, False, False, True]
        assert control_planes(cloud.home) == list(pids), "exactly one control plane runs"
        assert int((cloud.home / "controlplane.pid").read_text()) in pids
        table = cloud.run("up")
        assert f"(pid {pids.pop()}, home {cloud.home})" in table.stdout
    finally:
        cloud.run("down")
        kill_everything_under(cloud.home)


def test_wait_survives_a_control_plane_restart(tmp_path: Path) -> None:
    with running_cloud(tmp_path / "home") as cloud:
        made = cloud.run("create-cluster", "survive", "--brokers", "1", "--wait")
        assert made.returncode == 0, made.stderr
        waiting = subprocess.Popen(
            cloud.command(
                "update-cluster-config", "survive", "--config", "log.retention.ms=3600000",
                "--wait", "--timeout", "120", "-o", "json",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cloud.environ,
        )  # fmt: skip
        # killed once the change is accepted (its operation runs), while the command waits
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            shown = cloud.invoke("describe-cluster", "survive", "-o", "json")
            if json.loads(shown.stdout)["operation"] == "UPDATE_CONFIG":
                break
            time.sleep(0.05)
        pid = int((cloud.home / "controlplane.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        time.sleep(2)
        up = cloud.run("up")
        assert up.returncode == 0, up.stderr
        out, err = waiting.communicate(timeout=150)
        assert waiting.returncode == 0, err
        assert "the control plane does not answer" in err
        assert "the control plane answers again" in err
        assert json.loads(out)["config"] == {"log.retention.ms": "3600000"}
        assert json.loads(out)["state"] == "ACTIVE"

        wrong = cloud.run("list-clusters", env_extra={"SLUICE_TOKEN": "wrong"})
        assert wrong.returncode == 1
        assert wrong.stderr.startswith(
            "cloudctl: error: the control plane refused the API token from the SLUICE_TOKEN "
            "environment variable (unset SLUICE_TOKEN to use the token file "
        )
