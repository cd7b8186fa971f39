"""Shared pieces of the benchmarks: ports, processes, CPU accounting, the machine, results."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Every child process the suite starts, so that it can be killed at the end whatever happens.
_children: list[subprocess.Popen[Any]] = []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[Any] | None, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def spawn(cmd: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Popen in a new session (so the whole group can be killed), registered for cleanup."""
    proc: subprocess.Popen[Any] = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    _children.append(proc)
    return proc


def stop_process(proc: subprocess.Popen[Any], grace: float = 15) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    with contextlib.suppress(ValueError):
        _children.remove(proc)


def kill_all_children() -> None:
    for proc in list(_children):
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
    _children.clear()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads), 0.0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the ")" the fields start at field 3 (state): utime is field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def minor_faults(pid: int) -> int:
    """Page faults of a process that needed no read from disk (a new page mapped: zeroed
    memory, or one already in the page cache), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[7])  # field 10, minflt


def machine_busy() -> float:
    """CPU seconds all processes on the machine have used (user+nice+system+irq+softirq+steal)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


class Others:
    """CPU that neither the server nor the bench's clients used during a measurement.

    The machine may be shared with other jobs: this is the share of all cores they (and the
    hypervisor's steal) took, so a reader can tell a quiet measurement from a noisy one.
    """

    def __init__(self) -> None:
        self.start = machine_busy()
        self.started = time.monotonic()
        self.end: tuple[float, float] | None = None

    def stop(self) -> None:
        """Freeze the end of the measurement (when the clients' CPU is only known later)."""
        self.end = (machine_busy(), time.monotonic())

    def share(self, server_cpu: float, client_cpu: float) -> float:
        busy, now = self.end or (machine_busy(), time.monotonic())
        elapsed = now - self.started
        others = busy - self.start - server_cpu - client_cpu
        return max(0.0, others) / (elapsed * (os.cpu_count() or 1)) if elapsed > 0 else 0.0


def tool(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def python() -> str:
    return sys.executable


# ---------------------------------------------------------------------------- results


@dataclass
class Measure:
    """One measured figure of one system in one workload."""

    value: float
    unit: str
    seconds: float = 0.0
    records: int = 0
    bytes: int = 0
    broker_cpu: float | None = None
    """CPU seconds the broker used during the measurement (all threads)."""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Failed:
    """A figure that could not be measured, and why (one line, no table pipes)."""

    reason: str

    def __post_init__(self) -> None:
        lines = [x.strip() for x in self.reason.replace("|", "/").splitlines() if x.strip()]
        self.reason = lines[0] if lines else "unknown error"


Figure = Measure | Failed


def median_of(figures: list[Figure]) -> Figure:
    """The repetition with the median rate; the others' rates go to ``extra["runs"]``."""
    measured = sorted((f for f in figures if isinstance(f, Measure)), key=lambda f: f.value)
    if not measured:
        return figures[0] if figures else Failed("not run")
    failed = [f for f in figures if isinstance(f, Failed)]
    if failed:
        return failed[0]
    middle = measured[(len(measured) - 1) // 2]
    if len(measured) > 1:
        middle.extra["runs"] = [f.value for f in measured]
    return middle


def fmt_rate(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def fmt_bytes_rate(bps: float) -> str:
    return f"{bps / 1e6:,.0f} MB/s" if bps >= 1e7 else f"{bps / 1e6:.1f} MB/s"


# ---------------------------------------------------------------------------- machine


def machine_info() -> dict[str, str]:
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "nproc": str(os.cpu_count()),
        "memory": f"{mem_kib / 1024 / 1024:.1f} GiB",
        "cpu": cpu,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "load average at start": load,
    }


def command_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0].strip() if text else "?"


def replace_section(results: Path, begin: str, end: str, section: str) -> None:
    """Put ``section`` (which starts with ``begin`` and ends with ``end``) in place of the text
    between those markers in ``results``, or append it."""
    text = results.read_text() if results.exists() else "# Benchmark results\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    results.write_text(text)
