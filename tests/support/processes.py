"""Child processes of the test suite and the benches: free loopback ports, process groups that
are always stopped, and a die-with-parent guard.

Used by BrokerProcess (tests/support/broker.py), KafkaOracle and KafkaCluster. A process is
started in its own session so that its whole group can be signalled; ``stop_group`` sends
SIGTERM and SIGKILLs after a grace period; ``kill_group`` is ``kill -9``. Objects that own
processes register with ``track`` and are stopped at interpreter exit if a caller forgot.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol, Self

from controlplane import process


class Stoppable(Protocol):
    def stop(self) -> Any: ...


_live: set[Stoppable] = set()


class StartStop:
    """``with X(...) as x:`` for process owners: ``start()`` on entry, ``stop()`` on exit."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def free_port() -> int:
    """A free port on 127.0.0.1, below the kernel's ephemeral range (the control plane's
    pick: ``controlplane.process.free_port``)."""
    return process.free_port("127.0.0.1")


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def die_with_parent_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that SIGKILLs the child if the test process dies without cleanup.

    PR_SET_PDEATHSIG fires when the creating *thread* exits, so it is only used from the main
    thread (None elsewhere, and off Linux)."""
    if sys.platform == "linux" and threading.current_thread() is threading.main_thread():
        return _die_with_parent
    return None


def _die_with_parent() -> None:
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def stop_group(proc: subprocess.Popen[Any], grace: float = 10.0) -> int | None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds; the exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            kill_group(proc)
    return proc.wait()


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group (``kill -9``) and reap the process."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def track(owner: Stoppable) -> None:
    """Stop ``owner`` at interpreter exit unless ``untrack`` was called first."""
    _live.add(owner)


def untrack(owner: Stoppable) -> None:
    _live.discard(owner)


@atexit.register
def _stop_all() -> None:
    for owner in list(_live):
        with contextlib.suppress(Exception):
            owner.stop()
