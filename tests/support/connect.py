"""Apache Kafka Connect and MirrorMaker 2 (real JVM processes) for tests/ecosystem.

The jars come from ``tools/fetch-connect.sh`` (``make connect-deps``) in
``.cache/java/connect``. :func:`connect_available` fetches them when they are missing and Maven
is there (the script is idempotent and takes a lock); it gives a skip reason only when Java
or Maven cannot be had.

    reason = connect_available()
    if reason:
        pytest.skip(reason)
    with ConnectWorker(tmp_path / "w1", cluster.bootstrap, "connect-test") as worker:
        worker.put_connector("src", {...})

Every process runs in its own session, is SIGKILLed if the test process dies, and is stopped
(its whole process group) on exit or at interpreter exit if a caller forgot.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from .java_client import JAVA_CACHE, REPO_ROOT, java_missing
from .processes import (
    StartStop,
    die_with_parent_preexec,
    free_port,
    kill_group,
    stop_group,
    track,
    untrack,
)

CONNECT_DIR = JAVA_CACHE / "connect"
FETCH_SCRIPT = REPO_ROOT / "tools" / "fetch-connect.sh"
LOG4J_CONFIG = REPO_ROOT / "tools" / "java" / "log4j2-quiet.xml"
STOP_GRACE_SECONDS = 15.0
MIRROR_MAKER = "org.apache.kafka.connect.mirror.MirrorMaker"
CONNECT_DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"


def _jars_present() -> bool:
    return any(CONNECT_DIR.glob("connect-runtime-*.jar")) and any(
        CONNECT_DIR.glob("connect-mirror-*.jar")
    )


@functools.cache
def connect_available() -> str | None:
    """Skip reason when Connect cannot run here (no Java 17+, or no jars and no Maven to
    fetch them), else None. Missing jars are fetched with the project's script."""
    reason = java_missing()
    if reason:
        return reason
    if _jars_present():
        return None
    if shutil.which("mvn") is None:
        return f"the Kafka Connect jars are not in {CONNECT_DIR} and there is no mvn to fetch them"
    done = subprocess.run(
        [str(FETCH_SCRIPT)], capture_output=True, text=True, timeout=1800, check=False
    )
    if not _jars_present():
        raise RuntimeError(
            f"{FETCH_SCRIPT} did not fetch the Kafka Connect jars:\n{done.stdout}\n{done.stderr}"
        )
    return None


def java_command(main_class: str, *args: str, heap: str = "-Xmx512m") -> list[str]:
    return [
        shutil.which("java") or "java",
        heap,
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        "-cp",
        str(CONNECT_DIR / "*"),
        main_class,
        *args,
    ]


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class JavaProcess(StartStop):
    """One JVM in its own session, its output in ``log_path``."""

    what = "java"

    def __init__(self, workdir: Path, argv: Sequence[str]) -> None:
        self.workdir = workdir
        self.argv = list(argv)
        self.log_path = workdir / f"{self.what}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent_preexec(),
        )
        track(self)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """``kill -9`` of its process group."""
        if self.proc is not None:
            kill_group(self.proc)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_group(proc, STOP_GRACE_SECONDS)
        if self._log is not None:
            self._log.close()
            self._log = None
        untrack(self)

    def logs(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class ConnectWorker(JavaProcess):
    """A Kafka Connect worker in distributed mode (``ConnectDistributed``) with its REST API
    on 127.0.0.1 (``url``). ``settings`` adds or overrides worker settings."""

    what = "connect"

    def __init__(
        self,
        workdir: Path,
        bootstrap: str,
        group: str,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.worker_id = f"127.0.0.1:{self.port}"
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "plugin.discovery": "service_load",
            **(settings or {}),
        }
        properties = write_properties(workdir / "worker.properties", props)
        super().__init__(workdir, java_command(CONNECT_DISTRIBUTED, str(properties)))

    def wait_ready(self, timeout: float = 120.0) -> dict[str, Any]:
        """Until the REST API answers ``GET /`` and the worker has joined its group (``GET
        /connectors`` answers); the root document (version, kafka_cluster_id)."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"Connect worker exited:\n{self.logs()}")
            try:
                root = self.rest("GET", "/")
                self.rest("GET", "/connectors")
                return dict(root)
            except (OSError, RuntimeError) as exc:
                last = str(exc)
            time.sleep(0.25)
        raise TimeoutError(f"Connect worker not ready in {timeout:.0f} s ({last}):\n{self.logs()}")

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """One REST call; the JSON answer (None for an empty one). RuntimeError with the
        worker's message for an HTTP error."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path}: HTTP {exc.code} {exc.read().decode()}") from None
        return json.loads(text) if text.strip() else None

    def put_connector(self, name: str, config: Mapping[str, str]) -> Any:
        return self.rest("PUT", f"/connectors/{name}/config", dict(config))

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.rest("GET", f"/connectors/{name}/status"))


class MirrorMakerProcess(JavaProcess):
    """MirrorMaker 2 in dedicated mode: ``MirrorMaker PROPERTIES --clusters TARGET``."""

    what = "mirror-maker"

    def __init__(self, workdir: Path, properties: Path, target_alias: str) -> None:
        super().__init__(
            workdir,
            java_command(MIRROR_MAKER, str(properties), "--clusters", target_alias),
        )
