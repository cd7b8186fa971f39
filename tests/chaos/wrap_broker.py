"""Runs one soak broker on its own disk: ``python wrap_broker.py --disk DIR [--cgroup DIR] --
BROKER COMMAND``, as ``broker.exec.prefix`` after ``ip netns exec`` (which gave this process
a network namespace and a mount namespace of its own).

It joins the broker's blkio cgroup (the slow-disk fault throttles it), bind-mounts
``DIR/data`` over the command's ``--data-dir`` (in this mount namespace only: the control
plane still sees its own directory), and execs the broker, which keeps this pid. A script
with no imports of the project: it runs before anything else of the broker's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    disk = Path(options[options.index("--disk") + 1])
    if "--cgroup" in options:
        cgroup = Path(options[options.index("--cgroup") + 1])
        if cgroup.is_dir():
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    data_dir = Path(command[command.index("--data-dir") + 1])
    source = disk / "data"
    source.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(source), str(data_dir)], check=True)
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
