"""Run Apache Kafka's reference Java client (tools/java/ClientHarness.java) from the tests.

The jars come from ``tools/fetch-java-deps.sh`` (``make java-deps``) in ``.cache/java/clients``.
The harness is compiled once into ``.cache/java/harness`` (saves ~1 s per call over Java's
single-file source launch, which is the fallback when ``javac`` is missing).

    reason = java_available()
    if reason:
        pytest.skip(reason)
    acks = run_java_client(["produce", "--bootstrap", bootstrap, "--topic", "t", "--count", "10"])
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_CACHE = REPO_ROOT / ".cache" / "java"
CLIENTS_DIR = JAVA_CACHE / "clients"
HARNESS_SRC = REPO_ROOT / "tools" / "java" / "ClientHarness.java"
HARNESS_CLASSES = JAVA_CACHE / "harness"
MIN_JAVA = 17
FETCH_HINT = "run `make java-deps` (tools/fetch-java-deps.sh)"


class JavaClientError(RuntimeError):
    """The harness exited non-zero. ``records`` holds the JSON lines it printed before failing
    (the last one is usually ``{"error": ..., "message": ...}``)."""

    def __init__(
        self, args: list[str], returncode: int, stderr: str, records: list[dict[str, Any]]
    ) -> None:
        self.returncode = returncode
        self.stderr = stderr
        self.records = records
        error = next((r for r in reversed(records) if "error" in r), None)
        what = f"{error['error']}: {error['message']}" if error else stderr.strip()[-2000:]
        super().__init__(f"java client {' '.join(args)[:200]} exited {returncode}: {what}")

    @property
    def error(self) -> str | None:
        """The Java exception's simple class name, e.g. ``TopicExistsException``."""
        for r in reversed(self.records):
            if "error" in r:
                return str(r["error"])
        return None


@functools.cache
def java_version() -> int | None:
    """Major version of ``java`` on PATH, or None when there is none."""
    java = shutil.which("java")
    if java is None:
        return None
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def java_missing() -> str | None:
    """Skip reason when no usable Java runtime (17+) is on PATH, else None."""
    version = java_version()
    if version is None:
        return "no `java` on PATH (Java 17+ is needed for the Java client and the Kafka oracle)"
    if version < MIN_JAVA:
        return f"java {version} on PATH; Java {MIN_JAVA}+ is needed"
    return None


def java_available() -> str | None:
    """Skip reason when the Java client harness cannot run here, else None."""
    reason = java_missing()
    if reason:
        return reason
    if not any(CLIENTS_DIR.glob("kafka-clients-*.jar")):
        return f"kafka-clients jars missing from {CLIENTS_DIR}; {FETCH_HINT}"
    if not HARNESS_SRC.is_file():
        return f"{HARNESS_SRC} is missing"
    return None


def clients_classpath() -> str:
    return str(CLIENTS_DIR / "*")


def _compiled_harness() -> Path | None:
    """Directory holding an up-to-date ClientHarness.class, compiling it if needed; None when
    javac is missing or fails (the caller then uses Java's source-file mode)."""
    return compiled_classes(HARNESS_SRC, HARNESS_CLASSES, clients_classpath())


def compiled_classes(source: Path, classes: Path, classpath: str) -> Path | None:
    """Directory ``classes`` holding an up-to-date compile of the single-file program
    ``source`` (its class named after the file), compiling it against ``classpath`` if needed;
    None when javac is missing or fails. Also used for tools/java/StreamsApp.java."""
    javac = shutil.which("javac")
    if javac is None:
        return None
    stamp = classes / f"{source.stem}.class"
    if stamp.is_file() and stamp.stat().st_mtime >= source.stat().st_mtime:
        return classes
    JAVA_CACHE.mkdir(parents=True, exist_ok=True)
    with open(JAVA_CACHE / f".{classes.name}.lock", "w") as lock:  # pytest-xdist workers race
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.stat().st_mtime >= source.stat().st_mtime:
            return classes
        tmp = Path(tempfile.mkdtemp(prefix=f".{classes.name}-", dir=JAVA_CACHE))
        proc = subprocess.run(
            [javac, "-nowarn", "-d", str(tmp), "-cp", classpath, str(source)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        shutil.rmtree(classes, ignore_errors=True)
        os.replace(tmp, classes)
    return classes


def harness_command(args: list[str]) -> list[str]:
    """The full ``java ...`` command line that runs the harness with ``args``."""
    java = shutil.which("java") or "java"
    classes = _compiled_harness()
    if classes is not None:
        cp = f"{classes}{os.pathsep}{clients_classpath()}"
        return [java, "-XX:TieredStopAtLevel=1", "-cp", cp, "ClientHarness", *args]
    return [java, "-cp", clients_classpath(), str(HARNESS_SRC), *args]


def parse_json_lines(text: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                records.append(json.loads(line))
    return records


def run_java_client(args: list[str], timeout: float = 120) -> list[dict[str, Any]]:
    """Run the harness (e.g. ``["admin", "--bootstrap", b, "list-topics"]``) and return its JSON
    lines. Raises JavaClientError on a non-zero exit and subprocess.TimeoutExpired on timeout."""
    reason = java_available()
    if reason:
        raise RuntimeError(reason)
    proc = subprocess.run(
        harness_command(args),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
    )
    records = parse_json_lines(proc.stdout)
    if proc.returncode != 0:
        raise JavaClientError(args, proc.returncode, proc.stderr, records)
    return records
