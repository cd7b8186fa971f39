"""End to end, as a user: cloudctl up, a 3-broker cluster, kcat, failures, delete, down.

Only the console scripts and real clients are used (cloudctl, kcat, a confluent-kafka
producer); everything runs on 127.0.0.1 under a temporary SLUICE_HOME, and the test checks
that no process of ours is left at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port
from tests.controlplane.harness import kill_everything_under, processes_under, wait_until

CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")
KCAT = shutil.which("kcat") or shutil.which("kafkacat")

pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make system-deps)")


class User:
    def __init__(self, home: Path) -> None:
        self.home = home
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        self.env = {**env, "SLUICE_HOME": str(home), "SLUICE_ENDPOINT": f"127.0.0.1:{free_port()}"}

    def run(
        self, *args: str, stdin: str = "", check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [CLOUDCTL, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            cwd=REPO,
            timeout=180,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"cloudctl {' '.join(args)}: {done.stderr}"
        return done

    def describe(self, name: str) -> dict:  # type: ignore[type-arg]
        return json.loads(self.run("describe-cluster", name, "-o", "json").stdout)  # type: ignore[no-any-return]


def kcat(*args: str, stdin: str = "") -> str:
    assert KCAT is not None
    done = subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_cloud_flow(tmp_path: Path) -> None:
    home = tmp_path / "sluice"
    user = User(home)
    try:
        user.run("up")
        cluster = json.loads(
            user.run("create-cluster", "e2e", "--brokers", "3", "--wait", "-o", "json").stdout
        )
        assert cluster["state"] == "ACTIVE"
        assert len(cluster["brokers"]) == 3
        user.run(
            "create-topic", "--cluster", "e2e", "events", "--partitions", "3",
            "--replication-factor", "3",
        )  # fmt: skip

        def replicated() -> dict | None:  # type: ignore[type-arg]
            out = user.run("describe-topic", "--cluster", "e2e", "events", "-o", "json").stdout
            topic = json.loads(out)
            parts = topic["partition_details"]
            return topic if parts and all(len(p["isr"]) == 3 for p in parts) else None

        topic = wait_until(replicated, 30, "every replica of 'events' in sync")
        for part in topic["partition_details"]:
            assert sorted(part["replicas"]) == [0, 1, 2]
            assert part["leader"] in (0, 1, 2)

        # a kcat round trip through the bootstrap brokers the control plane hands out
        bootstrap = user.run("get-bootstrap-brokers", "e2e").stdout.strip()
        assert len(bootstrap.split(",")) == 3
        lines = [f"record-{i}" for i in range(100)]
        kcat("-P", "-b", bootstrap, "-t", "events", stdin="\n".join(lines) + "\n")
        got = kcat("-C", "-b", bootstrap, "-t", "events", "-e", "-q").split()
        assert sorted(got) == sorted(lines)

        # kill a broker: the others lead its partitions meanwhile; it is restarted with its data
        victim = cluster["brokers"][0]
        os.kill(victim["pid"], signal.SIGKILL)
        seen = set()

        def healed() -> dict | None:  # type: ignore[type-arg]
            now = user.describe("e2e")
            seen.add(now["state"])
            broker = now["brokers"][0]
            done = now["state"] == "ACTIVE" and broker["restarts"] == 1 and broker["pid"]
            return now if done else None

        cluster = wait_until(healed, 60, "broker 0 healed")
        assert cluster["brokers"][0]["pid"] != victim["pid"]
        assert cluster["brokers"][0]["port"] == victim["port"]
        got = kcat("-C", "-b", bootstrap, "-t", "events", "-e", "-q").split()
        assert sorted(got) == sorted(lines), "the restarted broker kept its data"

        # kill -9 the control plane while a producer runs, start it again
        pids = [b["pid"] for b in cluster["brokers"]]
        producer = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("steady_producer.py")),
                bootstrap,
                "events",
                "6",
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        try:
            time.sleep(1.5)
            plane_pid = int((home / "controlplane.pid").read_text())
            os.kill(plane_pid, signal.SIGKILL)
            wait_until(lambda: not Path(f"/proc/{plane_pid}").exists(), 10, "control plane gone")
            assert "not running" in user.run("status").stdout
            user.run("up")
            cluster = wait_until(
                lambda: (c := user.describe("e2e"))["state"] == "ACTIVE" and c, 60, "re-adopted"
            )
            assert [b["pid"] for b in cluster["brokers"]] == pids, (
                "brokers re-adopted, not restarted"
            )
            out, _ = producer.communicate(timeout=60)
        finally:
            producer.kill()
        result = json.loads(out)
        assert result["failed"] == 0, result
        assert result["acked"] == result["sent"] > 0
        ours = processes_under(home)
        brokers = [p for p in ours if "--data-dir" in p[1] and "tiered.embedded_s3" not in p[1]]
        assert len(brokers) == 3, f"no duplicate brokers: {brokers}"
        s3 = [p for p in ours if "tiered.embedded_s3" in p[1]]
        assert len(s3) == 1, f"the embedded S3 server re-adopted, not duplicated: {s3}"
        got = kcat("-C", "-b", bootstrap, "-t", "events", "-e", "-q").split()
        assert len(got) == len(lines) + result["acked"]

        # delete the cluster, stop everything
        user.run("delete-cluster", "e2e", "--wait")
        assert not (home / "clusters" / f"e2e-{cluster['cluster_id'][:8]}").exists()
        assert json.loads(user.run("list-clusters", "-o", "json").stdout) == {"clusters": []}
        user.run("down")
        assert "not running" in user.run("status").stdout
        assert processes_under(home) == [], "no process of ours is left"
    finally:
        user.run("down", check=False)
        kill_everything_under(home)
