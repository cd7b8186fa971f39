"""Run the benchmark suite: Sluice beside Apache Kafka, Redis Streams and the machine's limits.

    python -m bench.run_all                  full run (~5 min on 2 cores), updates bench/RESULTS.md
    python -m bench.run_all --quick          10x smaller, for a smoke test
    python -m bench.run_all --only produce,consume --skip-kafka
    python -m bench.run_all --profile        cProfile the Sluice broker per workload instead

Benches: disk, loopback, redis, produce, consume, one-record, java, and replication (opt-in:
``--only replication``; printed, not recorded). See bench/README.md.
Nothing here asserts: a target that is missed is reported as FAIL and the run goes on; a bench
that cannot run (tool missing, broker error) is reported with its reason.
"""

from __future__ import annotations

import argparse
import datetime
import io
import pstats
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import baselines, bench_replication, clients, javaperf, one_record
from bench.common import (
    REPO,
    Failed,
    Figure,
    Measure,
    command_version,
    fmt_bytes_rate,
    fmt_rate,
    kill_all_children,
    machine_info,
    median_of,
    tool,
)
from bench.servers import KafkaServer, RedisServer, SluiceServer
from tests.support.kafka_oracle import kafka_version

BENCHES = ("disk", "loopback", "redis", "produce", "consume", "one-record", "java", "replication")
# Run when --only is not given. replication is opt-in until Sluice brokers replicate; its
# figures are printed, never recorded in RESULTS.md.
DEFAULT_BENCHES = tuple(b for b in BENCHES if b != "replication")
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
PROFILES = Path(__file__).resolve().parent / "profiles"
SMALL, LARGE = 100, 10 * 1024


@dataclass
class Plan:
    quick: bool
    only: set[str]
    skip_kafka: bool
    client: str

    @property
    def scale(self) -> int:
        return 10 if self.quick else 1

    @property
    def small_count(self) -> int:
        return 1_000_000 // self.scale

    @property
    def large_count(self) -> int:
        return 100_000 // self.scale

    @property
    def repeats(self) -> int:
        """Produce/consume/dd repetitions (medians are reported): noise on a shared machine."""
        return 1 if self.quick else 5

    @property
    def warmup_rounds(self) -> int:
        return 1 if self.quick else 3

    @property
    def dd_mib(self) -> int:
        return 1024 // self.scale

    @property
    def iperf_seconds(self) -> int:
        return 2 if self.quick else 5

    @property
    def one_record_seconds(self) -> float:
        return 2.0 if self.quick else 10.0

    @property
    def one_record_warmup(self) -> float:
        return 0.5 if self.quick else 3.0

    def wants(self, bench: str) -> bool:
        return bench in self.only

    @property
    def label(self) -> str:
        if self.quick:
            return "quick"
        if self.only != set(DEFAULT_BENCHES) or self.skip_kafka:
            return "partial"
        return "full"


@dataclass
class Run:
    plan: Plan
    info: dict[str, str]
    versions: dict[str, str] = field(default_factory=dict)
    baseline: dict[str, Figure] = field(default_factory=dict)
    # figures[workload][system] -> Figure
    figures: dict[str, dict[str, Figure]] = field(default_factory=dict)
    workload_size: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def put(self, workload: str, system: str, figure: Figure, size: int) -> None:
        self.figures.setdefault(workload, {})[system] = figure
        self.workload_size[workload] = size
        print(f"  {workload:<34} {system:<7} {describe(figure)}", flush=True)


def describe(figure: Figure) -> str:
    if isinstance(figure, Failed):
        return f"n/a: {figure.reason}"
    text = f"{fmt_rate(figure.value)} {figure.unit}"
    if figure.bytes and figure.seconds:
        text += f", {fmt_bytes_rate(figure.bytes_per_s)}"
    if figure.seconds:
        text += f", {figure.seconds:.2f} s"
    if figure.broker_cpu is not None:
        text += f", server CPU {figure.broker_cpu:.2f} s"
    if "client_cpu" in figure.extra:
        text += f", client CPU {figure.extra['client_cpu']:.2f} s"
    if "p50_ms" in figure.extra:
        text += f", p50 {figure.extra['p50_ms']:.2f} ms, p99 {figure.extra['p99_ms']:.2f} ms"
    if "others" in figure.extra:
        text += f", others' CPU {figure.extra['others']:.0%}"
    if "runs" in figure.extra:
        text += ", median of " + "/".join(fmt_rate(v) for v in figure.extra["runs"])
    return text


# ---------------------------------------------------------------------------- workloads


def p_name(size: int, count: int) -> str:
    return f"produce {count:,} x {_size(size)}"


def c_name(size: int, count: int) -> str:
    return f"consume {count:,} x {_size(size)}"


def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


ONE_RECORD = "one-record produce, 50 connections"


def run_broker_benches(
    run: Run, system: str, server: Any, client: clients.Client, files: dict[int, Path]
) -> None:
    plan = run.plan
    sets = [(SMALL, plan.small_count), (LARGE, plan.large_count)]
    if plan.wants("produce") or plan.wants("consume"):
        # Warm-up, not measured: Kafka's JIT needs a few million records to settle (measured:
        # the first 1M after 1M of warm-up ran at 0.65x the speed of the next).
        try:
            server.create_topic("bench-warmup")
            for _ in range(plan.warmup_rounds):
                client.produce(server.bootstrap, "bench-warmup", files[SMALL], plan.small_count)
            client.consume(server.bootstrap, "bench-warmup", plan.small_count)
        except Exception as exc:
            print(f"  warm-up on {system} failed: {exc}", flush=True)
    if plan.wants("produce") or plan.wants("consume"):
        for size, count in sets:
            produced, consumed = produce_consume(
                run, server, client, files[size], size=size, count=count
            )
            if plan.wants("produce"):
                run.put(p_name(size, count), system, produced, size)
            if plan.wants("consume"):
                run.put(c_name(size, count), system, consumed, size)
            if not server.alive():
                print(f"  {system} died; log tail:\n{server.log_tail()}", flush=True)
                return
    if plan.wants("one-record"):
        figure = one_record.measure(
            server,
            "bench-one",
            warmup=plan.one_record_warmup,
            seconds=plan.one_record_seconds,
        )
        run.put(ONE_RECORD, system, figure, SMALL)
    if plan.wants("java"):
        reason = javaperf.available()
        for size, count in sets:
            topic = f"java-{size}"
            name = f"{p_name(size, count)} (Java perf tool)"
            if reason:
                run.put(name, system, Failed(reason), size)
                continue
            try:
                server.create_topic(topic)
                figure = javaperf.produce(server, topic, count, size, server_workdir(server))
            except Exception as exc:
                figure = Failed(str(exc)[:300])
            run.put(name, system, figure, size)
            if size == SMALL:
                cname = f"{c_name(size, count)} (Java perf tool)"
                if isinstance(figure, Failed):
                    run.put(cname, system, Failed("nothing to consume: produce failed"), size)
                else:
                    cfig = javaperf.consume(server, topic, count, size, server_workdir(server))
                    run.put(cname, system, cfig, size)


def produce_consume(
    run: Run, server: Any, client: clients.Client, records: Path, *, size: int, count: int
) -> tuple[Figure, Figure]:
    """Produce then consume, ``repeats`` times, each time into a new topic; medians."""
    produced: list[Figure] = []
    consumed: list[Figure] = []
    for rep in range(run.plan.repeats):
        topic = f"bench-{size}-{rep}"
        try:
            server.create_topic(topic)
        except Exception as exc:
            failed = Failed(f"creating topic: {exc}"[:300])
            return failed, failed
        figure = clients.measure_produce(client, server, topic, records, count=count, size=size)
        produced.append(figure)
        if isinstance(figure, Failed):
            consumed.append(Failed("nothing to consume: produce failed"))
            break
        consumed.append(clients.measure_consume(client, server, topic, count=count, size=size))
    return median_of(produced), median_of(consumed)


def server_workdir(server: Any) -> Path:
    return Path(getattr(server, "workdir", None) or server.oracle.workdir)


def run_baselines(run: Run, workdir: Path) -> None:
    plan = run.plan
    if plan.wants("disk"):
        figure = baselines.disk_write(workdir, plan.dd_mib, runs=plan.repeats)
        run.baseline["disk"] = figure
        print(f"  disk sequential write       {describe_bps(figure)}", flush=True)
    if plan.wants("loopback"):
        figure = baselines.loopback(plan.iperf_seconds)
        run.baseline["loopback"] = figure
        print(f"  loopback TCP                {describe_bps(figure)}", flush=True)
    if plan.wants("redis"):
        reason = RedisServer.unavailable()
        keys = ("redis-100", "redis-10240", "redis-one")
        if reason:
            for key in keys:
                run.baseline[key] = Failed(reason)
            return
        redis = RedisServer(workdir / "redis")
        try:
            redis.start()
            run.baseline["redis-100"] = baselines.redis_benchmark(
                redis, "s100", size=SMALL, ops=plan.small_count, pipeline=1000
            )
            run.baseline["redis-10240"] = baselines.redis_benchmark(
                redis, "s10k", size=LARGE, ops=plan.large_count, pipeline=1000
            )
            run.baseline["redis-one"] = baselines.redis_benchmark(
                redis, "sone", size=SMALL, ops=200_000 // plan.scale, pipeline=1
            )
        except Exception as exc:
            for key in keys:
                run.baseline.setdefault(key, Failed(str(exc)[:300]))
        finally:
            redis.stop()
        for key in keys:
            print(f"  {key:<27} {describe(run.baseline[key])}", flush=True)


def describe_bps(figure: Figure) -> str:
    if isinstance(figure, Failed):
        return f"n/a: {figure.reason}"
    text = f"{fmt_bytes_rate(figure.value)} ({figure.note})"
    if "runs" in figure.extra:
        text += ", median of " + ", ".join(fmt_bytes_rate(v) for v in figure.extra["runs"])
    return text


def with_server(make: Callable[[], Any], body: Callable[[Any], None], what: str) -> str | None:
    """Start a server, run ``body``, always stop it. Returns an error text or None."""
    server = None
    try:
        server = make()
        server.start()
        body(server)
        return None
    except Exception as exc:
        traceback.print_exc()
        return f"{what}: {type(exc).__name__}: {exc}"[:300]
    finally:
        if server is not None:
            server.stop()


# ---------------------------------------------------------------------------- reporting


def ratio(a: Figure | None, b: Figure | None, *, by_bytes: bool = False) -> float | None:
    if not isinstance(a, Measure) or not isinstance(b, Measure):
        return None
    num = a.bytes_per_s if by_bytes else a.value
    den = b.value if b.unit == "B/s" else (b.bytes_per_s if by_bytes else b.value)
    return num / den if den else None


def fmt_ratio(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"


def redis_peer(run: Run, workload: str) -> Figure | None:
    """The Redis figure a workload compares with: XADD is a write, so none for consumers."""
    if workload == ONE_RECORD:
        return run.baseline.get("redis-one")
    if workload.startswith("consume"):
        return None
    return run.baseline.get(f"redis-{run.workload_size.get(workload, SMALL)}")


def figures_table(run: Run) -> list[str]:
    kafka_label = f"Kafka {run.versions.get('kafka', '')}".strip()
    head = (
        "| workload | system | rate | MB/s | server CPU µs/rec | client CPU µs/rec | others' CPU "
        "| x Kafka | x Redis | x disk | x loopback |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for workload, by_system in run.figures.items():
        kafka = by_system.get("Kafka")
        for system, figure in by_system.items():
            label = "Sluice" if system == "Sluice" else kafka_label
            if isinstance(figure, Failed):
                lines.append(f"| {workload} | {label} | n/a: {figure.reason[:120]} |||||||||")
                continue
            cpu = "-"
            if figure.broker_cpu is not None and figure.records:
                cpu = f"{figure.broker_cpu / figure.records * 1e6:.1f}"
            others = f"{figure.extra['others']:.0%}" if "others" in figure.extra else "-"
            client_cpu = "-"
            if "client_cpu" in figure.extra and figure.records:
                client_cpu = f"{figure.extra['client_cpu'] / figure.records * 1e6:.1f}"
            rate = f"{fmt_rate(figure.value)} {figure.unit}"
            if "runs" in figure.extra:
                runs = figure.extra["runs"]
                rate += f" ({fmt_rate(runs[0])}-{fmt_rate(runs[-1])})"
            if "p50_ms" in figure.extra:
                rate += (
                    f" (p50 {figure.extra['p50_ms']:.2f} ms, p99 {figure.extra['p99_ms']:.1f} ms)"
                )
            x_kafka = ratio(figure, kafka) if system != "Kafka" else None
            peer = redis_peer(run, workload)
            x_redis = ratio(figure, peer) if peer is not None else None
            x_disk = ratio(figure, run.baseline.get("disk"), by_bytes=True)
            x_loop = ratio(figure, run.baseline.get("loopback"), by_bytes=True)
            lines.append(
                f"| {workload} | {label} | {rate} | {figure.bytes_per_s / 1e6:,.1f} | {cpu} "
                f"| {client_cpu} | {others} "
                f"| {fmt_ratio(x_kafka)} | {fmt_ratio(x_redis)} | {fmt_ratio(x_disk)} "
                f"| {fmt_ratio(x_loop)} |"
            )
    return lines


def baseline_table(run: Run) -> list[str]:
    names = {
        "disk": "disk sequential write (dd, conv=fdatasync)",
        "loopback": "loopback TCP",
        "redis-100": "Redis Streams XADD 100 B, pipeline 1000, 50 clients",
        "redis-10240": "Redis Streams XADD 10 KiB, pipeline 1000, 50 clients",
        "redis-one": "Redis Streams XADD 100 B, no pipeline, 50 clients",
    }
    lines = ["| baseline | figure |", "|---|---:|"]
    for key, title in names.items():
        figure = run.baseline.get(key)
        if figure is None:
            continue
        if isinstance(figure, Failed):
            text = f"n/a: {figure.reason[:120]}"
        elif figure.unit == "B/s":
            text = f"{fmt_bytes_rate(figure.value)} ({figure.note})"
            if "runs" in figure.extra:
                runs = ", ".join(fmt_bytes_rate(v) for v in figure.extra["runs"])
                text += f", median of {runs}"
            if key == "loopback":
                text = f"{figure.value * 8 / 1e9:.1f} Gbit/s = " + text
        else:
            text = f"{fmt_rate(figure.value)} ops/s, {fmt_bytes_rate(figure.bytes_per_s)}"
            if figure.broker_cpu is not None and figure.records:
                text += f", server CPU {figure.broker_cpu / figure.records * 1e6:.1f} µs/op"
        lines.append(f"| {title} | {text} |")
    return lines


@dataclass
class Target:
    name: str
    measured: float | None
    threshold: float
    detail: str

    @property
    def verdict(self) -> str:
        if self.measured is None:
            return "n/a"
        return "PASS" if self.measured >= self.threshold else "FAIL"


def targets(run: Run) -> list[Target]:
    plan = run.plan
    out: list[Target] = []

    def fig(workload: str, system: str = "Sluice") -> Figure | None:
        return run.figures.get(workload, {}).get(system)

    for size, count in ((SMALL, plan.small_count), (LARGE, plan.large_count)):
        p, c = p_name(size, count), c_name(size, count)
        out.append(
            Target(
                f"{p}: >= 0.5x Kafka records/s",
                ratio(fig(p), fig(p, "Kafka")),
                0.5,
                "Sluice / Kafka, same client",
            )
        )
        out.append(
            Target(
                f"{p}: >= 1.5x Redis Streams XADD/s",
                ratio(fig(p), run.baseline.get(f"redis-{size}")),
                1.5,
                "Sluice records/s / XADD/s (pipeline 1000)",
            )
        )
        if size == LARGE:
            out.append(
                Target(
                    f"{p}: >= 0.6x disk write rate",
                    ratio(fig(p), run.baseline.get("disk"), by_bytes=True),
                    0.6,
                    "payload MB/s / dd MB/s",
                )
            )
        out.append(
            Target(
                f"{c}: >= 2x produce",
                ratio(fig(c), fig(p)),
                2.0,
                "consume records/s / produce records/s",
            )
        )
    one = fig(ONE_RECORD)
    out.append(
        Target(
            f"{ONE_RECORD}: >= 25,000 requests/s",
            one.value / 25_000 if isinstance(one, Measure) else None,
            1.0,
            f"{fmt_rate(one.value)} req/s" if isinstance(one, Measure) else "not measured",
        )
    )
    return out


def targets_table(run: Run) -> list[str]:
    lines = ["| target | measured (x target) | verdict |", "|---|---:|---|"]
    for t in targets(run):
        if t.measured is None:
            lines.append(f"| {t.name} | not measured | n/a |")
            continue
        shown = f"{t.measured:.2f}" if "25,000" not in t.name else t.detail
        if "25,000" in t.name:
            shown = f"{t.detail} ({t.measured:.2f}x)"
        lines.append(f"| {t.name} | {shown} | {t.verdict} |")
    return lines


def report(run: Run) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    plan = run.plan
    out = [f"## {plan.label.capitalize()} run, {now}", ""]
    machine = ", ".join(f"{k} {v}" for k, v in run.info.items())
    out.append(f"Machine: {machine}.")
    versions = "; ".join(f"{k}: {v}" for k, v in run.versions.items())
    out.append(f"Versions: {versions}.")
    out.append(
        f"Sizes: {plan.small_count:,} x {SMALL} B, {plan.large_count:,} x {_size(LARGE)}; "
        f"client {plan.client}; acks=1, linger.ms=10, batch.size=1000000, one partition; "
        f"suite took {time.monotonic() - run.started:.0f} s."
    )
    out += ["", "### Baselines", "", *baseline_table(run), ""]
    out += ["### Figures", "", *figures_table(run), ""]
    out += [
        "Rates of produce and consume are the median of the repetitions (range in brackets). "
        "x Kafka: Sluice / Kafka on the same workload. x Redis: records/s over Redis XADD/s of "
        "the same value size (pipelined for batched produce, unpipelined for one-record). "
        "x disk / x loopback: payload bytes/s over the dd / iperf3 figure. Server CPU: CPU "
        "seconds of the broker process (all threads) per record or request; client CPU: the "
        "same for the client processes (kcat, load generators, Java tools excluded); client and "
        "broker share the 2 cores. Others' CPU: share of all cores used by other processes on "
        "the machine (and hypervisor steal) during the measurement; high values mean a noisy "
        "figure.",
        "",
        "### Targets",
        "",
        *targets_table(run),
        "",
    ]
    return "\n".join(out)


def record(label: str, section: str) -> None:
    begin, end = f"<!-- BEGIN run:{label} -->", f"<!-- END run:{label} -->"
    text = RESULTS.read_text() if RESULTS.exists() else _RESULTS_HEAD
    block = f"{begin}\n{section.rstrip()}\n{end}"
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        _, after = rest.split(end, 1)
        text = before + block + after
    else:
        anchor = "<!-- runs -->"
        if anchor in text:
            text = text.replace(anchor, f"{anchor}\n\n{block}", 1)
        else:
            text = text.rstrip() + f"\n\n{block}\n"
    RESULTS.write_text(text)


_RESULTS_HEAD = """# Benchmark results

Written by `python -m bench.run_all` (see bench/README.md). Each kind of run (full, quick,
partial, profile) replaces its own section; produce/consume/dd figures are medians of 5 on a
shared machine (see the others' CPU column), the rest single runs.

<!-- runs -->
"""


# ---------------------------------------------------------------------------- profile


def run_profile(plan: Plan, workdir: Path, client: clients.Client) -> str:
    """cProfile the Sluice broker on produce 100 B, consume 100 B and one-record requests."""
    profile_dir = workdir / "profiles"
    profile_dir.mkdir()
    PROFILES.mkdir(exist_ok=True)
    server = SluiceServer(workdir / "sluice-profiled", profile_dir=profile_dir)
    count, large = plan.small_count, plan.large_count
    records = clients.record_file(workdir, SMALL, count)
    large_records = clients.record_file(workdir, LARGE, large)
    summaries: list[str] = []
    try:
        server.start()
        server.create_topic("prof-100")
        server.create_topic("prof-10k")
        server.create_topic("bench-one")
        steps: list[tuple[str, Callable[[], Figure]]] = [
            (
                "produce-100B",
                lambda: clients.measure_produce(
                    client, server, "prof-100", records, count=count, size=SMALL
                ),
            ),
            (
                "consume-100B",
                lambda: clients.measure_consume(
                    client, server, "prof-100", count=count, size=SMALL
                ),
            ),
            (
                "produce-10KiB",
                lambda: clients.measure_produce(
                    client, server, "prof-10k", large_records, count=large, size=LARGE
                ),
            ),
            (
                "one-record",
                lambda: one_record.measure(
                    server, "bench-one", warmup=0.5, seconds=plan.one_record_seconds
                ),
            ),
        ]
        for name, step in steps:
            server.profile_start(name)
            figure = step()
            prof = server.profile_stop(name)
            print(f"  {name:<14} under cProfile: {describe(figure)}", flush=True)
            if not prof.exists():
                summaries.append(f"### {name}\n\nno profile written\n")
                continue
            text = _profile_text(prof, figure)
            (PROFILES / f"{name}.txt").write_text(text)
            summaries.append(f"### {name}\n\n```\n{_top(prof, 12)}```\n")
    finally:
        server.stop()
    return "\n".join(summaries)


def _profile_text(prof: Path, figure: Figure) -> str:
    buf = io.StringIO()
    buf.write(f"# {prof.stem}: {describe(figure)}\n")
    stats = pstats.Stats(str(prof), stream=buf)
    stats.strip_dirs().sort_stats("tottime").print_stats(35)
    stats.sort_stats("cumulative").print_stats(35)
    # Keep machine paths (temporary dirs, the interpreter's prefix) out of the recorded text.
    text = buf.getvalue().replace(str(prof), prof.name).replace(str(REPO) + "/", "")
    return re.sub(r"\S*/(lib/python3\.\d+/)", r"\1", text)


def _top(prof: Path, n: int) -> str:
    stats = pstats.Stats(str(prof))
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:n]  # type: ignore[attr-defined]
    out = [f"{'tottime':>8} {'share':>6} {'calls':>9}  function"]
    for (filename, line, func), (_, ncalls, tt, _ct, _) in rows:
        short = filename.replace(str(REPO) + "/", "")
        if "site-packages/" in short:
            short = short.split("site-packages/", 1)[1]
        short = re.sub(r"^\S*/(lib/python3\.\d+/)", r"\1", short)
        out.append(f"{tt:8.2f} {tt / total:6.1%} {ncalls:9d}  {short}:{line}({func})")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10x smaller workloads (smoke)")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(BENCHES)}")
    parser.add_argument("--skip-kafka", action="store_true", help="do not start Apache Kafka")
    parser.add_argument(
        "--client", choices=("kcat", "confluent"), default=None, help="default: kcat if present"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile Sluice per workload")
    parser.add_argument("--no-record", action="store_true", help="do not update RESULTS.md")
    parser.add_argument("--workdir", help="parent of the temporary data dirs (default: TMPDIR)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    only = set(DEFAULT_BENCHES)
    if args.only:
        only = {x.strip() for x in args.only.split(",") if x.strip()}
        unknown = only - set(BENCHES)
        if unknown:
            print(f"unknown bench(es) {sorted(unknown)}; choose from {BENCHES}", file=sys.stderr)
            return 2
    client_name = args.client or ("kcat" if clients.Kcat.available() else "confluent")
    plan = Plan(args.quick, only, args.skip_kafka, client_name)
    run = Run(plan, machine_info())

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    workdir = Path(tempfile.mkdtemp(prefix="sluice-bench-", dir=args.workdir))
    print(f"bench: workdir {workdir}; {run.info}", flush=True)
    try:
        client: clients.Client = (
            clients.Kcat(workdir) if client_name == "kcat" else clients.Confluent(workdir)
        )
        if args.profile:
            section = run_profile(plan, workdir, client)
            header = (
                f"## Profile run, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}\n\n"
                "Top functions by own time (cProfile, Sluice broker only; full listings in "
                "bench/profiles/).\n\n"
            )
            if not args.no_record:
                record("profile", header + section)
            print(section)
            return 0
        run.versions = versions(client)
        print("bench: baselines", flush=True)
        run_baselines(run, workdir)
        broker_benches = {"produce", "consume", "one-record", "java"} & only
        if broker_benches:
            files = {}
            if {"produce", "consume"} & only:
                files = {
                    SMALL: clients.record_file(workdir, SMALL, plan.small_count),
                    LARGE: clients.record_file(workdir, LARGE, plan.large_count),
                }
            print("bench: Sluice", flush=True)
            error = with_server(
                lambda: SluiceServer(workdir / "sluice"),
                lambda s: run_broker_benches(run, "Sluice", s, client, files),
                "Sluice",
            )
            if error:
                print(f"  {error}", flush=True)
            if not plan.skip_kafka:
                reason = KafkaServer.unavailable()
                if reason:
                    print(f"bench: Kafka skipped: {reason}", flush=True)
                else:
                    print("bench: Apache Kafka", flush=True)
                    error = with_server(
                        lambda: KafkaServer(workdir / "kafka"),
                        lambda s: run_broker_benches(run, "Kafka", s, client, files),
                        "Kafka",
                    )
                    if error:
                        print(f"  {error}", flush=True)
        if "replication" in only:
            bench_replication.run(
                bench_replication.Settings(plan.quick, plan.skip_kafka),
                workdir,
                client,
                run.versions.get("kafka", ""),
            )
            if only == {"replication"}:
                return 0
        text = report(run)
        print()
        print(text)
        if not args.no_record:
            record(plan.label, text)
            print(f"bench: recorded in {RESULTS.relative_to(REPO)}")
        return 0
    finally:
        kill_all_children()
        shutil.rmtree(workdir, ignore_errors=True)


def versions(client: clients.Client) -> dict[str, str]:
    out = {"client": client.version()}
    out["kafka"] = kafka_version() or "absent"
    if tool("redis-server"):
        out["redis"] = command_version(["redis-server", "--version"]).split(" sha=")[0]
    return out


if __name__ == "__main__":
    sys.exit(main())
