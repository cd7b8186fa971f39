"""Run the fuzz targets: ``python -m tests.fuzz.run --seconds N [--target NAME]...
[--jobs J] [--record]`` (``make fuzz``).

Each target runs in its own process (``tests.fuzz.worker``), J at a time (default one after
another), for N seconds, with libFuzzer's limits: ``-rss_limit_mb`` and ``-malloc_limit_mb``
(2048: an input that makes the process allocate more is a finding), ``-timeout`` (10 s: a
slower input is a hang). New inputs go to ``.cache/fuzz/corpus/TARGET`` (the committed seeds
in ``tests/fuzz/corpus/TARGET`` are read, never written); a crashing input is written to
``.cache/fuzz/artifacts/TARGET/`` and the run goes on with the next target. The table
printed at the end gives executions and coverage (``cov:`` edges and ``ft:`` features, from
libFuzzer's final stats) per target, and for the request target which APIs and versions its
corpus decodes. ``--record`` appends the table with the date to bench/RESULTS.md under
"Fuzzing". Exit status 1 when any target found something.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dataplane.handlers.registry import SERVED
from tests.fuzz.targets import SCRATCH_ENV, TARGETS, decoded_api

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO / "tests" / "fuzz" / "corpus"
WORK = REPO / ".cache" / "fuzz"
RESULTS = REPO / "bench" / "RESULTS.md"
RSS_LIMIT_MB = 2048
MALLOC_LIMIT_MB = 2048
TIMEOUT_S = 10
MAX_LEN = 64 * 1024
"""Bytes of one input at most (libFuzzer's -max_len; the containers' items are 64 KiB)."""
START_SLACK_S = 300
"""Time allowed beyond --seconds for a worker to start, load its corpus and stop."""
BEGIN, END = "<!-- fuzzing:begin -->", "<!-- fuzzing:end -->"

_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")
_EXECUTED = re.compile(r"^stat::number_of_executed_units: (\d+)")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")
_FINDINGS = (
    ("deadly signal", "crash (signal)"),
    ("Uncaught Python exception", "uncaught exception"),
    ("ERROR: libFuzzer: timeout", "hang"),
    ("out-of-memory", "unbounded allocation"),
    ("malloc(", "unbounded allocation"),
)


@dataclass
class Outcome:
    target: str
    executions: int = 0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    seconds: float = 0.0
    finding: str = ""
    artifact: str = ""
    apis: str = ""


def fuzz(target: str, seconds: int) -> Outcome:
    """Run one target's worker for ``seconds`` and read libFuzzer's output."""
    corpus = WORK / "corpus" / target
    artifacts = WORK / "artifacts" / target
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    seeds = SEEDS / target
    command = [
        sys.executable,
        "-m",
        "tests.fuzz.worker",
        target,
        str(corpus),
        *([str(seeds)] if seeds.is_dir() else []),
        f"-max_total_time={seconds}",
        f"-max_len={max_len([corpus, seeds])}",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        f"-malloc_limit_mb={MALLOC_LIMIT_MB}",
        f"-timeout={TIMEOUT_S}",
        "-print_final_stats=1",
        f"-artifact_prefix={artifacts}/",
    ]
    log_path = WORK / f"{target}.log"
    started = time.monotonic()
    shm = Path("/dev/shm")
    scratch = tempfile.mkdtemp(prefix="sluice-fuzz-", dir=shm if shm.is_dir() else None)
    with log_path.open("wb") as log, contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, scratch, True)
        returncode: int | None = None
        try:
            returncode = subprocess.run(
                command,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=seconds + START_SLACK_S,
                check=False,
                env={**os.environ, "PYTHONHASHSEED": "0", SCRATCH_ENV: scratch},
            ).returncode
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
    outcome = read_log(target, log_path.read_text(errors="replace"))
    outcome.seconds = time.monotonic() - started
    if hung and not outcome.finding:
        outcome.finding = f"worker did not stop within {seconds + START_SLACK_S} s"
    elif returncode and not outcome.finding:
        outcome.finding = f"worker exited with status {returncode}"
    if outcome.finding and not outcome.artifact:
        outcome.artifact = f"(none written; the traceback is in {log_path.relative_to(REPO)})"
    if target == "kafka_request":
        outcome.apis = api_coverage([corpus, seeds])
    return outcome


def max_len(directories: list[Path]) -> int:
    """libFuzzer's -max_len: the largest input there (a seed larger than it would be cut),
    at least 4,096 bytes and at most MAX_LEN."""
    sizes = [p.stat().st_size for d in directories if d.is_dir() for p in d.iterdir()]
    return min(MAX_LEN, max([4096, *sizes]))


def read_log(target: str, text: str) -> Outcome:
    """Executions, coverage and any finding from a worker's libFuzzer output."""
    outcome = Outcome(target)
    for line in text.splitlines():
        status = _STATUS.match(line)
        if status:
            execs, cov, ft, corp = (int(g) for g in status.groups())
            outcome.executions = max(outcome.executions, execs)
            outcome.cov, outcome.ft, outcome.corpus = cov, ft, corp
        executed = _EXECUTED.match(line)
        if executed:
            outcome.executions = int(executed.group(1))
        artifact = _ARTIFACT.search(line)
        if artifact:
            outcome.artifact = artifact.group(1)
        for needle, finding in _FINDINGS:
            if needle in line and not outcome.finding:
                outcome.finding = finding
    return outcome


def api_coverage(directories: list[Path]) -> str:
    """Which APIs (and API versions) the inputs of ``directories`` decode, of those served."""
    decoded: set[tuple[int, int]] = set()
    for directory in directories:
        if not directory.is_dir():
            continue
        for path in directory.iterdir():
            if path.is_file():
                found = decoded_api(path.read_bytes())
                if found is not None:
                    decoded.add(found)
    versions = sum(s.versions[1] - s.versions[0] + 1 for s in SERVED.values())
    keys = {key for key, _ in decoded}
    return (
        f"{len(keys)} of {len(SERVED)} APIs, {len(decoded)} of {versions} API versions decode"
        f" (keys: {', '.join(str(k) for k in sorted(keys))})"
    )


def table(outcomes: list[Outcome], seconds: int, jobs: int = 1) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### {stamp}, {seconds} s per target, {jobs} at a time",
        "",
        "| target | executions | exec/s | cov | ft | corpus | finding |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        rate = o.executions / o.seconds if o.seconds else 0
        finding = o.finding or "none"
        if o.artifact.startswith("("):
            finding += f" {o.artifact}"
        elif o.artifact:
            finding += f" (`{Path(o.artifact).name}`)"
        lines.append(
            f"| {o.target} | {o.executions:,} | {rate:,.0f} | {o.cov} | {o.ft} | {o.corpus} "
            f"| {finding} |"
        )
    lines += [f"\n{o.target}: {o.apis}" for o in outcomes if o.apis]
    return "\n".join(lines) + "\n"


def record(text: str) -> None:
    """Append ``text`` to the Fuzzing section of bench/RESULTS.md (made if missing)."""
    results = RESULTS.read_text()
    if BEGIN not in results:
        intro = (
            "## Fuzzing\n\n`make fuzz` (`python -m tests.fuzz.run --seconds N --record`): "
            "coverage-guided fuzzing (atheris, libFuzzer) of every parser that reads bytes "
            "someone else wrote; tests/fuzz/README.md describes the targets. `cov`: "
            "instrumented edges reached, `ft`: libFuzzer features, `corpus`: inputs kept.\n"
        )
        results = results.rstrip("\n") + f"\n\n{BEGIN}\n{intro}{END}\n"
    head, _, tail = results.partition(END)
    RESULTS.write_text(f"{head.rstrip()}\n\n{text}{END}{tail}")


def say(line: str) -> None:
    """One line in one write: lines of targets running at once never interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__)
    parser.add_argument("--seconds", type=int, default=600, help="per target (default 600)")
    parser.add_argument(
        "--target", action="append", choices=sorted(TARGETS), help="repeatable; default: all"
    )
    parser.add_argument("--record", action="store_true", help="append to bench/RESULTS.md")
    parser.add_argument(
        "--jobs", type=int, default=1, help="targets fuzzed at once (one CPU each; default 1)"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.seconds < 1:
        parser.error("--seconds must be at least 1")
    targets = args.target or list(TARGETS)

    def one(target: str) -> Outcome:
        say(f"fuzzing {target} for {args.seconds} s ...")
        outcome = fuzz(target, args.seconds)
        say(
            f"  {target}: {outcome.executions:,} executions, cov {outcome.cov}, "
            f"ft {outcome.ft}, finding: {outcome.finding or 'none'} {outcome.artifact}"
        )
        return outcome

    # each target is its own process: a thread per running target only waits for it
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(one, targets))
    text = table(outcomes, args.seconds, args.jobs)
    print()
    print(text)
    if args.record:
        record(text)
        print(f"appended to {RESULTS.relative_to(REPO)}")
    found = [o for o in outcomes if o.finding]
    for o in found:
        print(
            f"{o.target}: {o.finding}; input {o.artifact or '(none written)'}; log "
            f"{(WORK / f'{o.target}.log').relative_to(REPO)}. Fix the parser, then copy the input "
            f"to tests/fuzz/regressions/{o.target}/ (tests/fuzz/README.md)."
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
