"""WebAssembly transforms: records/s per core, added latency, and what a transform costs the
broker's produce path, beside the same logic in plain Python.

    python -m bench.bench_transforms [--quick] [--no-record]

Needs the guests of ``make transform-guests`` (.cache/transforms) and kcat. Logic: identity
and a JSON filter (keeps objects with "level": "error"; half the input), 100-byte values.
Guests: Redpanda's data-transforms ABI (the Go SDK examples, one host call per record) and
Sluice's batch ABI (the C examples, one call per batch).

engine     records/s per core of the guest alone, in this process: batches of 1,000 records
           (the input decoded from a stored batch) through ``transforms.runtime.Instance``,
           1,000,000 records (100,000 with --quick); CPU seconds of the process (the guest's
           thread). The peer: the same logic as a Python function over the same batches
           (decode the records, apply the logic, encode the outputs), what the broker would
           spend per record if it ran the logic in Python.
broker     the transform run by a broker: the input topic (1 partition) is filled first with
           the records (kcat), then the transform is deployed; records/s from the runner's
           processed count between two status reads, and the broker's CPU over the same
           interval (all threads: reading, the guest, producing the outputs with acks=all,
           committing). The peer: ``bench/transform_loop.py``, a confluent-kafka
           consumer-producer loop in its own process doing the same (outputs acknowledged,
           then the input offset committed); its CPU plus the broker's.
latency    produce to the output's availability: 2,000 records/s for 10 s (3 s) after 1 s of
           warm-up, each value carries its produce time; a consumer of the output topic
           takes now - that time. Baseline: the same consumer on the input topic (no
           transform). Reported p50/p99 and the added p50.
produce    kcat's produce of 1,000,000 x 100 B (the produce bench's settings) into the input
           topic of a running identity transform, against the same into a topic without one;
           the ratio (target: at least 0.5).
other      librdkafka's per-message produce latency (acks=all, linger.ms=5) at 2,000/s on
           another topic for 3 s, with the broker idle and while the Go JSON filter works
           through a backlog of 1,000,000 records: the event loop must not notice the guest.

Targets (issue 14): Redpanda ABI at least 100k records/s per core, batch ABI at least 1M.
Results go to the "transforms" section of bench/RESULTS.md (unless --no-record).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from bench import clients
from bench.common import REPO, kill_all_children, machine_info, python, replace_section
from bench.servers import SluiceServer
from tests.support.transforms import TransformsAdmin
from transforms.module import validate_module, validate_spec
from transforms.records import InputBatch, InputRecord, OutputRecord, encode_output
from transforms.runtime import Runtime

GUESTS = REPO / ".cache" / "transforms"
RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN, END = "<!-- BEGIN transforms -->", "<!-- END transforms -->"
SIZE = 100
BATCH = 1000
RATE = 2000
BUSY_BACKLOG = 1_000_000
"""Records the busy transform of the "other" bench works through (~7 s for the Go filter)."""
LOGICS = ("identity", "jsonfilter")
GUEST_OF = {"redpanda": "go", "batch": "c"}
KEEP = b'{"level":"error","msg":"'
DROP = b'{"level":"info","msg":"'


def value(i: int, json_values: bool) -> bytes:
    """A 100-byte value: printable text, or a JSON object the filter keeps (odd i) or drops."""
    if not json_values:
        return (b"v%09d-" % i).ljust(SIZE, b"x")
    head = KEEP if i % 2 else DROP
    return head + b"x" * (SIZE - len(head) - 2) + b'"}'


def keeps(v: bytes | None) -> bool:
    if v is None:
        return False
    try:
        doc = json.loads(v)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("level") == "error"


PYTHON_LOGIC: dict[str, Callable[[InputRecord], bool]] = {
    "identity": lambda r: True,
    "jsonfilter": lambda r: keeps(r.value),
}


@dataclass
class Row:
    what: str
    figures: str


class Report:
    def __init__(self) -> None:
        self.rows: dict[str, list[Row]] = {}

    def put(self, section: str, what: str, figures: str) -> None:
        self.rows.setdefault(section, []).append(Row(what, figures))
        print(f"  {section:<8} {what:<46} {figures}", flush=True)


# ------------------------------------------------------------------ engine


def engine(report: Report, count: int) -> dict[str, float]:
    """Records/s per core in this process; returns them by "abi/logic" for the ratios."""
    runtime = Runtime()
    rates: dict[str, float] = {}
    for logic in LOGICS:
        json_values = logic == "jsonfilter"
        records = [
            InputRecord(i, 1_700_000_000_000 + i, b"k%d" % (i % 100), value(i, json_values))
            for i in range(BATCH)
        ]
        batch = InputBatch.of(records)
        rounds = max(1, count // BATCH)
        for abi, family in GUEST_OF.items():
            path = GUESTS / family / f"{logic}.wasm"
            if not path.exists():
                report.put("engine", f"{abi} ({family}) {logic}", "n/a: guest not built")
                continue
            compiled = runtime.compile(validate_module(path.read_bytes()))
            spec = validate_spec("bench", "in", ["out"])
            instance = runtime.instantiate(compiled, spec)
            recycled = 0
            try:
                instance.process(batch)  # warm-up: the guest's start
                cpu0, t0 = time.process_time(), time.perf_counter()
                for _ in range(rounds):
                    result = instance.process(batch)
                    if result.memory_nearly_full:  # as the broker's runners do
                        instance.close()
                        instance = runtime.instantiate(compiled, spec)
                        recycled += 1
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
            finally:
                instance.close()
            expected = BATCH if logic == "identity" else BATCH // 2
            assert result.record_count == expected, (abi, logic, result.record_count)
            rate = rounds * BATCH / cpu
            rates[f"{abi}/{logic}"] = rate
            report.put(
                "engine",
                f"{abi} ({family} guest) {logic}",
                f"{rate:,.0f} records/s per core ({rounds * BATCH / wall:,.0f}/s wall"
                + (f"; {recycled} fresh instances, memory nearly full)" if recycled else ")"),
            )
        keep = PYTHON_LOGIC[logic]
        cpu0, t0 = time.process_time(), time.perf_counter()
        for _ in range(rounds):
            out = [
                OutputRecord("out", r.key, r.value, r.headers) for r in batch.decode() if keep(r)
            ]
            encode_output(out)
        cpu = time.process_time() - cpu0
        rate = rounds * BATCH / cpu
        rates[f"python/{logic}"] = rate
        ratios = ", ".join(
            f"{abi} {rates[f'{abi}/{logic}'] / rate:.1f}x"
            for abi in GUEST_OF
            if f"{abi}/{logic}" in rates
        )
        report.put(
            "engine",
            f"plain Python {logic}",
            f"{rate:,.0f} records/s per core (guests: {ratios} of it)",
        )
    return rates


# ------------------------------------------------------------------ broker


def fill(workdir: Path, bootstrap: str, topic: str, count: int, json_values: bool) -> float:
    """Produce ``count`` values (one partition) with kcat; the seconds it took."""
    path = workdir / f"values-{'json' if json_values else 'text'}-{count}.txt"
    if not path.exists():
        with open(path, "wb") as out:
            for i in range(count):
                out.write(value(i, json_values) + b"\n")
    return clients.Kcat(workdir).produce(bootstrap, topic, path, count)


def status(admin: TransformsAdmin, name: str) -> dict[str, Any]:
    parts = admin.partitions(name)
    return parts[0] if parts else {}


def run_transform(  # noqa: PLR0917
    server: SluiceServer, admin: TransformsAdmin, name: str, wasm: bytes, source: str, count: int
) -> tuple[float, float]:
    """Deploy over a filled input; (records/s, records per broker CPU second) while it runs."""
    target = f"{source}-out-{name}"
    server.create_topic(target)
    admin.deploy(name, wasm, source, [target])
    deadline = time.monotonic() + 120
    first: dict[str, Any] = {}
    while not first or first.get("state") != "running":
        assert time.monotonic() < deadline, f"{name} did not start: {first}"
        time.sleep(0.02)
        first = status(admin, name)
    t0, cpu0 = time.perf_counter(), server.cpu()
    last = first
    while last.get("committed_offset", -1) < count:
        assert time.monotonic() < deadline + 600, f"{name} stalled: {last}"
        assert last.get("state") == "running", f"{name}: {last}"
        time.sleep(0.05)
        last = status(admin, name)
    wall, cpu = time.perf_counter() - t0, server.cpu() - cpu0
    done = int(last["processed"]) - int(first["processed"])
    admin.delete(name)
    return done / wall, done / cpu


def run_loop(server: SluiceServer, source: str, logic: str, count: int) -> tuple[float, float]:
    target = f"{source}-out-loop"
    server.create_topic(target)
    cpu0 = server.cpu()
    done = subprocess.run(
        [
            python(),
            "-m",
            "bench.transform_loop",
            server.bootstrap,
            source,
            target,
            logic,
            str(count),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=1200,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"transform_loop failed: {done.stderr[-500:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    broker_cpu = server.cpu() - cpu0
    return answer["read"] / answer["seconds"], answer["read"] / (answer["cpu"] + broker_cpu)


def broker(report: Report, server: SluiceServer, workdir: Path, count: int) -> None:
    admin = TransformsAdmin(server.bootstrap)
    for logic in LOGICS:
        source = f"bench-in-{logic}"
        server.create_topic(source)
        fill(workdir, server.bootstrap, source, count, logic == "jsonfilter")
        for abi, family in GUEST_OF.items():
            path = GUESTS / family / f"{logic}.wasm"
            if not path.exists():
                report.put("broker", f"{abi} ({family}) {logic}", "n/a: guest not built")
                continue
            rate, per_cpu = run_transform(
                server, admin, f"{abi}-{logic}", path.read_bytes(), source, count
            )
            report.put(
                "broker",
                f"{abi} ({family} guest) {logic}",
                f"{rate:,.0f} records/s, {per_cpu:,.0f} per broker CPU second",
            )
        rate, per_cpu = run_loop(server, source, logic, count)
        report.put(
            "broker",
            f"Python consumer-producer loop {logic}",
            f"{rate:,.0f} records/s, {per_cpu:,.0f} per CPU second (loop + broker)",
        )


# ------------------------------------------------------------------ latency


@contextmanager
def output_reader(bootstrap: str, topic: str, samples: list[float]) -> Iterator[None]:
    """A consumer of ``topic`` from its end that records now - the time in each value."""
    stop = threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{topic}-{time.monotonic_ns()}",
            "fetch.wait.max.ms": 100,
            "auto.offset.reset": "latest",
            "log_level": 0,
        }
    )
    _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), 20)
    consumer.assign([TopicPartition(topic, 0, end)])

    def run() -> None:
        while not stop.is_set():
            msg = consumer.poll(0.1)  # consume(n) would wait for n records or its timeout
            if msg is not None and msg.error() is None and msg.value():
                now = time.time_ns()
                sent = int(msg.value()[25:44])
                samples.append((now - sent) / 1e6)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)
        consumer.close()


def timed_value(json_values: bool) -> bytes:
    stamp = b"%019d" % time.time_ns()
    head = KEEP if json_values else b'{"level":"text","msg":"'
    head = head.ljust(25, b" ")
    return (head + stamp + b'"').ljust(SIZE - 1, b" ") + b"}"


def paced_produce(bootstrap: str, topic: str, seconds: float, json_values: bool) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
    interval, sent = 1.0 / RATE, 0
    started = next_at = time.monotonic()
    while time.monotonic() < started + seconds:
        now = time.monotonic()
        if now < next_at:
            producer.poll(next_at - now)
            continue
        producer.produce(topic, timed_value(json_values), partition=0)
        sent += 1
        next_at += interval
        producer.poll(0)
    producer.flush(30)
    return sent


def quantiles(samples: list[float]) -> tuple[float, float]:
    qs = statistics.quantiles(samples, n=100, method="inclusive")
    return qs[49], qs[98]


def latency(report: Report, server: SluiceServer, seconds: float) -> None:
    admin = TransformsAdmin(server.bootstrap)
    for logic in LOGICS:
        json_values = logic == "jsonfilter"
        source = f"lat-in-{logic}"
        server.create_topic(source)
        baseline: list[float] = []
        paced_produce(server.bootstrap, source, 1.0, json_values)
        with output_reader(server.bootstrap, source, baseline):
            paced_produce(server.bootstrap, source, seconds, json_values)
            time.sleep(1)
        b50, b99 = quantiles(baseline)
        report.put("latency", f"no transform {logic}", f"p50 {b50:.1f} ms, p99 {b99:.1f} ms")
        for abi, family in GUEST_OF.items():
            path = GUESTS / family / f"{logic}.wasm"
            if not path.exists():
                continue
            target = f"{source}-out-{abi}"
            server.create_topic(target)
            name = f"lat-{abi}-{logic}"
            admin.deploy(name, path.read_bytes(), source, [target])
            admin.wait_state(name, "running")
            samples: list[float] = []
            paced_produce(server.bootstrap, source, 1.0, json_values)
            with output_reader(server.bootstrap, target, samples):
                paced_produce(server.bootstrap, source, seconds, json_values)
                time.sleep(1)
            admin.delete(name)
            p50, p99 = quantiles(samples)
            report.put(
                "latency",
                f"{abi} ({family} guest) {logic}",
                f"p50 {p50:.1f} ms, p99 {p99:.1f} ms (+{p50 - b50:.1f} ms at p50)",
            )
        target = f"{source}-out-loop"
        server.create_topic(target)
        loop = subprocess.Popen(
            [python(), "-m", "bench.transform_loop", server.bootstrap, source, target, logic, "0"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            samples = []
            paced_produce(server.bootstrap, source, 2.0, json_values)
            with output_reader(server.bootstrap, target, samples):
                paced_produce(server.bootstrap, source, seconds, json_values)
                time.sleep(1)
        finally:
            loop.kill()
            loop.wait()
        p50, p99 = quantiles(samples)
        report.put(
            "latency",
            f"Python consumer-producer loop {logic}",
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms (+{p50 - b50:.1f} ms at p50)",
        )


# ------------------------------------------------------------------ produce path


def produce_cost(report: Report, server: SluiceServer, workdir: Path, count: int) -> None:
    admin = TransformsAdmin(server.bootstrap)
    records = clients.record_file(workdir, SIZE, count)
    kcat = clients.Kcat(workdir)
    plain = "prod-plain"
    server.create_topic(plain)
    kcat.produce(server.bootstrap, plain, records, count)  # warm-up
    figures: dict[str, float] = {}
    for abi, family in (("none", ""), *GUEST_OF.items()):
        topic = f"prod-{abi}"
        server.create_topic(topic)
        if family:
            out = f"{topic}-out"
            server.create_topic(out)
            admin.deploy(
                f"prod-{abi}", (GUESTS / family / "identity.wasm").read_bytes(), topic, [out]
            )
            admin.wait_state(f"prod-{abi}", "running")
        seconds = kcat.produce(server.bootstrap, topic, records, count)
        figures[abi] = count / seconds
        if family:
            admin.wait_caught_up(f"prod-{abi}", 1, timeout=600)
            admin.delete(f"prod-{abi}")
    report.put("produce", "into a topic without a transform", f"{figures['none']:,.0f} records/s")
    for abi, family in GUEST_OF.items():
        ratio = figures[abi] / figures["none"]
        verdict = "ok" if ratio >= 0.5 else "FAIL: target 0.5"
        report.put(
            "produce",
            f"into the input of a {abi} ({family}) identity",
            f"{figures[abi]:,.0f} records/s, {ratio:.2f}x ({verdict})",
        )

    def other_latency(seconds: float) -> tuple[float, float]:
        samples: list[float] = []
        producer = Producer(
            {"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0}
        )
        started = next_at = time.monotonic()
        while time.monotonic() < started + seconds:
            now = time.monotonic()
            if now < next_at:
                producer.poll(next_at - now)
                continue
            producer.produce(
                "other",
                b"o" * SIZE,
                partition=0,
                on_delivery=lambda err, msg: err is None and samples.append(msg.latency() * 1000),
            )
            next_at += 1.0 / RATE
            producer.poll(0)
        producer.flush(30)
        return quantiles(samples)

    server.create_topic("other")
    other_latency(1.0)
    idle = other_latency(3.0)
    report.put(
        "other", "produce latency, broker idle", f"p50 {idle[0]:.2f} ms, p99 {idle[1]:.2f} ms"
    )
    backlog = "busy-in"
    server.create_topic(backlog)
    server.create_topic("busy-out")
    fill(workdir, server.bootstrap, backlog, BUSY_BACKLOG, json_values=True)
    busy_wasm = (GUESTS / "go" / "jsonfilter.wasm").read_bytes()
    admin.deploy("busy", busy_wasm, backlog, ["busy-out"])
    admin.wait_state("busy", "running")
    before = status(admin, "busy")["processed"]
    busy = other_latency(3.0)
    during = status(admin, "busy")["processed"] - before
    admin.delete("busy")
    report.put(
        "other",
        "produce latency, Go JSON filter busy on a backlog",
        f"p50 {busy[0]:.2f} ms, p99 {busy[1]:.2f} ms ({during:,} records transformed meanwhile)",
    )


# ------------------------------------------------------------------ main


def record(report: Report, quick: bool) -> None:
    info = machine_info()
    lines = [
        BEGIN,
        f"## Transforms ({'quick' if quick else 'full'} run), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        "`python -m bench.bench_transforms` (its docstring says how each figure is taken). "
        + ", ".join(f"{k}: {v}" for k, v in info.items()),
        "",
        "| bench | what | figures |",
        "|---|---|---|",
    ]
    for section, rows in report.rows.items():
        lines += [f"| {section} | {row.what} | {row.figures} |" for row in rows]
    lines.append(END)
    replace_section(RESULTS, BEGIN, END, "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 records, 3 s latency runs")
    parser.add_argument("--no-record", action="store_true", help="leave bench/RESULTS.md alone")
    args = parser.parse_args()
    if not (GUESTS / "STATUS").exists():
        sys.exit("bench_transforms: run `make transform-guests` first")
    if not clients.Kcat.available():
        sys.exit("bench_transforms: kcat is missing (make system-deps)")
    count = 100_000 if args.quick else 1_000_000
    seconds = 3.0 if args.quick else 10.0
    report = Report()
    print("transforms bench", flush=True)
    engine(report, count)
    with tempfile.TemporaryDirectory(prefix="sluice-bench-tf-") as tmp:
        workdir = Path(tmp)
        server = SluiceServer(workdir / "sluice")
        server.settings["transforms.start.offset"] = "earliest"
        try:
            server.start()
            broker(report, server, workdir, count)
            latency(report, server, seconds)
            produce_cost(report, server, workdir, count)
        finally:
            server.stop()
            kill_all_children()
    if not args.no_record:
        record(report, args.quick)
        print(f"recorded in {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
