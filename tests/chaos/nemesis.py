"""The faults the soak injects, each with a start and a heal, scheduled from one seed.

A fault acts on one target: a broker (its process, its namespace's network, its disk, its
clock) or the control plane. Network faults are nftables rules in the broker's own namespace
(this kernel has no netem: added latency is a tbf qdisc shaping the broker's link, which
queues packets up to its latency budget); disk faults act on the broker's own ext4 file
system (``topology.py``). Every start and heal is written to the history.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tests.chaos.topology import Topology, run


class Fault(StrEnum):
    KILL = "kill"
    """kill -9 of a broker: the control plane restarts it."""
    PAUSE = "pause"
    """SIGSTOP, then SIGCONT at the heal."""
    PARTITION = "partition"
    """The broker cut off from every peer and the hub, both ways."""
    ONE_WAY = "one-way"
    """Packets from the broker (or to it) dropped, the other direction untouched."""
    LOSS = "loss"
    """A share of the broker's packets dropped at random, both ways."""
    SLOW_LINK = "slow-link"
    """The broker's link shaped to a low rate: queues up to a latency budget, then drops."""
    DISK_FULL = "disk-full"
    """The broker's file system filled to the last block."""
    SLOW_DISK = "slow-disk"
    """The broker's writes throttled (blkio bytes and operations per second)."""
    CLOCK_JUMP = "clock-jump"
    """The broker's wall clock jumps forward or back (``clock.offset.file``)."""
    CONTROL_PLANE_KILL = "control-plane-kill"
    """kill -9 of the control plane, restarted at the heal."""


BROKER_FAULTS = [f for f in Fault if f is not Fault.CONTROL_PLANE_KILL]
CLOCK_FILE = "clock-offset"


@dataclass
class Target:
    """What the faults act on; ``broker_pid`` and the control plane are found at each use."""

    topology: Topology
    broker_pid: Callable[[int], int | None]
    kill_control_plane: Callable[[], None]
    start_control_plane: Callable[[], None]


@dataclass
class Active:
    fault: Fault
    broker: int | None
    detail: dict[str, Any] = field(default_factory=dict)


def nft(topology: Topology, broker: int, *rules: str) -> None:
    """Replace the broker namespace's ``chaos`` table with ``rules`` (none: remove it)."""
    ns = topology.ns(broker)
    run("nft", "delete", "table", "inet", "chaos", check=False, ns=ns)
    if not rules:
        return
    script = "\n".join(
        [
            "table inet chaos {",
            "  chain input { type filter hook input priority 0; policy accept;",
            *[f"    {r}" for r in rules if r.startswith("in ")],
            "  }",
            "  chain output { type filter hook output priority 0; policy accept;",
            *[f"    {r}" for r in rules if r.startswith("out ")],
            "  }",
            "}",
        ]
    )
    script = script.replace("    in ", "    ").replace("    out ", "    ")
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, "nft", "-f", "-"],
        input=script,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"nft in {ns}: {proc.stderr.strip()}\n{script}")


def start(fault: Fault, broker: int | None, target: Target, rng: random.Random) -> Active:
    """Inject ``fault``; the returned record heals it."""
    topo = target.topology
    active = Active(fault, broker)
    d = active.detail
    if fault is Fault.CONTROL_PLANE_KILL:
        target.kill_control_plane()
        return active
    assert broker is not None
    net = f"{topo.net}.0/24"
    if fault is Fault.KILL or fault is Fault.PAUSE:
        pid = target.broker_pid(broker)
        d["pid"] = pid
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if fault is Fault.KILL else signal.SIGSTOP)
    elif fault is Fault.PARTITION:
        nft(topo, broker, f"in ip saddr {net} drop", f"out ip daddr {net} drop")
    elif fault is Fault.ONE_WAY:
        d["direction"] = rng.choice(["out", "in"])
        if d["direction"] == "out":
            nft(topo, broker, f"out ip daddr {net} drop")
        else:
            nft(topo, broker, f"in ip saddr {net} drop")
    elif fault is Fault.LOSS:
        d["percent"] = rng.choice([10, 20, 40])
        p = d["percent"]
        nft(
            topo,
            broker,
            f"in numgen random mod 100 < {p} drop",
            f"out numgen random mod 100 < {p} drop",
        )
    elif fault is Fault.SLOW_LINK:
        d["rate_kbit"], d["latency_ms"] = rng.choice([(512, 200), (2048, 100), (8192, 50)])
        run(
            "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
            "rate", f"{d['rate_kbit']}kbit", "burst", "32kbit", "latency", f"{d['latency_ms']}ms",
            ns=topo.ns(broker),
        )  # fmt: skip
    elif fault is Fault.DISK_FULL:
        ballast = topo.disk(broker) / "ballast"
        d["bytes"] = fill(ballast)
    elif fault is Fault.SLOW_DISK:
        d["write_bps"], d["write_iops"] = rng.choice([(1 << 20, 50), (256 << 10, 20)])
        throttle(topo, broker, d["write_bps"], d["write_iops"])
    elif fault is Fault.CLOCK_JUMP:
        d["offset_ms"] = rng.choice([-1, 1]) * rng.choice([2_000, 60_000, 600_000, 3_600_000])
        clock_file(topo, broker).write_text(str(d["offset_ms"]))
    return active


def heal(active: Active, target: Target) -> None:
    topo = target.topology
    broker = active.broker
    fault = active.fault
    if fault is Fault.CONTROL_PLANE_KILL:
        target.start_control_plane()
        return
    assert broker is not None
    if fault is Fault.KILL:
        # healed once the control plane has restarted it (it may be down itself: its own
        # lane restarts it)
        restarted(target, broker, active.detail.get("pid"), RESTART_WAIT_S)
    elif fault is Fault.PAUSE:
        pid = active.detail.get("pid")
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    elif fault in (Fault.PARTITION, Fault.ONE_WAY, Fault.LOSS):
        nft(topo, broker)
    elif fault is Fault.SLOW_LINK:
        run("tc", "qdisc", "del", "dev", "eth0", "root", check=False, ns=topo.ns(broker))
    elif fault is Fault.DISK_FULL:
        with contextlib.suppress(FileNotFoundError):
            (topo.disk(broker) / "ballast").unlink()
    elif fault is Fault.SLOW_DISK:
        throttle(topo, broker, 0, 0)
    elif fault is Fault.CLOCK_JUMP:
        clock_file(topo, broker).write_text("0")


def heal_everything(target: Target, brokers: int) -> None:
    """Undo whatever a fault may have left (a run stopped mid-fault), then wait until
    every broker runs."""
    topo = target.topology
    for n in topo.ids:
        nft(topo, n)
        run("tc", "qdisc", "del", "dev", "eth0", "root", check=False, ns=topo.ns(n))
        with contextlib.suppress(FileNotFoundError):
            (topo.disk(n) / "ballast").unlink()
        throttle(topo, n, 0, 0)
        with contextlib.suppress(FileNotFoundError):
            clock_file(topo, n).write_text("0")
    for n in topo.ids:
        restarted(target, n, None, RESTART_WAIT_S)


RESTART_WAIT_S = 120.0
"""Longest wait for a killed broker's restart before the schedule goes on without it."""


def restarted(target: Target, broker: int, old_pid: int | None, timeout: float) -> bool:
    """Wait until broker ``broker`` runs as a process other than ``old_pid``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = target.broker_pid(broker)
        if pid is not None and pid != old_pid:
            return True
        time.sleep(0.1)
    return False


def clock_file(topo: Topology, broker: int) -> Path:
    return topo.disk(broker) / "data" / CLOCK_FILE


def fill(path: Path) -> int:
    """Grow ``path`` until the file system is full; returns the bytes it took."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        stat = os.statvfs(path)
        free = stat.f_bavail * stat.f_frsize
        with contextlib.suppress(OSError):  # all but the last MiB at once
            os.posix_fallocate(fd, 0, max(free - (1 << 20), 1))
        os.lseek(fd, 0, os.SEEK_END)
        chunk = 1 << 16
        while chunk:  # then the last blocks, smaller and smaller
            try:
                os.write(fd, b"\0" * chunk)
            except OSError:
                chunk //= 4
        os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def throttle(topo: Topology, broker: int, bps: int, iops: int) -> None:
    """Throttle (0: unthrottle) writes of broker ``broker``'s cgroup to its loop device."""
    cgroup = topo.cgroup(broker)
    device = topo.loop_device(broker)
    if not cgroup.is_dir() or device is None:
        return
    st = os.stat(device)
    dev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    with contextlib.suppress(OSError):
        (cgroup / "blkio.throttle.write_bps_device").write_text(f"{dev} {bps}")
        (cgroup / "blkio.throttle.write_iops_device").write_text(f"{dev} {iops}")


def wait(seconds: float, stop: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop():
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
