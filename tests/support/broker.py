"""``BrokerProcess``: one ``sluice-broker`` on 127.0.0.1 (the console script, as the control
plane starts brokers: ``dataplane.entry`` keeps hypothesis, a test dependency that kio would
load, out of the broker process).

Used by tests/conftest.py's fixtures and by SluiceCluster. The process runs in its own session,
is SIGKILLed if the test process dies (Linux, started from the main thread) and is stopped at
interpreter exit if a caller forgot to.
"""

from __future__ import annotations

import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .processes import die_with_parent_preexec, free_port, kill_group, track, untrack

REPO = Path(__file__).resolve().parent.parent.parent
BROKER_SCRIPT = Path(sys.executable).parent / "sluice-broker"


class BrokerProcess:
    """A ``sluice-broker`` subprocess on 127.0.0.1 with a free port (or ``port``)."""

    def __init__(
        self,
        data_dir: Path,
        settings: dict[str, str] | None = None,
        *,
        port: int | None = None,
        file_size_limit: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.file_size_limit = file_size_limit
        """RLIMIT_FSIZE of the process: writes that would grow a file past it fail with
        EFBIG (Python ignores SIGXFSZ), as writes to a full disk fail with ENOSPC."""
        self.port = port or free_port()
        self.settings = {
            "group.initial.rebalance.delay.ms": "0",
            "log.retention.check.interval.ms": "1000",
            **(settings or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            str(BROKER_SCRIPT),
            "--data-dir",
            str(self.data_dir),
            "--listen",
            self.bootstrap,
        ]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 20) -> BrokerProcess:
        self.spawn()
        return self.wait_listening(timeout)

    def spawn(self) -> BrokerProcess:
        """Start the process without waiting (brokers of a cluster listen only once a
        quorum of voters runs, so they are spawned together, then waited for)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=log,
            cwd=REPO,
            start_new_session=True,
            preexec_fn=self._preexec(),
        )
        log.close()
        track(self)
        return self

    def _preexec(self) -> Callable[[], None] | None:
        die = die_with_parent_preexec()
        limit = self.file_size_limit
        if limit is None:
            return die

        def preexec() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            if die is not None:
                die()

        return preexec

    def wait_listening(self, timeout: float = 20) -> BrokerProcess:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not listen within {timeout}s:\n{self.logs()}")

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not stop in time."""
        if self.proc is None or self.proc.poll() is not None:
            untrack(self)
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        finally:
            if self.proc.poll() is not None:
                untrack(self)

    def kill(self) -> None:
        """SIGKILL the broker's process group (``kill -9``)."""
        if self.proc is not None:
            kill_group(self.proc)
        untrack(self)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()
