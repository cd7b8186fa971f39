"""Fixtures: the real `cloudctl` console script and an in-process runner for its commands."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.client import Env
from cli.main import cloudctl
from tests.conftest import REPO, free_port
from tests.controlplane.harness import kill_everything_under

CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")
CTRL_C_DEFAULT = (
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
)
"""A prefix that runs a command with Ctrl-C (SIGINT) at its default, as a terminal does. A
suite started in the background by a non-interactive shell (``make test &``) hands every
process it starts SIGINT ignored (POSIX), and Python then installs no KeyboardInterrupt
handler: a test of what Ctrl-C does would wait forever."""


@dataclass
class Cloud:
    """A control plane started by `cloudctl up` in a temporary SLUICE_HOME."""

    home: Path
    endpoint: str

    @property
    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        return {**env, "SLUICE_HOME": str(self.home), "SLUICE_ENDPOINT": self.endpoint}

    def command(self, *args: str) -> list[str]:
        return [CLOUDCTL, *args]

    def interruptible(self, *args: str) -> list[str]:
        """``command``, with Ctrl-C as a terminal has it (``CTRL_C_DEFAULT``)."""
        return [*CTRL_C_DEFAULT, CLOUDCTL, *args]

    def run(
        self,
        *args: str,
        stdin: str = "",
        timeout: float = 120,
        env_extra: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The console script, as a user runs it."""
        return subprocess.run(
            [CLOUDCTL, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**self.environ, **(env_extra or {})},
            cwd=REPO,
            timeout=timeout,
            check=False,
        )

    def invoke(self, *args: str, stdin: str | None = None) -> Result:
        """The same commands in-process (fast)."""
        return CliRunner().invoke(
            cloudctl, list(args), obj=Env(self.home, self.endpoint), input=stdin
        )


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    with running_cloud(tmp_path_factory.mktemp("cloudctl-home")) as running:
        yield running


SHARED_CLUSTER = "shared"
"""The 3-broker cluster of :func:`shared_cloud`."""


@pytest.fixture(scope="session")
def shared_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    """One control plane and one 3-broker cluster (``shared``) for every module that only
    needs a cluster to work in (test_formats, test_groups): started once per session. Each
    module uses its own topics and groups."""
    with running_cloud(tmp_path_factory.mktemp("cloudctl-shared")) as running:
        made = running.run("create-cluster", SHARED_CLUSTER, "--brokers", "3", "--wait")
        assert made.returncode == 0, made.stderr
        yield running


@contextlib.contextmanager
def running_cloud(home: Path) -> Iterator[Cloud]:
    """`cloudctl up` in ``home`` until the block ends, then `cloudctl down`; fails when a
    process of ``home`` is left behind."""
    running = Cloud(home, f"127.0.0.1:{free_port()}")
    settings = home / "controlplane.properties"
    if not settings.exists():  # no hourly billing run (Spark) in the middle of other tests
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        settings.write_text("billing.schedule.interval.ms=0\n")
    up = running.run("up")
    assert up.returncode == 0, up.stderr
    try:
        yield running
    finally:
        down = running.run("down")
        left = kill_everything_under(home)
        assert down.returncode == 0, down.stderr
        assert left == [], f"`cloudctl down` left processes behind: {left}"
