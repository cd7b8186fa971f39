"""What usage metering costs the data path (issue 16): 1,000,000 x 100 B produced with kcat
(the produce bench's client and settings) to a Sluice broker with metering on
(usage.flush.interval.ms=1000, ten times the default rate of events) and to one with it off,
and to Apache Kafka as the peer, in the same run; rounds alternate between the brokers so
that a change of the machine's speed hits all of them; medians. Target: on within 3 % of off.

    .venv/bin/python -m bench.bench_metering [--quick] [--rounds N] [--skip-kafka]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.clients import Kcat, measure_produce, record_file
from bench.common import Failed, Figure, Measure, fmt_rate, median_of
from bench.servers import KafkaServer, SluiceServer

SIZE = 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 records, 3 rounds")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--skip-kafka", action="store_true")
    args = parser.parse_args()
    count = 100_000 if args.quick else 1_000_000
    rounds = args.rounds or (3 if args.quick else 5)
    if not Kcat.available():
        raise SystemExit("kcat is missing: make system-deps installs it")
    workdir = Path(tempfile.mkdtemp(prefix="bench-metering-"))
    servers: dict[str, Any] = {}
    try:
        on = SluiceServer(workdir / "on")
        on.settings["usage.flush.interval.ms"] = "1000"
        off = SluiceServer(workdir / "off")
        off.settings["usage.metering.enable"] = "false"
        servers = {"Sluice, metering on": on, "Sluice, metering off": off}
        if not args.skip_kafka and KafkaServer.unavailable() is None:
            servers["Apache Kafka"] = KafkaServer(workdir / "kafka")
        for server in servers.values():
            server.start()
        records = record_file(workdir, SIZE, count)
        client = Kcat(workdir)
        figures: dict[str, list[Figure]] = {name: [] for name in servers}
        for server in servers.values():  # warm-up (Kafka's JIT), not measured
            server.create_topic("warmup")
            measure_produce(client, server, "warmup", records, count=count, size=SIZE)
        for round_ in range(rounds):
            for name, server in servers.items():
                topic = f"bench-{round_}"
                server.create_topic(topic)
                figure = measure_produce(client, server, topic, records, count=count, size=SIZE)
                figures[name].append(figure)
                shown = fmt_rate(figure.value) if isinstance(figure, Measure) else figure.reason
                print(f"round {round_ + 1}/{rounds} {name}: {shown}", flush=True)
        report(count, {name: median_of(f) for name, f in figures.items()})
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def report(count: int, medians: dict[str, Figure]) -> None:
    print(f"\nproduce {count:,} x {SIZE} B, kcat, acks=1, one partition (median of rounds)")
    print("| broker | records/s | broker CPU s | runs |")
    print("|---|---|---|---|")
    for name, figure in medians.items():
        if isinstance(figure, Failed):
            print(f"| {name} | n/a: {figure.reason} | | |")
            continue
        runs = ", ".join(fmt_rate(v) for v in figure.extra.get("runs", [figure.value]))
        print(f"| {name} | {fmt_rate(figure.value)} | {figure.broker_cpu or 0:.1f} | {runs} |")
    on, off = medians.get("Sluice, metering on"), medians.get("Sluice, metering off")
    if isinstance(on, Measure) and isinstance(off, Measure):
        ratio = on.value / off.value
        verdict = "PASS" if ratio >= 0.97 else "FAIL"
        print(f"\nmetering on / off: {ratio:.3f} (target >= 0.97: {verdict})")
    kafka = medians.get("Apache Kafka")
    if isinstance(on, Measure) and isinstance(kafka, Measure):
        print(f"metering on / Apache Kafka: {on.value / kafka.value:.2f}x")


if __name__ == "__main__":
    main()
