"""Kafka's own perf tools (``kafka-producer-perf-test`` / ``kafka-consumer-perf-test``).

They run from .cache/java/kafka (``make java-deps``) through kafka_java_command, against both
brokers, with the settings of the librdkafka benches (acks=1, linger.ms=10, batch.size=1000000).
The producer tool's figure is its own (it starts timing after the JVM is up).
ConsumerPerformance subscribes with a consumer group, so it needs the group coordinator.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import Failed, Figure, Measure
from tests.support.kafka_oracle import kafka_java_command, oracle_available

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"


def available() -> str | None:
    return oracle_available()


def _command(main_class: str, *args: str) -> list[str]:
    return kafka_java_command(main_class, *args, heap="-Xmx1g")


def produce(server: Any, topic: str, count: int, size: int, workdir: Path) -> Figure:
    cmd = _command(
        PRODUCER,
        "--topic",
        topic,
        "--num-records",
        str(count),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={server.bootstrap}",
        "acks=1",
        "linger.ms=10",
        "batch.size=1000000",
        "compression.type=none",
        "enable.idempotence=false",
        "buffer.memory=268435456",
    )
    cpu0 = server.cpu()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=300, check=False, cwd=workdir
        )
    except subprocess.TimeoutExpired:
        return Failed("ProducerPerformance timed out after 300 s")
    cpu = server.cpu() - cpu0
    # "1000000 records sent, 532765.1 records/sec (50.81 MB/sec), 120.45 ms avg latency, ..."
    match = None
    for line in proc.stdout.splitlines():
        found = re.search(r"(\d+) records sent, ([\d.]+) records/sec", line)
        if found:
            match = found
    if proc.returncode != 0 or match is None:
        text = (proc.stderr.strip() or proc.stdout.strip())[-300:]
        return Failed(f"ProducerPerformance exited {proc.returncode}: {text}")
    sent, rate = int(match.group(1)), float(match.group(2))
    if sent != count:
        return Failed(f"ProducerPerformance sent {sent} of {count}")
    return Measure(
        rate, "rec/s", sent / rate, sent, sent * size, broker_cpu=cpu, note="ProducerPerformance"
    )


def consume(server: Any, topic: str, count: int, size: int, workdir: Path) -> Figure:
    cmd = _command(
        CONSUMER,
        "--bootstrap-server",
        server.bootstrap,
        "--topic",
        topic,
        "--messages",
        str(count),
        "--timeout",
        "20000",
        "--group",
        f"sluice-bench-{time.monotonic_ns()}",
    )
    cpu0 = server.cpu()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=180, check=False, cwd=workdir
        )
    except subprocess.TimeoutExpired:
        return Failed("ConsumerPerformance timed out after 180 s")
    cpu = server.cpu() - cpu0
    lines = [x for x in proc.stdout.splitlines() if x.strip()]
    header_at = next((i for i, x in enumerate(lines) if "nMsg.sec" in x), None)
    if proc.returncode != 0 or header_at is None or header_at + 1 >= len(lines):
        text = (proc.stderr.strip() or proc.stdout.strip())[-300:]
        return Failed(f"ConsumerPerformance exited {proc.returncode}: {text}")
    names = [x.strip() for x in lines[header_at].split(",")]
    values = [x.strip() for x in lines[header_at + 1].split(",")]
    row = dict(zip(names, values, strict=False))
    try:
        consumed = int(float(row["data.consumed.in.nMsg"]))
        # fetch.* excludes the group join (rebalance.time.ms), as the librdkafka bench has none.
        rate = float(row.get("fetch.nMsg.sec") or row["nMsg.sec"])
    except (KeyError, ValueError):
        return Failed(f"cannot parse ConsumerPerformance output: {lines[header_at + 1][:200]}")
    if consumed < count:
        return Failed(f"ConsumerPerformance consumed {consumed} of {count}")
    return Measure(
        rate,
        "rec/s",
        consumed / rate if rate else 0.0,
        consumed,
        consumed * size,
        broker_cpu=cpu,
        note="ConsumerPerformance (fetch time)",
        extra={"rebalance_ms": row.get("rebalance.time.ms", "?")},
    )
