"""Run ``dataplane.main`` with cProfile switched on and off by signals (bench --profile only).

    SLUICE_BENCH_PROFILE_DIR=DIR python -m bench.profiled_broker --data-dir ... --listen ...

SIGUSR1 starts a profile; SIGUSR2 stops it and writes ``DIR/<name>.prof``, where name is read
from ``DIR/next-name`` (written by the bench just before SIGUSR1). So one broker can be profiled
per workload without counting its start-up or the workloads before.

The clock is wall time (cheap to read). ``SLUICE_BENCH_PROFILE_CLOCK=cpu`` uses the thread's
CPU time instead, which does not charge a syscall for the time the scheduler ran a client
(on 2 cores a send() that wakes a client often yields the CPU to it), but each reading is a
system call, which slows call-heavy code several times and inflates functions called often.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from dataplane.main import main as broker_main

PROFILE_DIR = Path(os.environ.get("SLUICE_BENCH_PROFILE_DIR", "."))
_state: dict[str, Any] = {}


def _start(_signum: int, _frame: Any) -> None:
    if "profiler" in _state:
        return
    name_file = PROFILE_DIR / "next-name"
    _state["name"] = name_file.read_text().strip() if name_file.exists() else "profile"
    cpu = os.environ.get("SLUICE_BENCH_PROFILE_CLOCK") == "cpu"
    profiler = cProfile.Profile(time.thread_time if cpu else time.perf_counter)
    _state["profiler"] = profiler
    profiler.enable()


def _stop(_signum: int, _frame: Any) -> None:
    profiler = _state.pop("profiler", None)
    if profiler is None:
        return
    profiler.disable()
    target = PROFILE_DIR / f"{_state['name']}.prof"
    tmp = target.with_suffix(".tmp")
    profiler.dump_stats(str(tmp))
    tmp.rename(target)


def main() -> int:
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    return broker_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
