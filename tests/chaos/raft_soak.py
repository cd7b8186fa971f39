"""Raft simulation at scale: thousands of seeds of every variant in a process pool (issue 19).

    python -m tests.chaos.raft_soak [--seeds 10000] [--variant 3v]... [--workers N]
                                    [--steps 5000] [--record]

Runs seeds 0..N-1 of each variant of the deterministic simulation in
tests/dataplane/test_raft_simulation.py (``make test`` keeps its quick count of seeds), one
variant after the other, each spread over ``--workers`` processes (default: the CPU count).
A progress line every ~10 s (seeds done, rate, ETA), then a table per variant: seeds, events,
elections, crashes, partitions, snapshots, commits (the highest commit index of each seed,
summed), failures and wall time, and the hardest seed of each variant (most crashes +
partitions). ``--record`` appends the table, dated, to the "Raft simulation" section of
bench/RESULTS.md.

A failing seed prints its ``SEED=`` line and the command that re-runs it alone (with its
trace); the run goes on and exits with status 1. Fix the bug, then add the seed to
``REGRESSIONS`` in tests/dataplane/test_raft_simulation.py under a name that says what broke.
"""

from __future__ import annotations

import argparse
import datetime
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from tests.dataplane.test_raft_simulation import (
    DEFAULT_STEPS,
    VARIANTS,
    SimFailure,
    Stats,
    run_seed,
    variant_id,
)

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- raft-simulation:begin -->"
END = "<!-- raft-simulation:end -->"
PROGRESS_SECONDS = 10.0
MAX_CHUNK = 20
"""Seeds per task: about a second of work, so progress and failures show up promptly."""
VARIANT_SHAPES = {
    variant_id(voters, learners): (voters, learners) for voters, learners, _ in VARIANTS
}


@dataclass(frozen=True)
class SeedFailure:
    seed: int
    report: str
    """run_seed's message: the SEED line, the re-run command, the last events."""

    def headline(self) -> str:
        """The SEED line and the re-run command (the re-run prints the events)."""
        return "\n".join(self.report.splitlines()[:2])


@dataclass
class Outcome:
    """What some seeds of one variant gave (a chunk's, or a whole variant's when added up)."""

    seeds: int = 0
    stats: Stats = field(default_factory=Stats)
    failures: list[SeedFailure] = field(default_factory=list)
    hardest: tuple[int, int] | None = None
    """(crashes + partitions, seed) of the passing seed with the most faults; ties: lowest seed."""
    wall_seconds: float = 0.0

    def add(self, other: Outcome) -> None:
        self.seeds += other.seeds
        self.stats.add(other.stats)
        self.failures.extend(other.failures)
        if other.hardest is not None and (
            self.hardest is None or _harder(other.hardest, self.hardest)
        ):
            self.hardest = other.hardest


def _harder(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] > b[0] or (a[0] == b[0] and a[1] < b[1])


def run_chunk(voters: int, learners: int, first: int, stop: int, steps: int) -> Outcome:
    """Seeds ``first``..``stop - 1`` of one variant (in a worker process)."""
    out = Outcome()
    for seed in range(first, stop):
        out.seeds += 1
        try:
            stats = run_seed(seed, voters, steps, learners=learners)
        except SimFailure as exc:
            out.failures.append(SeedFailure(seed, str(exc)))
            continue
        out.stats.add(stats)
        score = (stats.crashes + stats.partitions, seed)
        if out.hardest is None or _harder(score, out.hardest):
            out.hardest = score
    return out


def chunks(seeds: int, workers: int) -> list[tuple[int, int]]:
    size = max(1, min(MAX_CHUNK, math.ceil(seeds / (workers * 4))))
    return [(lo, min(lo + size, seeds)) for lo in range(0, seeds, size)]


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """A line every PROGRESS_SECONDS: seeds done of the whole run, rate, ETA."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.due = self.started + PROGRESS_SECONDS

    def advance(self, seeds: int) -> None:
        self.done += seeds

    def maybe_print(self, variant: str) -> None:
        now = time.monotonic()
        if now < self.due:
            return
        self.due = now + PROGRESS_SECONDS
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = duration((self.total - self.done) / rate) if rate > 0 else "?"
        print(
            f"[{variant}] {self.done:,}/{self.total:,} seeds, {rate:.1f} seeds/s, "
            f"elapsed {duration(elapsed)}, ETA {eta}",
            flush=True,
        )

    def timeout(self) -> float:
        return max(0.0, self.due - time.monotonic())


def run_variant(
    pool: Executor, name: str, seeds: int, steps: int, *, workers: int, progress: Progress
) -> Outcome:
    voters, learners = VARIANT_SHAPES[name]
    total = Outcome()
    started = time.monotonic()
    pending: set[Future[Outcome]] = {
        pool.submit(run_chunk, voters, learners, lo, hi, steps) for lo, hi in chunks(seeds, workers)
    }
    while pending:
        done, pending = wait(pending, timeout=progress.timeout(), return_when=FIRST_COMPLETED)
        for future in done:
            out = future.result()
            total.add(out)
            progress.advance(out.seeds)
            for failure in out.failures:
                print(f"FAILED [{name}] {failure.headline()}", flush=True)
        progress.maybe_print(name)
    total.wall_seconds = time.monotonic() - started
    total.failures.sort(key=lambda f: f.seed)
    return total


COLUMNS = [
    "variant",
    "seeds",
    "events",
    "elections",
    "crashes",
    "partitions",
    "snapshots",
    "commits",
    "failures",
    "wall time",
]


def table(outcomes: dict[str, Outcome]) -> str:
    rows = []
    whole = Outcome()
    for name, out in outcomes.items():
        whole.add(out)
        whole.wall_seconds += out.wall_seconds
        rows.append((name, out))
    if len(outcomes) > 1:
        rows.append(("all", whole))
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" + "|---:" * (len(COLUMNS) - 1) + "|"]
    for name, out in rows:
        s = out.stats
        cells = [
            out.seeds,
            s.steps,
            s.elections,
            s.crashes,
            s.partitions,
            s.snapshots,
            s.committed,
            len(out.failures),
        ]
        text = [name, *(f"{c:,}" for c in cells), duration(out.wall_seconds)]
        lines.append("| " + " | ".join(text) + " |")
    return "\n".join(lines)


def hardest_line(outcomes: dict[str, Outcome]) -> str:
    parts = [
        f"{name} seed {out.hardest[1]} ({out.hardest[0]})"
        for name, out in outcomes.items()
        if out.hardest is not None
    ]
    return "Hardest seed of each variant (crashes + partitions): " + ", ".join(parts) + "."


def record(path: Path, body: str) -> None:
    """Append ``body`` to the "Raft simulation" section of ``path`` (made if missing)."""
    text = path.read_text() if path.exists() else ""
    if BEGIN not in text or END not in text:
        section = (
            f"{BEGIN}\n## Raft simulation\n\n"
            "`python -m tests.chaos.raft_soak` (issue 19): seeds 0..N-1 of every variant of "
            "the deterministic Raft simulation (tests/dataplane/test_raft_simulation.py: "
            "random delays, drops, duplicates, partitions, crashes inside a Ready, snapshots, "
            "leader transfers, learner changes; every invariant checked after every event). "
            "Each run is appended below. Commits: the highest commit index of each seed, "
            "summed.\n"
            f"{END}\n"
        )
        text = text.rstrip("\n") + "\n\n" + section if text.strip() else section
    head, _, tail = text.partition(END)
    path.write_text(head.rstrip("\n") + "\n\n" + body.strip("\n") + "\n" + END + tail)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos.raft_soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seeds", type=int, default=10_000, help="seeds per variant (0..N-1)")
    parser.add_argument(
        "--variant",
        action="append",
        choices=list(VARIANT_SHAPES),
        help="run only this variant (repeatable; default: all)",
    )
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes (default: CPUs)"
    )
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="events per seed")
    parser.add_argument(
        "--record", action="store_true", help="append the table to bench/RESULTS.md"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.workers < 1 or args.steps < 1:
        parser.error("--seeds, --workers and --steps take a positive number")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names: list[str] = args.variant or list(VARIANT_SHAPES)
    names = list(dict.fromkeys(names))
    print(
        f"raft soak: {args.seeds:,} seeds x {args.steps:,} events of {', '.join(names)} "
        f"on {args.workers} workers",
        flush=True,
    )
    progress = Progress(args.seeds * len(names))
    outcomes: dict[str, Outcome] = {}
    # spawn, not fork: a fork of a process with threads (the test runner's, a client's) may
    # copy a lock another thread holds, and the child then waits on it for ever
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=context) as pool:
        try:
            for name in names:
                outcomes[name] = run_variant(
                    pool, name, args.seeds, args.steps, workers=args.workers, progress=progress
                )
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            print("interrupted: nothing recorded", file=sys.stderr)
            if outcomes:
                print(table(outcomes))
            return 130
    failures = sum(len(out.failures) for out in outcomes.values())
    result = f"{table(outcomes)}\n\n{hardest_line(outcomes)}"
    print(f"\n{result}")
    if failures:
        print(f"\n{failures} failing seed(s):")
        for name, out in outcomes.items():
            for failure in out.failures:
                print(f"[{name}] {failure.headline()}")
    if args.record:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        load = os.getloadavg()[0]
        heading = (
            f"### {stamp}: {args.seeds:,} seeds x {args.steps:,} events per variant, "
            f"{args.workers} workers\n\nMachine: {os.cpu_count()} CPUs, 1-minute load average "
            f"{load:.1f} at the end."
        )
        record(args.results, f"{heading}\n\n{result}")
        print(f"recorded in {args.results}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
