"""MirrorMaker 2 throughput between two Sluice brokers beside two Apache Kafka brokers.

    python -m bench.bench_mirror [--count N] [--size S] [--runs R] [--quick] [--no-record]

Systems: two Sluice brokers (``python -m dataplane.main``, bench/servers.py) and two Apache
Kafka 4.3.1 KRaft single nodes (tests/support/kafka_oracle.py), all four up for the whole
bench. MirrorMaker 2 (Apache Kafka's ``connect-mirror`` 4.3.1, dedicated mode,
``make connect-deps``) runs with the mm2.properties of the control plane's replicators
(``controlplane.replicator_process``), one flow source -> target, one task.

Each run: N (default 1,000,000) records of S (100) bytes are produced to a new topic of one
partition on the source (confluent-kafka, acks=1, before MirrorMaker starts); MirrorMaker
starts and copies it to ``src.TOPIC`` on the target. The figure is the copy rate from the
first record seen on the target to the last (the target's high watermark polled every
0.1 s), JVM start-up and MirrorMaker's topic discovery excluded; the time from the
process start to the last record is printed too. Median of R runs (default 3), the two
systems taking turns. Prints the table and replaces the "MirrorMaker 2" section of
bench/RESULTS.md unless --no-record. No assertion on any figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.common import machine_info, replace_section
from bench.servers import KafkaServer, SluiceServer
from controlplane.replicator_process import ClusterAccess, Flow, write_files
from tests.support.connect import MirrorMakerProcess, connect_available

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN = "<!-- mirror:begin -->"
END = "<!-- mirror:end -->"


def produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 10,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "enable.idempotence": False,
        }
    )
    value = b"x" * size
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError(f"could not produce {count} records to {topic}")


def end_offset(consumer: Consumer, topic: str) -> int:
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
    except Exception:
        return 0  # the copy's topic does not exist yet
    return int(high)


def one_run(source: Any, target: Any, work: Path, count: int, size: int) -> tuple[float, float]:
    topic = f"mirror-bench-{time.monotonic_ns()}"
    source.create_topic(topic)
    produce(source.bootstrap, topic, count, size)
    flow = Flow(
        "src",
        "dst",
        ClusterAccess(source.bootstrap),
        ClusterAccess(target.bootstrap),
        topics=topic,
        groups="none",
        sync_group_offsets=False,
        identical_names=False,
        replication_factor=1,
        source_replication_factor=1,
        refresh_s=1,
        sync_s=5,
        offset_flush_ms=1000,
    )
    name = f"run-{time.monotonic_ns()}"
    mm2 = MirrorMakerProcess(work / name, write_files(work, name, flow), "dst")
    watcher = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "bench-watch"})
    started = time.monotonic()
    mm2.start()
    try:
        first_at = first_count = None
        deadline = started + 900
        while time.monotonic() < deadline:
            copied = end_offset(watcher, f"src.{topic}")
            now = time.monotonic()
            if copied and first_at is None:
                first_at, first_count = now, copied
            if copied >= count:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"MirrorMaker copied {copied} of {count} in 900 s")
    finally:
        mm2.stop()
        watcher.close()
    if first_at is None or first_count is None:
        raise RuntimeError("MirrorMaker copied nothing")
    rate = (count - first_count) / max(now - first_at, 1e-3)
    return rate, now - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_mirror", description=__doc__)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200,000 records, 1 run")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.count, args.runs = 200_000, 1
    reason = connect_available() or KafkaServer.unavailable()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sluice-bench-mm2-") as tmp:
        work = Path(tmp)
        pairs: dict[str, tuple[Any, Any]] = {
            "Sluice": (SluiceServer(work / "s1"), SluiceServer(work / "s2")),
            "Kafka": (KafkaServer(work / "k1"), KafkaServer(work / "k2")),
        }
        rates: dict[str, list[float]] = {name: [] for name in pairs}
        totals: dict[str, list[float]] = {name: [] for name in pairs}
        load: list[float] = []
        try:
            for source, target in pairs.values():
                source.start()
                target.start()
            for _ in range(args.runs):
                for name, (source, target) in pairs.items():
                    load.append(os.getloadavg()[0])
                    rate, total = one_run(source, target, work / name, args.count, args.size)
                    rates[name].append(rate)
                    totals[name].append(total)
            kafka_version = pairs["Kafka"][0].version
        finally:
            for source, target in pairs.values():
                source.stop()
                target.stop()
    sluice = statistics.median(rates["Sluice"])
    kafka = statistics.median(rates["Kafka"])
    info = machine_info()

    def row(label: str, name: str) -> str:
        runs = ", ".join(f"{r:,.0f}" for r in rates[name])
        return (
            f"| {label} | {statistics.median(rates[name]):,.0f} | {runs} | "
            f"{statistics.median(totals[name]):.1f} s |"
        )

    section = "\n".join(
        [
            BEGIN,
            "## MirrorMaker 2",
            "",
            f"`python -m bench.bench_mirror`: MirrorMaker 2 (connect-mirror {kafka_version}, "
            f"one task) copies {args.count:,} records of {args.size} B, one partition, from one "
            f"broker to another; median of {args.runs} runs, taking turns. Sluice -> Sluice / "
            f"Kafka -> Kafka: **{sluice / kafka:.2f}x**. Machine: {info['cpu']}, "
            f"{info['nproc']} cores; 1-minute load average at the runs "
            f"{min(load):.1f}-{max(load):.1f}.",
            "",
            "| pair | records/s copied (median) | runs | process start to last record |",
            "|---|---|---|---|",
            row("Sluice -> Sluice", "Sluice"),
            row(f"Kafka {kafka_version} -> Kafka", "Kafka"),
            END,
        ]
    )
    print(section)
    if not args.no_record:
        replace_section(RESULTS, BEGIN, END, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
