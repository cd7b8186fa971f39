"""The soak's network and disks: a hub namespace with a bridge, one namespace per broker
joined to it by a veth pair, and one ext4 file system per broker on a loop device.

Everything is made by the harness and removed by it (``teardown``, also run first to clear
what a killed run left, by the tag every name carries). Names:

- ``slc<tag>-hub``: the control plane, the object store and the clients run here; its bridge
  ``br0`` has ``<net>.254``;
- ``slc<tag>-b<N>``: broker N (from 0), ``eth0`` = ``<net>.<N+1>``, its end in the hub ``b<N>`` on
  ``br0``; faults act on this namespace only (nftables rules, a tbf qdisc);
- ``<work>/disks/b<N>.img``: a sparse ext4 image on a loop device, mounted at
  ``<work>/disks/b<N>``; the broker's data directory is bind-mounted from it in the broker's
  own mount namespace (``wrap_broker.py``), so it fills and slows alone;
- blkio cgroup ``slc<tag>-b<N>`` (cgroup v1; v2's ``io`` where only it is mounted): the
  broker's process joins it, and the slow-disk fault sets its write limits.

No traffic leaves these namespaces: nothing is routed, the hub has no uplink.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

BLKIO = Path("/sys/fs/cgroup/blkio")


def run(*cmd: str, check: bool = True, ns: str | None = None) -> subprocess.CompletedProcess[str]:
    full = ["ip", "netns", "exec", ns, *cmd] if ns else list(cmd)
    proc = subprocess.run(full, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(full)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


@dataclass(frozen=True)
class Topology:
    tag: str
    brokers: int
    work: Path
    net: str = "10.211.0"
    disk_mib: int = 2048

    @property
    def hub(self) -> str:
        return f"slc{self.tag}-hub"

    def ns(self, broker: int) -> str:
        return f"slc{self.tag}-b{broker}"

    def address(self, broker: int) -> str:
        return f"{self.net}.{broker + 1}"

    @property
    def ids(self) -> range:
        """Broker ids, as the control plane numbers them (from 0)."""
        return range(self.brokers)

    @property
    def hub_address(self) -> str:
        return f"{self.net}.254"

    def disk(self, broker: int) -> Path:
        return self.work / "disks" / f"b{broker}"

    def cgroup(self, broker: int) -> Path:
        return BLKIO / f"slc{self.tag}-b{broker}"

    def loop_device(self, broker: int) -> str | None:
        """The loop device under broker ``broker``'s disk ("7:N" is its major:minor)."""
        for line in Path("/proc/self/mounts").read_text().splitlines():
            dev, mountpoint, *_ = line.split()
            if mountpoint == str(self.disk(broker)) and dev.startswith("/dev/loop"):
                return dev
        return None

    def setup(self) -> None:
        teardown(self)
        shutil.rmtree(self.work / "disks", ignore_errors=True)  # a previous run's images
        run("ip", "netns", "add", self.hub)
        run("ip", "link", "set", "lo", "up", ns=self.hub)
        run("ip", "link", "add", "br0", "type", "bridge", ns=self.hub)
        run("ip", "addr", "add", f"{self.hub_address}/24", "dev", "br0", ns=self.hub)
        run("ip", "link", "set", "br0", "up", ns=self.hub)
        for n in self.ids:
            ns = self.ns(n)
            run("ip", "netns", "add", ns)
            run("ip", "link", "set", "lo", "up", ns=ns)
            run("ip", "link", "add", f"b{n}", "type", "veth", "peer", "name", "eth0", ns=self.hub)
            run("ip", "link", "set", "eth0", "netns", ns, ns=self.hub)
            run("ip", "link", "set", f"b{n}", "master", "br0", ns=self.hub)
            run("ip", "link", "set", f"b{n}", "up", ns=self.hub)
            run("ip", "addr", "add", f"{self.address(n)}/24", "dev", "eth0", ns=ns)
            run("ip", "link", "set", "eth0", "up", ns=ns)
            self._make_disk(n)
            if BLKIO.is_dir():
                self.cgroup(n).mkdir(exist_ok=True)

    def _make_disk(self, n: int) -> None:
        image = self.work / "disks" / f"b{n}.img"
        image.parent.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as f:
            f.truncate(self.disk_mib << 20)
        run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
        self.disk(n).mkdir(exist_ok=True)
        run("mount", "-o", "loop", str(image), str(self.disk(n)))


def stale_tags() -> set[str]:
    """Tags of namespaces a killed run left."""
    out = run("ip", "netns", "list", check=False).stdout
    return {
        name[3:].rsplit("-", 1)[0]
        for name in (line.split()[0] for line in out.splitlines() if line.strip())
        if name.startswith("slc") and "-" in name
    }


def teardown(topology: Topology) -> None:
    """Remove every namespace, mount, loop device and cgroup of ``topology``'s tag; the
    disk images stay for a look at what the brokers wrote (the next setup removes them)."""
    out = run("ip", "netns", "list", check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(f"slc{topology.tag}-"):
            kill_in_namespace(name)
            run("ip", "netns", "delete", name, check=False)
    for n in topology.ids:
        disk = topology.disk(n)
        if os.path.ismount(disk):
            run("umount", "-l", str(disk), check=False)
        with contextlib.suppress(OSError):
            topology.cgroup(n).rmdir()


def kill_in_namespace(ns: str) -> None:
    """SIGKILL every process in network namespace ``ns`` (a killed run's brokers)."""
    out = run("ip", "netns", "pids", ns, check=False).stdout
    for pid in out.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
