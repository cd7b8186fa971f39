"""`make demo` run twice, as a new user would: the demo module (`python -m controlplane.demo`,
what `make demo` runs once the venv is installed; the install step itself is not run here, as
it would reinstall the shared .venv) against a fresh SLUICE_HOME. The first run creates
everything; the second reuses the control plane, the cluster and its topics, says what it
found, adds its records and keeps the first run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.conftest import REPO, free_port
from tests.controlplane.harness import kill_everything_under

CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")


def test_the_demo_twice_keeps_the_first_runs_records(tmp_path: Path) -> None:
    home = tmp_path / "sluice"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env |= {"SLUICE_HOME": str(home), "SLUICE_ENDPOINT": f"127.0.0.1:{free_port()}"}

    def demo() -> str:
        done = subprocess.run(
            [sys.executable, "-m", "controlplane.demo"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=400,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout + done.stderr

    try:
        first = demo()
        assert "cluster sluice-demo: not found; creating it" in first
        assert "demo-events holds 10,000 records (1 run(s)" in first
        assert "read all 20,000 back from offset 0" in first
        assert "list-clusters" not in first, "no command printed without its output"
        lines = [ln for ln in first.splitlines() if ln.startswith("[")]
        assert len(lines) >= 15, "a line per step, with the elapsed time"

        second = demo()
        assert "control plane already running" in second
        assert "cluster sluice-demo: found it (ACTIVE, 3 brokers" in second
        assert "reusing it and its data" in second
        assert "topic demo-events: found it with 10,000 records" in second
        assert "demo-events holds 20,000 records (2 run(s)" in second
        assert "topic demo-history: found it with 20,000 records; not adding more" in second

        cluster = json.loads(
            subprocess.run(
                [CLOUDCTL, "describe-cluster", "sluice-demo", "-o", "json"],
                capture_output=True, text=True, env=env, check=True,
            ).stdout
        )  # fmt: skip
        consumer = Consumer(
            {"bootstrap.servers": cluster["bootstrap_brokers"], "group.id": "demo-test"}
        )
        runs: dict[str, int] = {}
        try:
            for p in range(3):
                low, high = consumer.get_watermark_offsets(TopicPartition("demo-events", p), 10)
                assert low == 0
                runs[str(p)] = high
        finally:
            consumer.close()
        assert sum(runs.values()) == 20_000, "the first run's records are still there"
        ops = json.loads(
            subprocess.run(
                [CLOUDCTL, "list-operations", "sluice-demo", "-o", "json"],
                capture_output=True, text=True, env=env, check=True,
            ).stdout
        )["operations"]  # fmt: skip
        assert [o["type"] for o in ops] == ["CREATE"], "one cluster, never deleted"
    finally:
        subprocess.run([CLOUDCTL, "down"], env=env, capture_output=True, timeout=120, check=False)
        kill_everything_under(home)
