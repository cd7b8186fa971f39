"""MinIO, a real S3-compatible server (Go, not moto), as a child process on loopback: for the
tiered-storage tests against it (``make test-minio``) and the benchmarks' ``--store minio``.

The binary is built from the Go module proxy by ``make minio`` (tools/build-minio.sh) into
``.cache/minio/minio``. Its root credentials go to the child's environment, never to its
command line.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.processes import (
    StartStop,
    die_with_parent_preexec,
    free_ports,
    kill_group,
    stop_group,
    track,
    untrack,
)
from tiered.access_keys import AccessKey

REPO = Path(__file__).resolve().parents[2]
BINARY = REPO / ".cache" / "minio" / "minio"
ROOT = AccessKey("sluice-test", "sluice-test-secret", name="minio root", admin=True)
"""MinIO's root user (MinIO wants a secret of 8 characters or more)."""


class MinioServer(StartStop):
    """``minio server DIR`` on a free loopback port; ``admin`` is its root key (the same
    attributes as ``tiered.embedded_s3.EmbeddedS3`` that tests and benchmarks use)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.host = "127.0.0.1"
        self.port, self.console_port = free_ports(2)
        self.admin = ROOT
        self.log_path = data_dir.parent / f"{data_dir.name}.minio.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        if not BINARY.exists():
            raise FileNotFoundError(f"{BINARY} is missing: run `make minio` (builds it with Go)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "MINIO_ROOT_USER": self.admin.access_key_id,
            "MINIO_ROOT_PASSWORD": self.admin.secret_access_key,
            "MINIO_BROWSER": "off",
        }
        cmd = [str(BINARY), "server", str(self.data_dir), "--address",
               f"{self.host}:{self.port}", "--console-address",
               f"{self.host}:{self.console_port}", "--quiet"]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent_preexec(),
            )
        track(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"MinIO exited with {self.proc.returncode}; see {self.log_path}")
            if self.live():
                return
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"MinIO did not answer on {self.endpoint} in {timeout} s")

    def live(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/minio/health/live", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``."""
        if self.proc is not None:
            stop_group(self.proc, timeout)
        untrack(self)

    def kill(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)
        untrack(self)
