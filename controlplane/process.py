"""Broker processes: start, identify, watch and stop ``sluice-broker`` processes.

Brokers run in their own session (``start_new_session``) so that they outlive a control plane
killed with ``-9``. A broker is identified by its ``--data-dir`` argument in
``/proc/<pid>/cmdline``: a recorded pid is only trusted when that process still runs a broker
on the recorded data directory (pids are reused), and a restarted control plane finds the
brokers it had started by scanning ``/proc`` for its own data directories.

Exits are noticed at once through a pidfd (Linux ≥ 5.3) registered with the event loop, for
children and adopted processes alike; the supervisor's periodic check is the fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

log = logging.getLogger("sluice.controlplane.process")

BROKER_MARKERS = ("dataplane.main", "sluice-broker")


def broker_command(
    data_dir: str, listen: str, settings: dict[str, str], prefix: Sequence[str] = ()
) -> list[str]:
    """The command line of one broker: the ``sluice-broker`` script beside this Python, run
    under ``prefix`` (``broker.exec.prefix``: a command that execs the rest, so the broker
    keeps its pid and its command line)."""
    script = Path(sys.executable).parent / "sluice-broker"
    base = (
        [sys.executable, str(script)]
        if script.exists()
        else [sys.executable, "-m", "dataplane.main"]
    )
    cmd = [*prefix, *base, "--data-dir", data_dir, "--listen", listen]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={value}"]
    return cmd


def exec_prefix(template: str, broker_id: int, host: str) -> list[str]:
    """``broker.exec.prefix`` for one broker: split as a shell would, ``{broker_id}`` and
    ``{host}`` replaced in each word (no shell runs it: nothing else is interpreted)."""
    return [
        word.replace("{broker_id}", str(broker_id)).replace("{host}", host)
        for word in shlex.split(template)
    ]


IP_FREEBIND = 15
"""Linux socket option (``<linux/in.h>``): bind to an address this host does not have."""


def bound_socket(host: str, port: int, *, reuse: bool = False) -> socket.socket:
    """A TCP socket bound to ``host:port``. An address of a host of its own (a network
    namespace: ``broker.hosts``) binds here too, so its ports are recorded all the same;
    only that host can tell whether one is taken, and its broker moves if it is."""
    sock = socket.socket()
    try:
        if reuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_IP, IP_FREEBIND, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


LOWEST_PORT = 10000
"""Ports handed to brokers are picked from here up to the kernel's ephemeral range."""


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (the ports of outgoing connections)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_RANDOM = random.SystemRandom()


def free_port(host: str, avoid: Collection[int] = ()) -> int:
    """A port free now on ``host``, not in ``avoid`` (ports recorded for other brokers),
    below the kernel's ephemeral range when that leaves room: a port bind(0) hands out
    comes from that range, which the kernel also gives outgoing connections, and one was
    taken by a client's connection between the pick and the broker's bind ("address
    already in use")."""
    low = ephemeral_low()
    if low - LOWEST_PORT >= 1000:
        for _ in range(200):
            port = _RANDOM.randrange(LOWEST_PORT, low)
            if port in avoid:
                continue
            try:
                bound_socket(host, port).close()
            except OSError:
                continue
            return port
    for _ in range(100):
        with bound_socket(host, 0) as sock:
            port = int(sock.getsockname()[1])
        if port not in avoid:
            return port
    raise RuntimeError("no free port found")


def port_free(host: str, port: int) -> bool:
    try:
        bound_socket(host, port, reuse=True).close()
    except OSError:
        return False
    return True


def read_cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None  # a zombie or a kernel thread
    return raw.rstrip(b"\0").decode(errors="replace").split("\0")


def stat_fields(path: str) -> list[str]:
    """The fields of a ``/proc`` stat file from the state on ("pid (comm) S ...": the
    state follows the last ')'); OSError when it cannot be read."""
    stat = Path(path).read_text()
    return stat[stat.rfind(")") + 2 :].split()


def is_zombie(pid: int) -> bool:
    try:
        fields = stat_fields(f"/proc/{pid}/stat")
    except OSError:
        return True
    return bool(fields) and fields[0] in ("Z", "X")


def data_dir_of(cmdline: Sequence[str]) -> str | None:
    """The ``--data-dir`` of a broker command line, or None for anything else."""
    if not any(marker in arg for arg in cmdline for marker in BROKER_MARKERS):
        return None
    for i, arg in enumerate(cmdline[:-1]):
        if arg == "--data-dir":
            return cmdline[i + 1]
    return None


def runs_broker(pid: int, data_dir: str) -> bool:
    """True when ``pid`` is a live broker process on ``data_dir``."""
    if pid <= 0:
        return False
    cmdline = read_cmdline(pid)
    return cmdline is not None and data_dir_of(cmdline) == data_dir and not is_zombie(pid)


def scan_brokers(under: Path) -> dict[str, list[int]]:
    """Live broker processes whose data directory is below ``under``: data_dir -> pids."""
    prefix = str(under).rstrip("/") + "/"
    found: dict[str, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        cmdline = read_cmdline(pid)
        if cmdline is None:
            continue
        data_dir = data_dir_of(cmdline)
        if data_dir and data_dir.startswith(prefix) and not is_zombie(pid):
            found.setdefault(data_dir, []).append(pid)
    return found


class BrokerProcess:
    """A running broker: one we started (``popen``) or one we adopted after a restart."""

    kind = "broker"
    """What the process is, for log lines."""

    def __init__(self, pid: int, data_dir: str, popen: subprocess.Popen[bytes] | None = None):
        self.pid = pid
        self.data_dir = data_dir
        self.popen = popen
        self._pidfd: int | None = None
        self.started = time.monotonic()

    @classmethod
    def spawn(
        cls,
        command: list[str],
        data_dir: str,
        log_path: str,
        environment: dict[str, str] | None = None,
    ) -> BrokerProcess:
        """Start ``command`` in its own session, its output appended to ``log_path`` after a
        line that records the start (with a time, in the broker's own log format, so that
        ``cloudctl logs --since`` places it). ``environment`` is added to ours: secrets go
        there, never on the command line."""
        Path(data_dir).mkdir(parents=True, exist_ok=True)
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log_file:
            log_file.write(f"{log_time()} --- starting: {' '.join(command)}\n".encode())
            log_file.flush()
            popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
                close_fds=True,
                env={**os.environ, **(environment or {}), "PYTHONUNBUFFERED": "1"},
            )
        return cls(popen.pid, data_dir, popen)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return self.identifies()

    def identifies(self) -> bool:
        """Whether ``pid`` still runs this process (pids are reused): an adopted one's check."""
        return runs_broker(self.pid, self.data_dir)

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.returncode

    def watch(self, on_exit: Callable[[], None]) -> None:
        """Call ``on_exit`` (on the event loop) as soon as the process exits."""
        loop = asyncio.get_running_loop()
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (OSError, AttributeError):
            return  # process already gone, or no pidfd: the periodic check notices
        pidfd = self._pidfd

        def readable() -> None:
            self.unwatch()
            on_exit()

        loop.add_reader(pidfd, readable)

    def unwatch(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(RuntimeError, ValueError):
                asyncio.get_running_loop().remove_reader(self._pidfd)
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None

    def signal(self, sig: int) -> None:
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the process to exit; True when it did."""
        deadline = time.monotonic() + timeout
        delay = 0.01
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
        return True

    async def stop(self, timeout: float) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; always reaps our own children."""
        self.unwatch()
        self.signal(signal.SIGTERM)
        if not await self.wait(timeout):
            log.warning("%s pid %d did not stop in %.0fs; killing it", self.kind, self.pid, timeout)
            self.signal(signal.SIGKILL)
            await self.wait(5)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(1)

    def kill(self) -> None:
        self.unwatch()
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(5)


def process_state(pid: int) -> tuple[bool, int]:
    """Process ``pid``: whether any of its threads is running, runnable or waiting on the
    disk (state R or D), and the CPU time all its threads used so far (user + system,
    clock ticks); (False, -1) when it cannot be read (gone)."""
    try:
        fields = stat_fields(f"/proc/{pid}/stat")
        cpu = int(fields[11]) + int(fields[12])
        busy = False
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, IndexError):
                busy = busy or stat_fields(f"{task.path}/stat")[0] in ("R", "D")
        return busy, cpu
    except (OSError, ValueError, IndexError):
        return False, -1


def cmdline_setting(pid: int, key: str) -> str:
    """The value of ``--set KEY=VALUE`` in process ``pid``'s command line ("" if absent)."""
    args = read_cmdline(pid) or []
    prefix = f"{key}="
    found = [b for a, b in itertools.pairwise(args) if a == "--set" and b.startswith(prefix)]
    return found[-1][len(prefix) :] if found else ""


def log_time(when: float | None = None) -> str:
    """A time as Python's logging writes it by default (``%(asctime)s``, local time):
    ``2026-11-25 08:00:00,123``, the format of the brokers' log lines."""
    now = time.time() if when is None else when
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"


def log_tail(path: str, lines: int = 1) -> str:
    """The last non-empty lines of a log file (for error messages)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])
