"""Transactional produce on Sluice beside Apache Kafka, in the same run.

    python -m bench.bench_transactions [--count N] [--size S] [--per-txn K] [--runs R]
                                       [--quick] [--no-record]

Brokers: Sluice (``python -m dataplane.main``, bench/servers.py) and Apache Kafka 4.3.1
(KRaft single node, tests/support/kafka_oracle.py, ``transaction.state.log.replication.factor``
1), both up for the whole bench, measured taking turns.

Workload: Apache Kafka's Java producer (the harness's ``txn perf`` mode,
tools/java/ClientHarness.java) writes N (default 1,000,000) records of S (100) bytes to one
partition in transactions of K (1,000) records: ``beginTransaction``, K asynchronous sends,
``commitTransaction``, linger.ms=10, batch.size=1000000, no compression. Timed by the
harness from the first send to the last commit (after ``initTransactions``, JVM start-up
excluded); median of R runs (default 3), each with a new transactional id and a new topic,
after one unmeasured warm-up run per broker. A read_committed consumer then checks that the
last run's topic holds N records below its last stable offset.

The ProducerPerformance tool of Kafka takes a transaction duration, not a size, which is
why the harness's own loop is used. Prints the table and replaces the "Transactions"
section of bench/RESULTS.md unless --no-record. No assertion on any figure.
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

from confluent_kafka import Consumer, TopicPartition

from bench.common import machine_info, replace_section
from bench.servers import KafkaServer, SluiceServer
from tests.support.java_client import java_available, run_java_client

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN = "<!-- transactions:begin -->"
END = "<!-- transactions:end -->"


def one_run(server: Any, count: int, size: int, per_txn: int, tag: str) -> tuple[float, str]:
    topic = f"txn-bench-{tag}-{time.monotonic_ns()}"
    server.create_topic(topic)
    lines = run_java_client(
        [
            "txn",
            "perf",
            "--bootstrap",
            server.bootstrap,
            "--topic",
            topic,
            "--transactional-id",
            f"bench-{time.monotonic_ns()}",
            "--count",
            str(count),
            "--size",
            str(size),
            "--per-txn",
            str(per_txn),
        ],
        timeout=900,
    )
    result = lines[-1]
    return count / float(result["seconds"]), topic


def committed_count(bootstrap: str, topic: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-check-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        consumer.assign([TopicPartition(topic, 0, low)])
        seen = 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            msgs = consumer.consume(10000, 1.0)
            seen += sum(1 for m in msgs if m.error() is None)
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            if position >= high:
                break
        return seen
    finally:
        consumer.close()


def row(name: str, median: float, rates: list[float], check: int, count: int) -> str:
    runs = ", ".join(f"{r:,.0f}" for r in rates)
    return f"| {name} | {median:,.0f} | {runs} | {check:,} of {count:,} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_transactions", description=__doc__)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--per-txn", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100,000 records, 1 run")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.count, args.runs = 100_000, 1
    reason = java_available() or KafkaServer.unavailable()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sluice-bench-txn-") as tmp:
        work = Path(tmp)
        servers: list[Any] = [SluiceServer(work / "sluice"), KafkaServer(work / "kafka")]
        try:
            for server in servers:
                server.start()
            for server in servers:  # warm-up (Kafka's JIT, Sluice's coordinator topic)
                one_run(server, min(args.count, 100_000), args.size, args.per_txn, "warm")
            rates: dict[str, list[float]] = {s.name: [] for s in servers}
            topics: dict[str, str] = {}
            load = []
            for _ in range(args.runs):
                for server in servers:
                    load.append(os.getloadavg()[0])
                    rate, topic = one_run(server, args.count, args.size, args.per_txn, "run")
                    rates[server.name].append(rate)
                    topics[server.name] = topic
            checks = {s.name: committed_count(s.bootstrap, topics[s.name]) for s in servers}
            kafka_version = servers[1].version
        finally:
            for server in servers:
                server.stop()
    sluice = statistics.median(rates["Sluice"])
    kafka = statistics.median(rates["Kafka"])
    table = [
        "| broker | records/s (median) | runs | read_committed check |",
        "|---|---|---|---|",
        row("Sluice", sluice, rates["Sluice"], checks["Sluice"], args.count),
        row(f"Kafka {kafka_version}", kafka, rates["Kafka"], checks["Kafka"], args.count),
    ]
    info = machine_info()
    section = "\n".join(
        [
            BEGIN,
            "## Transactions",
            "",
            f"Transactional produce, {args.count:,} records of {args.size} B in transactions of "
            f"{args.per_txn:,}, Apache Kafka's Java producer "
            "(`python -m bench.bench_transactions`), "
            f"median of {args.runs} runs, taking turns. Sluice / Kafka: **{sluice / kafka:.2f}x**. "
            f"Machine: {info['cpu']}, {info['nproc']} cores; 1-minute load average at the "
            f"runs {min(load):.1f}-{max(load):.1f}.",
            "",
            *table,
            END,
        ]
    )
    print(section)
    if not args.no_record:
        replace_section(RESULTS, BEGIN, END, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
