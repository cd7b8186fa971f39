"""Produce throughput when the broker recompresses (topic compression.type), beside the
zero-copy path, on Sluice and Apache Kafka in the same run.

    python -m bench.bench_recompression [--count N] [--runs R] [--quick] [--skip-kafka]
                                        [--no-record]

Each workload is a pair (producer codec, topic compression.type). Zero copy: the topic keeps
what the producer sent (``producer``, or the producer's own codec). Recompression: the
leader decompresses each batch and compresses it in the topic's codec at the default level
(gzip 6, lz4 9 = lz4's fast compressor, zstd 3), as Kafka's LogValidator does.

Client: kcat (librdkafka) fed from a file of N (default 2,000,000) JSON-like records of
100 B (10,000 distinct lines: user ids, events, pages, amounts; compressible as application
logs are), one partition, acks=1, linger.ms=10, batch.size=1000000, no idempotence, the
producer codec set with ``compression.codec``. Each run writes a new topic (deleted after
it); the median of R runs is reported (range in brackets). MB/s counts record values (100 B
each); "stored" is the size of the partition's .log files over the values' size (the
codec's effect, batch headers included).
After each run the broker's high watermark must be N and the first stored batch must be in
the expected codec (fetched raw). Broker CPU: CPU seconds of the broker process (all
threads) during the run, per MB of values. Both brokers (Sluice, and Kafka as a KRaft
single node, heap 2 GiB) are up for the whole bench and measured one at a time, taking
turns workload by workload, so that load from other jobs on a shared machine falls on
both alike (the idle broker's own CPU counts among "others"); each first gets one
unmeasured pass over every workload (Kafka's JIT needs it). Prints a table and replaces
the "Recompression" section of bench/RESULTS.md unless --no-record. Every process it
starts is stopped at the end, also on an error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench.clients import PRODUCER_SETTINGS, Kcat, children_cpu, high_watermark
from bench.common import (
    REPO,
    Others,
    kill_all_children,
    machine_info,
    replace_section,
    tool,
)
from bench.servers import KafkaServer, SluiceServer
from tests.support.raw_client import RawClient
from tests.support.records import fetch_request
from wire.compression import CODEC_NAMES
from wire.record_batch import iter_headers

RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- BEGIN recompression (bench/bench_recompression.py) -->"
END = "<!-- END recompression -->"
SIZE = 100
WORKLOADS = [
    ("none", "producer"),
    ("lz4", "lz4"),
    ("zstd", "zstd"),
    ("lz4", "zstd"),
    ("none", "gzip"),
    ("none", "zstd"),
    ("zstd", "lz4"),
]


def stored_codec(producer: str, topic_type: str) -> str:
    codec = producer if topic_type == "producer" else topic_type
    return "none" if codec == "uncompressed" else codec


def zero_copy(producer: str, topic_type: str) -> bool:
    return stored_codec(producer, topic_type) == producer


@dataclass
class System:
    server: Any
    data_dir: Path
    """Where the server keeps its partition directories."""
    work: Path


@dataclass
class Run:
    seconds: float
    broker_cpu: float
    client_cpu: float
    others: float
    stored_bytes: int


def record_file(workdir: Path, count: int) -> Path:
    """``count`` lines of SIZE bytes (plus newline): JSON-like events, 10,000 distinct."""
    rng = random.Random(7)
    users = [f"user-{rng.randrange(10**6):06d}" for _ in range(400)]
    pages = [f"/shop/{rng.choice(['cart', 'item', 'search', 'home'])}/{i}" for i in range(60)]
    events = ["click", "view", "purchase", "scroll", "login"]
    lines = []
    for i in range(10_000):
        event = {
            "id": 1_000_000 + i,
            "user": rng.choice(users),
            "event": rng.choice(events),
            "page": rng.choice(pages),
            "amount": round(rng.random() * 500, 2),
        }
        text = json.dumps(event, separators=(",", ":"))[:SIZE]
        lines.append(text.ljust(SIZE).encode() + b"\n")
    block = b"".join(lines)
    path = workdir / f"events-{count}.txt"
    with open(path, "wb") as out:
        full, rest = divmod(count, len(lines))
        for _ in range(full):
            out.write(block)
        out.write(block[: rest * (SIZE + 1)])
    return path


def create_topic(bootstrap: str, topic: str, topic_type: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    config = {"compression.type": topic_type}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        partitions = admin.list_topics(topic=topic, timeout=5).topics[topic].partitions
        if partitions and partitions[0].leader >= 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} has no leader")


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.delete_topics([topic])[topic].result(timeout=30)


def kcat_produce(bootstrap: str, topic: str, records: Path, codec: str, workdir: Path) -> float:
    kcat = tool("kcat", "kafkacat") or "kcat"
    cmd = [kcat, "-P", "-q", "-b", bootstrap, "-t", topic, "-p", "0"]
    for key, value in {**PRODUCER_SETTINGS, "compression.codec": codec}.items():
        cmd += ["-X", f"{key}={value}"]
    err = workdir / "kcat.err"
    with open(records, "rb") as stdin, open(err, "wb") as stderr:
        started = time.perf_counter()
        proc = subprocess.run(cmd, stdin=stdin, stderr=stderr, timeout=900, check=False)
        elapsed = time.perf_counter() - started
    text = err.read_text(errors="replace")
    if proc.returncode != 0 or "Failed" in text or "ERROR" in text:
        raise RuntimeError(f"kcat -P exited {proc.returncode}: {text[-500:]}")
    return elapsed


def first_codec(bootstrap: str, topic: str) -> str:
    with RawClient(bootstrap) as client:
        response = client.request(fetch_request(topic, 0, max_bytes=2 << 20))
    data = response.responses[0].partitions[0].records
    header = next(iter(iter_headers(data)))
    return CODEC_NAMES[header.codec]


def log_bytes(data_dir: Path, topic: str) -> int:
    return sum(p.stat().st_size for p in (data_dir / f"{topic}-0").glob("*.log"))


def run_once(system: System, workload: tuple[str, str], records: Path, count: int) -> Run:
    server = system.server
    producer, topic_type = workload
    topic = f"rc-{producer}-{topic_type}-{time.monotonic_ns()}"
    create_topic(server.bootstrap, topic, topic_type)
    cpu0, client0, others = server.cpu(), children_cpu(), Others()
    seconds = kcat_produce(server.bootstrap, topic, records, producer, system.work)
    cpu, client_cpu = server.cpu() - cpu0, children_cpu() - client0
    share = others.share(cpu, client_cpu)
    stored = high_watermark(server.bootstrap, topic)
    if stored != count:
        raise RuntimeError(f"{server.name}: {stored} of {count} records stored in {topic}")
    codec = first_codec(server.bootstrap, topic)
    if codec != stored_codec(producer, topic_type):
        raise RuntimeError(f"{server.name}: {topic} stores {codec}")
    run = Run(seconds, cpu, client_cpu, share, log_bytes(system.data_dir, topic))
    delete_topic(server.bootstrap, topic)  # keeps the disk and page cache small
    return run


def measure(
    systems: list[System], records: Path, count: int, runs: int
) -> dict[str, dict[tuple[str, str], list[Run]]]:
    """Every workload on every system, the systems taking turns workload by workload."""
    warm = records.with_name("warm.txt")
    with open(records, "rb") as src, open(warm, "wb") as dst:
        dst.write(src.read((SIZE + 1) * min(count, 200_000)))
    for system in systems:
        for workload in WORKLOADS:  # unmeasured: JIT, page cache, first-use costs
            run_once(system, workload, warm, min(count, 200_000))
    out: dict[str, dict[tuple[str, str], list[Run]]] = {
        system.server.name: {w: [] for w in WORKLOADS} for system in systems
    }
    for _ in range(runs):
        for workload in WORKLOADS:
            for system in systems:
                run = run_once(system, workload, records, count)
                out[system.server.name][workload].append(run)
                rate = count / run.seconds
                print(f"  {system.server.name} {workload}: {rate:,.0f} rec/s", flush=True)
    return out


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.seconds)[(len(runs) - 1) // 2]


def describe(runs: list[Run], count: int) -> dict[str, Any]:
    mid = median_run(runs)
    mb = count * SIZE / 1e6
    rates = sorted(mb / r.seconds for r in runs)
    return {
        "mbs": mb / mid.seconds,
        "range": f"{rates[0]:.0f}-{rates[-1]:.0f}" if len(rates) > 1 else "",
        "rps": count / mid.seconds,
        "cpu_ms_per_mb": 1000 * mid.broker_cpu / mb,
        "client_cpu_ms_per_mb": 1000 * mid.client_cpu / mb,
        "stored": mid.stored_bytes / (count * SIZE),
        "others": mid.others,
    }


def table(results: dict[str, dict[tuple[str, str], list[Run]]], count: int) -> str:
    rows = [
        "| producer codec -> topic compression.type | path | system | MB/s | records/s "
        "| broker CPU ms/MB | kcat CPU ms/MB | stored / values | others' CPU | x Kafka "
        "| x zero-copy (same producer codec) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for workload in WORKLOADS:
        producer, topic_type = workload
        path = "zero copy" if zero_copy(*workload) else "recompress"
        base = next((w for w in WORKLOADS if w[0] == producer and zero_copy(*w)), None)
        for system, per in results.items():
            d = describe(per[workload], count)
            kafka = results.get("Kafka")
            x_kafka = "-"
            if system != "Kafka" and kafka is not None:
                x_kafka = f"{d['mbs'] / describe(kafka[workload], count)['mbs']:.2f}"
            x_base = "-"
            if base is not None and base != workload:
                x_base = f"{d['mbs'] / describe(per[base], count)['mbs']:.2f}"
            rng = f" ({d['range']})" if d["range"] else ""
            rows.append(
                f"| {producer} -> {topic_type} | {path} | {system} | {d['mbs']:.1f}{rng} "
                f"| {d['rps']:,.0f} | {d['cpu_ms_per_mb']:.1f} | {d['client_cpu_ms_per_mb']:.1f} "
                f"| {d['stored']:.2f} | {d['others']:.0%} | {x_kafka} | {x_base} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="50,000 records, one run")
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    count, runs = (50_000, 1) if args.quick else (args.count, args.runs)
    if not tool("kcat", "kafkacat"):
        raise SystemExit("kcat is missing (tools/ensure-system-deps.sh)")
    started = datetime.datetime.now(datetime.UTC)
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="bench-recompression-"))
    results: dict[str, dict[tuple[str, str], list[Run]]] = {}
    kafka_version = "-"
    try:
        records = record_file(work, count)
        sluice = SluiceServer(work / "sluice").start()
        print(f"Sluice on {sluice.bootstrap}")
        systems = [System(sluice, sluice.data_dir, work)]
        reason = None if args.skip_kafka else KafkaServer.unavailable()
        if not args.skip_kafka and reason is None:
            kafka = KafkaServer(work / "kafka").start()
            kafka_version = kafka.version
            print(f"Kafka {kafka.version} on {kafka.bootstrap}")
            systems.append(System(kafka, kafka.oracle.workdir / "data", work))
        elif reason:
            print(f"Kafka skipped: {reason}")
        try:
            results = measure(systems, records, count, runs)
        finally:
            for system in systems:
                system.server.stop()
    finally:
        kill_all_children()
        shutil.rmtree(work, ignore_errors=True)
    body = table(results, count)
    print(body)
    if args.no_record:
        return
    machine = machine_info()
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    kcat = Kcat(RESULTS.parent).version()
    flags = " --quick" if args.quick else f" --count {count} --runs {runs}"
    section = "\n".join(
        [
            BEGIN,
            "## Recompression (topic compression.type)",
            "",
            f"`python -m bench.bench_recompression{flags}` on {machine['cpu']} "
            f"(nproc {machine['nproc']}), {started:%Y-%m-%d %H:%M} UTC; Kafka {kafka_version}, "
            f"{kcat}; load average before {load_before}, after {load_after}. {count:,} "
            f"records of {SIZE} B per run (JSON-like events), one partition, acks=1, "
            "linger.ms=10, batch.size=1000000; median of "
            f"{runs} run{'s' if runs > 1 else ''} (range of MB/s in brackets).",
            "",
            body,
            "",
            "Both brokers are up during the whole bench and are measured one at a time, "
            "taking turns workload by workload, so that other jobs' load falls on both alike. "
            "Zero copy: the topic keeps the producer's bytes (the broker patches offsets and "
            "epoch in the batch header). Recompress: the broker decompresses each batch and "
            "compresses it again in the topic's codec at its default level. MB/s: record "
            "values over the wall time of kcat (start to last acknowledgement). x Kafka: "
            "Sluice's MB/s over Kafka's for the same workload. x zero-copy: the workload's MB/s "
            "over the same system's zero-copy MB/s with the same producer codec. Others' "
            "CPU: share of the 2 cores used by other processes during the run (noise). kcat "
            "and the broker share the 2 cores: kcat CPU ms/MB x MB/s near 1,000 means kcat "
            "used a whole core, the limit of the zero-copy figures; broker CPU per MB is the "
            "cost of each path.",
            END,
        ]
    )
    replace_section(RESULTS, BEGIN, END, section + "\n")
    print(f"recorded in {RESULTS}")


if __name__ == "__main__":
    main()
