"""Replication: what RF=3 costs and how fast a partition fails over, Sluice beside Kafka.

    python -m bench.run_all --only replication [--quick] [--skip-kafka] --no-record
    python -m bench.bench_replication [--quick] [--skip-kafka] [--client confluent]

For each system (Sluice first, then Apache Kafka; never both at once):

1 broker, acks=1   the single broker of the other benches (bench/servers.py), one partition,
                   produce ``count`` x 100 B with the produce bench's client and settings
                   (kcat, linger.ms=10, batch.size=1000000, no idempotence).
3 brokers          a 3-broker cluster (tests/support/sluice_cluster.py, kafka_cluster.py:
                   broker.session.timeout.ms=1500, broker.heartbeat.interval.ms=250), topics
                   RF=3 with min.insync.replicas=2:
  (a) throughput   the same produce with acks=all into a one-partition topic; reported as
                   records/s and as a ratio to the 1-broker acks=1 figure.
  (b) latency      a curve: confluent-kafka at fixed rates (``--rates``, default 1,000,
                   5,000, 10,000 and 20,000 records/s) of 100 B, acks=all, linger.ms=5,
                   max.in.flight 5 (the Java client's defaults), one partition; librdkafka's
                   per-message latency (produce() call to delivery report,
                   ``Message.latency()``) of every record after a 1 s warm-up; p50 and p99,
                   the rate reached, and the CPU of the three brokers and of the producer.
  (c) failover     a steady idempotent acks=all producer (600 records/s over 6 partitions);
                   ``kills`` times: SIGKILL the leader of a partition, time from the kill to
                   the first acknowledgement on that partition of a record produced after the
                   kill; restart the node and wait until it is back in the ISR. Median and max.

Each system gets an unmeasured warm-up produce (Kafka's JIT). A Sluice cluster that does not
form (Metadata from a broker does not list all three) makes its figures n/a with the reason;
the Kafka side still runs. Nothing here is written to RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench import clients
from bench.common import Failed, Figure, Measure, cpu_seconds, fmt_rate, kill_all_children, python
from bench.servers import KafkaServer, SluiceServer
from tests.support import kafka_oracle
from tests.support.cluster_workload import (
    SteadyProducer,
    admin_client,
    create_topic,
    leader_of,
    wait_for,
    wait_in_isr,
    wait_out_of_isr,
)
from tests.support.kafka_cluster import KafkaCluster
from tests.support.sluice_cluster import ClusterNotFormed, SluiceCluster

SIZE = 100
LATENCY_RATES = (1000, 5000, 10000, 20000)
PACING_TICK_S = 0.001
"""The latency producer sends the records due every millisecond (a latency is measured
from each record's produce() call): one call every 0.1 ms at 10,000/s made its pacing loop
a busy core beside the brokers on a 2-core machine."""
FAILOVER_RATE = 600
FAILOVER_PARTITIONS = 6
TOPIC_CONFIG = {"min.insync.replicas": "2"}


@dataclass
class Settings:
    quick: bool = False
    skip_kafka: bool = False
    rates: tuple[int, ...] = LATENCY_RATES
    only_latency: bool = False

    @property
    def count(self) -> int:
        return 100_000 if self.quick else 1_000_000

    @property
    def warmup_rounds(self) -> int:
        return 1 if self.quick else 2

    @property
    def latency_seconds(self) -> float:
        return 3.0 if self.quick else 10.0

    @property
    def kills(self) -> int:
        return 3 if self.quick else 20


@dataclass
class Results:
    # figures[system][name]
    figures: dict[str, dict[str, Figure]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def put(self, system: str, name: str, figure: Figure) -> None:
        self.figures.setdefault(system, {})[name] = figure
        print(f"  {system:<7} {name:<34} {_describe(figure)}", flush=True)

    def get(self, system: str, name: str) -> Figure | None:
        return self.figures.get(system, {}).get(name)


SINGLE = "produce, 1 broker, acks=1"
CLUSTER = "produce, 3 brokers RF=3, acks=all"


def latency_name(rate: int) -> str:
    return f"latency at {rate:,}/s, RF=3 acks=all"


FAILOVER = "failover (kill -9 leader)"


def _describe(figure: Figure) -> str:
    if isinstance(figure, Failed):
        return f"n/a: {figure.reason}"
    if figure.unit == "rec/s":
        return f"{fmt_rate(figure.value)} rec/s, {figure.seconds:.2f} s"
    if figure.unit == "ms":
        return ", ".join(
            f"{k} {v:.1f} ms"
            for k, v in figure.extra.items()
            if k.endswith("ms") and isinstance(v, int | float)
        )
    return f"{figure.value:.2f} {figure.unit}"


# ---------------------------------------------------------------------------- workloads


def produce(
    client: clients.Client, bootstrap: str, topic: str, records: Path, *, count: int, acks: str
) -> float:
    """Seconds for the produce bench's client to write ``records`` with ``acks``."""
    settings = {**clients.PRODUCER_SETTINGS, "acks": acks}
    if isinstance(client, clients.Kcat):
        cmd = [client.binary, "-P", "-q", "-b", bootstrap, "-t", topic, "-p", "0"]
        for key, value in settings.items():
            cmd += ["-X", f"{key}={value}"]
        err = client.workdir / "kcat-replication.err"
        with open(records, "rb") as stdin, open(err, "wb") as stderr:
            started = time.perf_counter()
            proc = subprocess.run(cmd, stdin=stdin, stderr=stderr, timeout=600, check=False)
            elapsed = time.perf_counter() - started
        text = err.read_text(errors="replace")
        if proc.returncode != 0 or "Failed" in text or "ERROR" in text:
            raise RuntimeError(f"kcat -P exited {proc.returncode}: {text.strip()[-300:]}")
        return elapsed
    args = ["produce", bootstrap, topic, str(records), str(count), json.dumps(settings)]
    worker = subprocess.run(
        [python(), "-m", "bench.ck_worker", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if worker.returncode != 0:
        raise RuntimeError(f"ck_worker produce: {worker.stderr.strip()[-300:]}")
    return float(json.loads(worker.stdout.strip().splitlines()[-1])["seconds"])


def measure_produce(
    client: clients.Client,
    bootstrap: str,
    topic: str,
    records: Path,
    *,
    count: int,
    acks: str,
) -> Figure:
    try:
        before = clients.high_watermark(bootstrap, topic)
        seconds = produce(client, bootstrap, topic, records, count=count, acks=acks)
        stored = clients.high_watermark(bootstrap, topic) - before
    except Exception as exc:
        return Failed(f"{type(exc).__name__}: {exc}"[:300])
    if stored != count:
        return Failed(f"{stored} of {count} records stored")
    return Measure(count / seconds, "rec/s", seconds, count, count * SIZE, note=client.name)


def cluster_pids(cluster: Any) -> list[int]:
    """The broker processes of a SluiceCluster or a KafkaCluster."""
    members = getattr(cluster, "brokers", None) or getattr(cluster, "nodes", [])
    return [m.proc.pid for m in members if m.proc is not None]


def measure_latency(
    bootstrap: str, topic: str, *, rate: float, seconds: float, pids: Sequence[int] = ()
) -> Figure:
    """p50/p99 of librdkafka's per-message latency at a fixed rate, acks=all, linger.ms=5,
    at most 5 requests in flight (the Java client's defaults). With linger.ms=0 and librdkafka's
    unlimited in-flight requests every record becomes its own request; Kafka serves a
    connection's requests one at a time, each waiting for the followers, and the queue grew
    without bound (p50 of 9 s measured at 2,000/s)."""
    errors: list[str] = []
    samples: list[float] = []
    measuring = [False]

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        elif measuring[0]:
            samples.append(msg.latency())

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": 5,
            "enable.idempotence": False,
            "log_level": 0,
        }
    )
    value = b"v" * SIZE
    warmup = 1.0
    started = time.monotonic()
    sent = 0
    cpu_at: tuple[float, float, float] | None = None
    while True:
        now = time.monotonic()
        if now >= started + warmup + seconds:
            break
        measuring[0] = now >= started + warmup
        if measuring[0] and cpu_at is None:
            cpu_at = (now, sum(map(cpu_seconds, pids)), time.process_time())
        due = int((now - started) * rate) + 1 - sent
        for _ in range(due):
            producer.produce(topic, value, partition=0, on_delivery=delivered)
        sent += max(0, due)
        producer.poll(PACING_TICK_S)
    ended = (time.monotonic(), sum(map(cpu_seconds, pids)), time.process_time())
    remaining = producer.flush(60)
    if remaining or errors:
        return Failed(f"{remaining} undelivered, {len(errors)} errors: {errors[:2]}")
    if not samples:
        return Failed("no latency samples")
    qs = statistics.quantiles(samples, n=100, method="inclusive")
    p50, p99 = qs[49] * 1000, qs[98] * 1000
    begun = cpu_at or ended
    wall = max(ended[0] - begun[0], 1e-9)
    return Measure(
        p50,
        "ms",
        seconds,
        len(samples),
        len(samples) * SIZE,
        note="confluent-kafka msg.latency()",
        extra={
            "p50_ms": p50,
            "p99_ms": p99,
            "rate": len(samples) / wall,
            "brokers_cores": (ended[1] - begun[1]) / wall,
            "producer_cores": (ended[2] - begun[2]) / wall,
        },
    )


def steady_failover_producer(bootstrap: str, topic: str) -> SteadyProducer:
    """The failover benches' producer (FAILOVER_RATE records/s over FAILOVER_PARTITIONS),
    started and past its first second of acknowledgements; the caller stops it."""
    producer = SteadyProducer(bootstrap, topic, FAILOVER_PARTITIONS, rate=FAILOVER_RATE).start()
    try:
        wait_for(lambda: len(producer.acks) >= FAILOVER_RATE, 60, "the first acknowledgements")
    except BaseException:
        producer.stop(30)
        raise
    return producer


def leader_faults(cluster: Any, topic: str, count: int, fault: str = "kill") -> list[float]:
    """``count`` faults of a partition's leader under a steady producer: ``kill`` (SIGKILL,
    then ``cluster.start(node)`` once it left the ISR) or ``pause`` (SIGSTOP of
    ``cluster.pid(node)``, SIGCONT once the partition acknowledged again); seconds from
    each fault to the first acknowledgement on that partition of a record produced after
    it. Each faulted node is waited for in the ISR before the next fault. Raises on the
    first failure, with the times so far in ``exc.times``."""
    admin = admin_client(cluster.bootstrap)
    producer = steady_failover_producer(cluster.bootstrap, topic)
    times: list[float] = []
    try:
        for n in range(count):
            partition = n % FAILOVER_PARTITIONS
            leader = leader_of(admin, topic, partition)
            pid = cluster.pid(leader) if fault == "pause" else 0
            at = time.monotonic()
            if fault == "pause":
                os.kill(pid, signal.SIGSTOP)
            else:
                cluster.kill(leader)
            try:
                ack = producer.wait_ack_after(partition, at, 90)
            finally:
                if fault == "pause":
                    # a supervisor may have replaced the frozen process meanwhile
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
            times.append(ack.acked - at)
            print(
                f"    {fault} {n + 1}/{count}: node {leader}, partition {partition}: "
                f"{times[-1] * 1000:.0f} ms",
                flush=True,
            )
            if fault == "kill":
                # a supervised cluster restarts the node itself, often before the ISR shows
                # it gone: its start() waits for that restart instead
                if not getattr(cluster, "restarts_itself", False):
                    wait_out_of_isr(admin, topic, partition, leader, 30)
                cluster.start(leader)
            wait_in_isr(admin, topic, leader, 120)
    except Exception as exc:
        exc.times = times  # type: ignore[attr-defined]
        raise
    finally:
        producer.stop(30)
    return times


def measure_failover(cluster: Any, topic: str, kills: int) -> Figure:
    try:
        times = leader_faults(cluster, topic, kills)
    except Exception as exc:
        times = getattr(exc, "times", [])
        if not times:
            return Failed(f"{type(exc).__name__}: {exc}"[:300])
        print(f"    stopped after {len(times)} kills: {exc}", flush=True)
    median, worst = statistics.median(times) * 1000, max(times) * 1000
    return Measure(
        median,
        "ms",
        sum(times),
        len(times),
        0,
        note=f"{len(times)} kills",
        extra={"median_ms": median, "max_ms": worst, "runs_ms": [t * 1000 for t in times]},
    )


# ---------------------------------------------------------------------------- systems


def run_system(
    results: Results,
    system: str,
    single: Callable[[], Any],
    cluster_factory: Callable[[], Any],
    *,
    client: clients.Client,
    records: Path,
    settings: Settings,
) -> None:
    server = None
    try:
        if not settings.only_latency:
            server = single()
            measure_single(
                results, system, server, client=client, records=records, settings=settings
            )
    except Exception as exc:
        traceback.print_exc()
        results.put(system, SINGLE, Failed(f"{type(exc).__name__}: {exc}"[:300]))
    finally:
        if server is not None:
            server.stop()
    run_cluster(results, system, cluster_factory, client=client, records=records, settings=settings)


def measure_single(
    results: Results,
    system: str,
    server: Any,
    *,
    client: clients.Client,
    records: Path,
    settings: Settings,
) -> None:
    count = settings.count
    server.start()
    server.create_topic("repl-warmup")
    server.create_topic("repl-single")
    for _ in range(settings.warmup_rounds):
        produce(client, server.bootstrap, "repl-warmup", records, count=count, acks="1")
    results.put(
        system,
        SINGLE,
        measure_produce(client, server.bootstrap, "repl-single", records, count=count, acks="1"),
    )


def run_cluster(
    results: Results,
    system: str,
    cluster_factory: Callable[[], Any],
    *,
    client: clients.Client,
    records: Path,
    settings: Settings,
) -> None:
    """The 3-broker figures: throughput, the latency curve, failover (the curve alone with
    ``only_latency``)."""
    count = settings.count
    cluster = None
    names = (CLUSTER, *map(latency_name, settings.rates), FAILOVER)
    try:
        cluster = cluster_factory()
        started = time.monotonic()
        cluster.start()
        print(f"  {system} cluster of 3 up in {time.monotonic() - started:.1f} s", flush=True)
        bootstrap = cluster.bootstrap
        for topic in ("repl-warmup", "repl-rf3", "repl-latency"):
            create_topic(bootstrap, topic, partitions=1, replication=3, config=TOPIC_CONFIG)
        create_topic(
            bootstrap,
            "repl-failover",
            partitions=FAILOVER_PARTITIONS,
            replication=3,
            config=TOPIC_CONFIG,
        )
        for _ in range(settings.warmup_rounds):
            produce(client, bootstrap, "repl-warmup", records, count=count, acks="all")
        if not settings.only_latency:
            results.put(
                system,
                CLUSTER,
                measure_produce(client, bootstrap, "repl-rf3", records, count=count, acks="all"),
            )
        for rate in settings.rates:
            results.put(
                system,
                latency_name(rate),
                measure_latency(
                    bootstrap,
                    "repl-latency",
                    rate=rate,
                    seconds=settings.latency_seconds,
                    pids=cluster_pids(cluster),
                ),
            )
        if not settings.only_latency:
            results.put(
                system, FAILOVER, measure_failover(cluster, "repl-failover", settings.kills)
            )
    except Exception as exc:
        if isinstance(exc, ClusterNotFormed):
            first = str(exc).splitlines()[0]
            reason = f"{system} cluster did not form: {first}"
            print(f"  {reason}\n  (broker logs follow)\n{_indent(str(exc))}", flush=True)
        else:
            traceback.print_exc()
            reason = f"{type(exc).__name__}: {exc}"
        for name in names:
            if results.get(system, name) is None:
                results.put(system, name, Failed(reason[:300]))
    finally:
        if cluster is not None:
            cluster.stop()


def _indent(text: str, lines: int = 40) -> str:
    return "\n".join("    " + line for line in text.splitlines()[1 : lines + 1])


# ---------------------------------------------------------------------------- report


def _value(figure: Figure | None, key: str = "") -> float | None:
    if not isinstance(figure, Measure):
        return None
    return float(figure.extra[key]) if key else figure.value


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "rec/s":
        return f"{fmt_rate(value)} rec/s"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "cores":
        return f"{value:.2f} cores"
    return f"{value:,.1f} ms" if value < 100 else f"{value:,.0f} ms"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def report(results: Results, settings: Settings, kafka_label: str) -> list[str]:
    rows: list[tuple[str, float | None, float | None, str]] = []

    def fig(system: str, name: str, key: str = "") -> float | None:
        return _value(results.get(system, name), key)

    count = f"{settings.count:,} x {SIZE} B"
    rows.append(
        (f"produce {count}, 1 broker, acks=1", fig("Sluice", SINGLE), fig("Kafka", SINGLE), "rec/s")
    )
    rows.append(
        (
            f"produce {count}, 3 brokers RF=3, acks=all",
            fig("Sluice", CLUSTER),
            fig("Kafka", CLUSTER),
            "rec/s",
        )
    )
    own: dict[str, float | None] = {}
    for system in ("Sluice", "Kafka"):
        a, b = fig(system, CLUSTER), fig(system, SINGLE)
        own[system] = a / b if a is not None and b else None
    rows.append(("  RF=3 acks=all / 1 broker acks=1", own["Sluice"], own["Kafka"], "x"))
    for rate in settings.rates:
        name = latency_name(rate)
        for key, label, unit in (
            ("p50_ms", "latency p50", "ms"),
            ("p99_ms", "latency p99", "ms"),
            ("rate", "  rate reached", "rec/s"),
            ("brokers_cores", "  CPU of the 3 brokers", "cores"),
            ("producer_cores", "  CPU of the producer", "cores"),
        ):
            rows.append(
                (
                    f"{label}, {rate:,}/s x {SIZE} B, acks=all",
                    fig("Sluice", name, key),
                    fig("Kafka", name, key),
                    unit,
                )
            )
    kills = {s: results.get(s, FAILOVER) for s in ("Sluice", "Kafka")}
    n = "/".join(str(k.records) if isinstance(k, Measure) else "-" for k in kills.values())
    rows.append(
        (
            f"failover median ({n} kills)",
            fig("Sluice", FAILOVER, "median_ms"),
            fig("Kafka", FAILOVER, "median_ms"),
            "ms",
        )
    )
    rows.append(
        ("failover max", fig("Sluice", FAILOVER, "max_ms"), fig("Kafka", FAILOVER, "max_ms"), "ms")
    )

    lines = [
        f"| replication figure | Sluice | {kafka_label} | Sluice / Kafka |",
        "|---|---:|---:|---:|",
    ]
    for name, sluice, kafka, unit in rows:
        lines.append(
            f"| {name} | {_fmt(sluice, unit)} | {_fmt(kafka, unit)} | {_ratio(sluice, kafka)} |"
        )
    reasons = []
    for system, by_name in results.figures.items():
        for name, figure in by_name.items():
            if isinstance(figure, Failed):
                reasons.append(f"- {system}, {name}: n/a: {figure.reason}")
    for system in ("Sluice", "Kafka"):
        failover = results.get(system, FAILOVER)
        if isinstance(failover, Measure):
            runs = ", ".join(f"{t:.0f}" for t in failover.extra["runs_ms"])
            reasons.append(f"- {system} failover times (ms): {runs}")
    lines += ["", *reasons] if reasons else []
    lines += [
        "",
        "Sluice / Kafka: above 1 is faster for throughput, slower for latency and failover. "
        "Failover: kill -9 of a partition's leader to the first acknowledged write (of a record "
        "produced after the kill) to that partition; both clusters use "
        "broker.session.timeout.ms=1500, broker.heartbeat.interval.ms=250.",
    ]
    return lines


def run(
    settings: Settings, workdir: Path, client: clients.Client, kafka_version: str = ""
) -> list[str]:
    """Both systems, one after the other; returns the report's lines (also printed)."""
    results = Results()
    records = clients.record_file(workdir, SIZE, settings.count)
    print("bench: replication, Sluice", flush=True)
    run_system(
        results,
        "Sluice",
        lambda: SluiceServer(workdir / "repl-sluice-single"),
        lambda: SluiceCluster(workdir / "repl-sluice-cluster", brokers=3, form_timeout=60),
        client=client,
        records=records,
        settings=settings,
    )
    if settings.skip_kafka:
        print("bench: replication, Kafka skipped (--skip-kafka)", flush=True)
    else:
        reason = KafkaServer.unavailable()
        if reason:
            print(f"bench: replication, Kafka skipped: {reason}", flush=True)
            for name in (SINGLE, CLUSTER, *map(latency_name, settings.rates), FAILOVER):
                results.put("Kafka", name, Failed(reason))
        else:
            print("bench: replication, Apache Kafka", flush=True)
            run_system(
                results,
                "Kafka",
                lambda: KafkaServer(workdir / "repl-kafka-single"),
                lambda: KafkaCluster(workdir / "repl-kafka-cluster", brokers=3),
                client=client,
                records=records,
                settings=settings,
            )
    label = f"Kafka {kafka_version}".strip()
    lines = report(results, settings, label)
    print()
    print("\n".join(lines), flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_replication", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer records and kills")
    parser.add_argument("--skip-kafka", action="store_true", help="do not start Apache Kafka")
    parser.add_argument("--client", choices=("kcat", "confluent"), default=None)
    parser.add_argument("--workdir", help="parent of the temporary data dirs (default: TMPDIR)")
    parser.add_argument(
        "--rates",
        default=",".join(map(str, LATENCY_RATES)),
        help="records/s of the latency curve, comma-separated (default %(default)s)",
    )
    parser.add_argument(
        "--only-latency",
        action="store_true",
        help="the 3-broker latency curve alone (no throughput runs, no kills)",
    )
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="sluice-bench-repl-", dir=args.workdir))
    try:
        name = args.client or ("kcat" if clients.Kcat.available() else "confluent")
        client: clients.Client = (
            clients.Kcat(workdir) if name == "kcat" else clients.Confluent(workdir)
        )
        kafka = kafka_oracle.kafka_version() or ""
        rates = tuple(int(r) for r in args.rates.split(",") if r.strip())
        settings = Settings(args.quick, args.skip_kafka, rates, args.only_latency)
        run(settings, workdir, client, kafka)
        return 0
    finally:
        kill_all_children()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
