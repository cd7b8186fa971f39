"""franz-go's pkg/kgo integration tests against Apache Kafka and Sluice, side by side.

    python -m tests.peers.run [--target kafka|kafka3|sluice|sluice3|all|A,B] [--tests REGEX]
                              [--records N] [--out FILE]

Builds the test binary (tools/build-franz-go.sh), keeps the tests that use a broker, starts each
target in turn and runs every test in its own process with its own timeout, then writes a
markdown table (test | Kafka | ... | note) and, below it, the last output lines and the broker
tracebacks of every test that did not pass. A test that needs a feature the target does not
advertise in ApiVersions is skipped with the feature and the issue that brings it. See
tests/peers/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.peers import franz_go, targets
from tests.peers.franz_go import Feature, KgoTest, Outcome
from tests.peers.targets import TARGETS, Traceback
from tests.support.kafka_oracle import kafka_version

DEFAULT_OUT = franz_go.REPO / ".cache" / "peers" / "franz-go-results.md"
RUNS = franz_go.REPO / ".cache" / "peers" / "runs"
ALL = ("kafka", "kafka3", "sluice", "sluice3")
LONG_TEST = re.compile(r"ETL|Etl")
TAIL_LINES = 15
LINE_WIDTH = 300


@dataclass
class Cell:
    """One test on one target."""

    status: str
    """pass, fail, skip, timeout, error, or "feature" (skipped here: feature not advertised)"""
    seconds: float = 0.0
    outcome: Outcome | None = None
    missing: list[Feature] = field(default_factory=list)
    tracebacks: list[Traceback] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)
    """Brokers of the target found exited after the test."""

    def text(self) -> str:
        if self.status == "feature":
            return "skipped: " + ", ".join(f.name for f in self.missing)
        label = {"fail": "**FAIL**", "timeout": "**TIMEOUT**", "error": "**ERROR**"}.get(
            self.status, self.status
        )
        return f"{label} {self.seconds:.1f} s"


@dataclass
class Column:
    key: str
    title: str
    cells: dict[str, Cell] = field(default_factory=dict)
    seconds: float = 0.0
    startup_seconds: float = 0.0
    unavailable: str = ""
    advertised: dict[int, tuple[int, int]] = field(default_factory=dict)
    startup_tracebacks: list[Traceback] = field(default_factory=list)
    log_paths: list[Path] = field(default_factory=list)
    restarts: int = 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.peers.run", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--target",
        default="all",
        help="kafka, kafka3, sluice, sluice3, all (the four), or a comma-separated list",
    )
    parser.add_argument("--tests", default="", help="run only tests matching this regex")
    parser.add_argument(
        "--records",
        type=int,
        default=None,
        help="KGO_TEST_RECORDS (records of the ETL tests; franz-go's default 500000)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown result file")
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds per test (default 180)"
    )
    parser.add_argument(
        "--etl-timeout",
        type=float,
        default=600.0,
        help="seconds per *ETL* / *Etl* test (default 600)",
    )
    parser.add_argument(
        "--keep-data", action="store_true", help="keep the brokers' data dirs after the run"
    )
    args = parser.parse_args(argv)
    keys = ALL if args.target == "all" else tuple(args.target.split(","))
    unknown = [k for k in keys if k not in TARGETS]
    if unknown:
        parser.error(f"unknown target {', '.join(unknown)}; choose from {', '.join(ALL)}, all")
    args.targets = [k for k in ALL if k in keys]
    return args


def missing_features(info: KgoTest, advertised: dict[int, tuple[int, int]]) -> list[Feature]:
    return [f for f in info.features if any(k not in advertised for k in f.api_keys)]


def run_column(key: str, tests: list[KgoTest], args: argparse.Namespace, workdir: Path) -> Column:
    spec = TARGETS[key]
    column = Column(key, spec.title)
    reason = targets.unavailable(key)
    if reason:
        column.unavailable = reason
        print(f"[{key}] not run: {reason}", flush=True)
        return column
    started = time.monotonic()
    print(f"[{key}] starting {spec.title} in {workdir}", flush=True)
    try:
        target = targets.start(key, workdir)
    except Exception as exc:
        column.unavailable = f"did not start: {str(exc).splitlines()[0][:200]}"
        print(f"[{key}] {column.unavailable}\n{exc}", flush=True)
        return column
    try:
        column.startup_seconds = target.startup_seconds
        column.log_paths = target.log_paths()
        column.advertised = targets.advertised_keys(target.bootstrap)
        if spec.sluice:
            for path in column.log_paths:
                if path.exists():
                    text = path.read_text(errors="replace")
                    column.startup_tracebacks += targets.find_tracebacks(text, franz_go.REPO)
        for info in tests:
            missing = missing_features(info, column.advertised)
            if missing:
                column.cells[info.name] = Cell("feature", missing=missing)
                print(f"[{key}] {info.name}: skipped, needs {missing[0].name}", flush=True)
                continue
            watch = targets.LogWatch(target.log_paths())
            timeout = args.etl_timeout if LONG_TEST.search(info.name) else args.timeout
            outcome = franz_go.run_kgo_test(
                info.name,
                franz_go.kgo_env(target.bootstrap, spec.rf, args.records),
                workdir / "tests" / f"{info.name}.log",
                timeout=timeout,
                tail_lines=TAIL_LINES,
            )
            cell = Cell(outcome.status, outcome.seconds, outcome)
            if spec.sluice:
                for text in watch.new_text().values():
                    cell.tracebacks += targets.find_tracebacks(text, franz_go.REPO)
            cell.dead = target.dead()
            column.cells[info.name] = cell
            extra = f", {len(cell.tracebacks)} broker tracebacks" if cell.tracebacks else ""
            print(f"[{key}] {info.name}: {cell.text()}{extra}", flush=True)
            if cell.dead:
                print(f"[{key}] brokers {cell.dead} exited: restarting {spec.title}", flush=True)
                target.stop()
                column.restarts += 1
                try:
                    target = targets.start(key, workdir / f"restart{column.restarts}")
                except Exception as exc:
                    column.unavailable = f"did not restart: {str(exc).splitlines()[0][:200]}"
                    print(f"[{key}] {column.unavailable}", flush=True)
                    break
                column.log_paths += target.log_paths()
    finally:
        target.stop()
        if not args.keep_data:
            for data in sorted(workdir.rglob("data"), reverse=True):
                if data.is_dir():
                    shutil.rmtree(data, ignore_errors=True)
    column.seconds = time.monotonic() - started
    print(f"[{key}] done in {column.seconds:.0f} s", flush=True)
    return column


# ---------------------------------------------------------------------- report


def _note(info: KgoTest, columns: list[Column]) -> str:
    parts: list[str] = []
    for feature in info.features:
        parts.append(f"needs {feature.name} (API keys {', '.join(map(str, feature.api_keys))})")
        skipped_on = [
            c.title
            for c in columns
            if any(f is feature for f in (c.cells.get(info.name) or Cell("")).missing)
        ]
        if skipped_on:
            parts[-1] += f": not advertised by {', '.join(skipped_on)}; {feature.issue}"
    sub_skips: dict[str, list[str]] = {}
    for column in columns:
        cell = column.cells.get(info.name)
        if cell and cell.outcome and cell.outcome.subtest_skips:
            sub_skips.setdefault(_skip_summary(cell.outcome.subtest_skips), []).append(column.title)
    for summary, where in sub_skips.items():
        parts.append(f"{summary} ({', '.join(where)})")
    for column in columns:
        cell = column.cells.get(info.name)
        if cell and cell.outcome and cell.status == "skip" and cell.outcome.skip_reason:
            parts.append(f"franz-go skipped it on {column.title}: {cell.outcome.skip_reason}")
        if cell and cell.tracebacks:
            distinct = sorted({tb.short() for tb in cell.tracebacks})
            parts.append(
                f"{column.title}: {len(cell.tracebacks)} broker traceback(s): "
                + "; ".join(f"`{d[:160]}`" for d in distinct[:3])
            )
        if cell and cell.dead:
            parts.append(f"{column.title}: broker(s) {cell.dead} exited")
    return "; ".join(parts).replace("|", "\\|")


def _skip_summary(skips: list[str]) -> str:
    reasons: dict[str, int] = {}
    for skip in skips:
        reason = skip.split(": ", 1)[1] if ": " in skip else skip
        reasons[reason] = reasons.get(reason, 0) + 1
    return "franz-go skipped " + "; ".join(f"{n} subtest(s): {r}" for r, n in reasons.items())


def _features(column: Column) -> str:
    have = [f.name for f in franz_go.FEATURES if all(k in column.advertised for k in f.api_keys)]
    return ", ".join(have) or "none of " + ", ".join(f.name for f in franz_go.FEATURES)


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, cwd=franz_go.REPO
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def report(tests: list[KgoTest], columns: list[Column], args: argparse.Namespace) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    version_file = franz_go.CACHE / "VERSION"
    version = version_file.read_text().strip() if version_file.exists() else "?"
    records = args.records or "500000 (franz-go's default)"
    out = [
        "# franz-go pkg/kgo integration tests: Apache Kafka vs Sluice",
        "",
        f"Measured {now}: github.com/twmb/franz-go {version}, Apache Kafka {kafka_version()}, "
        f"Sluice {args.sluice_version}; KGO_TEST_RECORDS {records}; "
        f"one process per test, timeout {args.timeout:.0f} s ({args.etl_timeout:.0f} s for "
        "ETL tests). Produced by `python -m tests.peers.run`.",
        "",
        "| target | tests | pass | fail | timeout | skipped | startup | total "
        "| features advertised |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in columns:
        if c.unavailable:
            out.append(f"| {c.title} | not run: {c.unavailable} | | | | | | | |")
            continue
        counts = {
            s: sum(1 for x in c.cells.values() if x.status == s)
            for s in ("pass", "fail", "timeout", "error", "skip", "feature")
        }
        restarts = f" ({c.restarts} restarts)" if c.restarts else ""
        out.append(
            f"| {c.title} | {len(c.cells)} | {counts['pass']} | {counts['fail'] + counts['error']}"
            f" | {counts['timeout']} | {counts['skip'] + counts['feature']} | "
            f"{c.startup_seconds:.0f} s | {c.seconds:.0f} s{restarts} | {_features(c)} |"
        )
    out += ["", "| test | " + " | ".join(c.title for c in columns) + " | note |"]
    out.append("|---" * (len(columns) + 2) + "|")
    for info in tests:
        cells = []
        for c in columns:
            cell = c.cells.get(info.name)
            cells.append("n/a" if cell is None else cell.text())
        out.append(f"| {info.name} | " + " | ".join(cells) + f" | {_note(info, columns)} |")

    skipped = [
        (info, c, c.cells[info.name])
        for info in tests
        for c in columns
        if info.name in c.cells and c.cells[info.name].status == "feature"
    ]
    if skipped:
        out += ["", "## Skipped by feature detection (ApiVersions)", ""]
        for info, c, cell in skipped:
            for f in cell.missing:
                keys = ", ".join(str(k) for k in f.api_keys if k not in c.advertised)
                out.append(
                    f"- {info.name} on {c.title}: {f.name} (keys {keys} not advertised) — {f.issue}"
                )

    failures = [
        (info, c, c.cells[info.name])
        for info in tests
        for c in columns
        if info.name in c.cells and c.cells[info.name].status in ("fail", "timeout", "error")
    ]
    if failures or any(c.startup_tracebacks for c in columns):
        out += ["", "## Failures: last output lines and broker tracebacks"]
    for c in columns:
        if c.startup_tracebacks:
            out += ["", f"### {c.title}: tracebacks while starting", ""]
            out += [f"- `{tb.short()}`" for tb in c.startup_tracebacks]
    for info, c, cell in failures:
        assert cell.outcome is not None
        out += ["", f"### {info.name} on {c.title}: {cell.status} after {cell.seconds:.1f} s", ""]
        out.append(f"Output: `{cell.outcome.log_path.relative_to(franz_go.REPO)}`")
        out += ["", "```"]
        out += [line[:LINE_WIDTH] for line in cell.outcome.tail]
        out.append("```")
        if cell.tracebacks:
            out += ["", "Broker tracebacks during the test:", ""]
            counted: dict[Traceback, int] = {}
            for tb in cell.tracebacks:
                counted[tb] = counted.get(tb, 0) + 1
            for tb, n in counted.items():
                out.append(f"- {n} x `{tb.short()}` (logged: `{tb.logged}`)")
        if cell.dead:
            out.append(f"\nBrokers {cell.dead} had exited after the test.")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        binary = franz_go.build()
    except franz_go.BuildUnavailable as exc:
        print(f"franz-go peer suite cannot run here: {exc}", file=sys.stderr)
        return 2
    names = franz_go.list_tests(binary)
    infos = franz_go.analyse(names)
    pattern = re.compile(args.tests) if args.tests else None
    tests = [
        i for i in infos.values() if i.needs_broker and (pattern is None or pattern.search(i.name))
    ]
    print(
        f"{len(names)} tests in the binary, {sum(i.needs_broker for i in infos.values())} use a "
        f"broker, {len(tests)} selected; targets: {', '.join(args.targets)}",
        flush=True,
    )
    changed = _git("status", "--porcelain", "--", "dataplane")
    args.sluice_version = _git("rev-parse", "--short", "HEAD") + (
        " with uncommitted changes in dataplane/" if changed else ""
    )
    run_dir = RUNS / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    columns = [run_column(key, tests, args, run_dir / key) for key in args.targets]
    text = report(tests, columns, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"\nwrote {args.out} (test output under {run_dir})\n")
    print(text)
    bad = any(
        c.status in ("fail", "timeout", "error") for col in columns for c in col.cells.values()
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
