"""Failover of a partition leader: killed (-9) or frozen (SIGSTOP), Sluice beside Kafka.

    python -m bench.bench_failover [--kills N] [--pauses N] [--restarts N] [--skip-kafka]
                                   [--only-fencing] [--keep]
                                   [--no-write]

Three systems, one after the other, each a 3-broker cluster on this machine with a topic of
6 partitions, RF=3, ``min.insync.replicas=2``, and a steady idempotent acks=all producer
(600 records/s, confluent-kafka):

- Sluice, supervised by the control plane with ``broker.exit.fencing.enable=true`` (the
  default): a killed broker's process exit is seen through its pidfd and the controller
  fences it at once (FenceBroker);
- Sluice, supervised, with ``broker.exit.fencing.enable=false`` and
  ``broker.watchdog.timeout.ms=0``: the controller waits for the broker's session
  (``broker.session.timeout.ms``, 1,500 ms), as Kafka's does, and a stopped broker lives
  on (the exit fencing run's watchdog kills a broker whose event loop stopped for 1.5 s);
- Apache Kafka 4.3.1, KRaft, ``broker.session.timeout.ms=1500`` and
  ``broker.heartbeat.interval.ms=250`` (``tests/support/kafka_cluster.py``); nothing
  supervises it, so the bench restarts a killed node itself.

Kill: SIGKILL the leader of a partition; the figure is the time from the kill to the first
acknowledgement, on that partition, of a record produced after the kill. The broker is
restarted (by the control plane, or the bench for Kafka) and waited for in the ISR before
the next kill. Pause: SIGSTOP the leader, the same figure, then SIGCONT once the partition
acknowledged again and wait for the ISR. Planned restart: the longest acknowledgement wait
of any record produced while a leader restarts on purpose (Sluice: RebootBroker, whose
controlled shutdown moves leaderships first; Kafka: SIGTERM, its controlled shutdown).
Medians and maxima; every figure is printed.

Replaces the "Failover" section of bench/RESULTS.md unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bench_controlplane import Plane, kill_under
from bench.bench_replication import (
    FAILOVER_PARTITIONS,
    TOPIC_CONFIG,
    leader_faults,
    steady_failover_producer,
)
from bench.common import replace_section
from proto.sluice.v1 import clusters_pb2 as pb
from tests.support import kafka_oracle
from tests.support.cluster_workload import (
    admin_client,
    create_topic,
    leader_of,
    wait_for,
    wait_in_isr,
)
from tests.support.kafka_cluster import KafkaCluster

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- failover:begin -->"
END = "<!-- failover:end -->"
TOPIC = "failover"
CLUSTER = "failover"


class Supervised:
    """A cluster of the control plane, seen as the bench sees a cluster: bootstrap, the pid
    of broker i, kill (the control plane restarts it) and start (wait for that restart)."""

    restarts_itself = True
    """The control plane restarts a killed broker (leader_faults waits for that)."""

    def __init__(self, home: Path, fencing: bool) -> None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "controlplane.properties").write_text(
            f"broker.exit.fencing.enable={'true' if fencing else 'false'}\n"
            # off: the session alone, as Kafka (the watchdog kills a stopped broker)
            f"broker.watchdog.timeout.ms={1500 if fencing else 0}\n"
            "billing.schedule.interval.ms=0\nmetering.interval.ms=60000\n"
        )
        self.home = home
        self.plane = Plane(home)
        self.killed: dict[int, int] = {}

    def __enter__(self) -> Supervised:
        self.plane.start()
        self.plane.create(CLUSTER)
        return self

    def __exit__(self, *exc: object) -> None:
        self.plane.stop()
        kill_under(self.home)

    def _brokers(self) -> dict[int, Any]:
        cluster = self.plane.get(CLUSTER)
        return {} if cluster is None else {b.id: b for b in cluster.brokers}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self._brokers().values())

    def pid(self, i: int) -> int:
        return int(self._brokers()[i].pid)

    def kill(self, i: int) -> None:
        self.killed[i] = self.pid(i)
        os.kill(self.killed[i], signal.SIGKILL)

    def start(self, i: int) -> None:
        old = self.killed.pop(i, 0)
        wait_for(
            lambda: self.plane.active(CLUSTER) is not None and self.pid(i) not in (0, old),
            120,
            f"the control plane's restart of broker {i}",
        )

    def restart(self, i: int) -> None:
        """A planned restart, as `cloudctl reboot-broker` asks for it: the control plane
        moves broker i's leaderships away (controlled shutdown), stops and starts it."""
        old = self.pid(i)
        self.plane.stub.RebootBroker(
            pb.RebootBrokerRequest(name=CLUSTER, broker_id=i), metadata=self.plane.md, timeout=10
        )
        wait_for(
            lambda: self.plane.active(CLUSTER) is not None and self.pid(i) not in (0, old),
            180,
            f"the reboot of broker {i}",
        )


class Unsupervised:
    """The Kafka cluster: killed nodes are restarted by the bench."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def pid(self, i: int) -> int:
        return self.cluster.node(i).pid

    def kill(self, i: int) -> None:
        self.cluster.kill(i)

    def start(self, i: int) -> None:
        self.cluster.start(i)

    def restart(self, i: int) -> None:
        """A planned restart: SIGTERM (Kafka's controlled shutdown moves the node's
        leaderships first), then start it again."""
        self.cluster.stop(i)
        self.cluster.start(i)


def measure(cluster: Any, count: int, fault: str) -> list[float]:
    """``count`` faults (``kill`` or ``pause``) of a partition leader, on a new topic."""
    create_topic(
        cluster.bootstrap, TOPIC, partitions=FAILOVER_PARTITIONS, replication=3, config=TOPIC_CONFIG
    )
    return leader_faults(cluster, TOPIC, count, fault)


def planned_restarts(cluster: Any, count: int) -> list[float]:
    """``count`` planned restarts of the leader of a partition under the steady producer;
    for each, the longest time any record produced during the restart (from the request
    until the node is back in every ISR) waited for its acknowledgement, on any partition.
    A restart that pauses no partition shows about one produce round trip."""
    create_topic(
        cluster.bootstrap, TOPIC, partitions=FAILOVER_PARTITIONS, replication=3, config=TOPIC_CONFIG
    )
    admin = admin_client(cluster.bootstrap)
    producer = steady_failover_producer(cluster.bootstrap, TOPIC)
    out: list[float] = []
    try:
        for n in range(count):
            partition = n % FAILOVER_PARTITIONS
            node = leader_of(admin, TOPIC, partition)
            began = time.monotonic()
            cluster.restart(node)
            wait_in_isr(admin, TOPIC, node, 120)
            ended = time.monotonic()
            produced = producer.sent
            wait_for(
                lambda produced=produced: len(producer.acks) >= produced - len(producer.failed),
                120,
                "the acknowledgements of the records produced during the restart",
            )
            with producer.lock:
                during = [a for a in producer.acks if began <= a.produced <= ended]
                failed = len(producer.failed)
            if failed:
                raise RuntimeError(f"{failed} records failed during planned restarts")
            worst = max(during, key=lambda a: a.acked - a.produced)
            out.append(worst.acked - worst.produced)
            print(
                f"    restart {n + 1}/{count}: node {node} (leader of partition {partition}): "
                f"{len(during)} records produced during it, longest wait {out[-1] * 1000:.0f} ms "
                f"(partition {worst.partition}, produced {worst.produced - began:.1f} s after "
                f"the request; the restart took {ended - began:.1f} s)",
                flush=True,
            )
    finally:
        producer.stop(30)
    return out


def run_system(
    label: str, enter: Callable[[], Any], kills: int, pauses: int, restarts: int
) -> dict[str, Any]:
    print(f"== {label}", flush=True)
    out: dict[str, Any] = {"label": label}
    try:
        if kills:
            with enter() as cluster:
                out["kill"] = measure(cluster, kills, "kill")
        if pauses:
            with enter() as cluster:
                out["pause"] = measure(cluster, pauses, "pause")
        if restarts:
            with enter() as cluster:
                out["restart"] = planned_restarts(cluster, restarts)
    except Exception as exc:  # a system that fails is reported, the others still run
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
        print(f"   failed: {out['error']}", flush=True)
    return out


def fmt(times: list[float] | None) -> str:
    if not times:
        return "n/a"
    return f"{statistics.median(times) * 1000:,.0f} ms (max {max(times) * 1000:,.0f})"


def render(results: list[dict[str, Any]], load: tuple[float, float]) -> str:
    lines = [
        BEGIN,
        "## Failover (issue 20)",
        "",
        f"`python -m bench.bench_failover`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        f" on {platform.node()} ({os.cpu_count()} cores); 1-minute load average "
        f"{load[0]:.1f} before, {load[1]:.1f} after. A 3-broker cluster, 6 partitions RF=3 "
        "min.insync.replicas=2, an idempotent acks=all producer at 600 records/s. Figure: "
        "from the fault on a partition's leader to the first acknowledgement on that "
        "partition of a record produced after it; median (max).",
        "",
        "Planned restart: `reboot-broker` of a partition's leader on Sluice (controlled "
        "shutdown by the control plane), SIGTERM and start on Kafka (its controlled "
        "shutdown); the figure is the longest any record produced during the restart (until "
        "the node is back in every ISR) waited for its acknowledgement, on any partition.",
        "",
        "| system | kill -9 of the leader | SIGSTOP of the leader | planned restart |",
        "|---|---|---|---|",
    ]
    for r in results:
        note = f" (failed: {r['error']})" if "error" in r else ""
        lines.append(
            f"| {r['label']}{note} | {fmt(r.get('kill'))} | {fmt(r.get('pause'))} "
            f"| {fmt(r.get('restart'))} |"
        )
    lines += ["", "Every figure (ms):", ""]
    for r in results:
        for fault in ("kill", "pause", "restart"):
            if r.get(fault):
                runs = ", ".join(f"{t * 1000:.0f}" for t in r[fault])
                lines.append(f"- {r['label']}, {fault}: {runs}")
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_failover", description=__doc__)
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--pauses", type=int, default=6)
    parser.add_argument("--restarts", type=int, default=6)
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    parser.add_argument(
        "--only-fencing", action="store_true", help="Sluice with exit fencing only (no 'off' run)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the work directory (its logs) and print it"
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-failover-"))
    results = []
    try:
        for fencing in (True,) if args.only_fencing else (True, False):
            label = f"Sluice, exit fencing and watchdog {'on' if fencing else 'off'}"
            n = len(results)
            results.append(
                run_system(
                    label,
                    lambda f=fencing, n=n: Supervised(work / f"sluice-{n}-{time.time_ns()}", f),
                    args.kills,
                    args.pauses,
                    args.restarts,
                )
            )
        reason = kafka_oracle.oracle_available()
        if args.skip_kafka or reason:
            print(f"== Kafka skipped: {reason or '--skip-kafka'}", flush=True)
        else:
            results.append(
                run_system(
                    "Apache Kafka 4.3.1, session 1.5 s",
                    lambda: KafkaSystem(work / f"kafka-{time.time_ns()}"),
                    args.kills,
                    args.pauses,
                    args.restarts,
                )
            )
    finally:
        if args.keep:
            print(f"== work directory kept: {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    section = render(results, (load_before, os.getloadavg()[0]))
    print(section)
    if not args.no_write:
        replace_section(RESULTS, BEGIN, END, section)
    return 0


class KafkaSystem:
    """A 3-node Kafka cluster for ``run_system``: started on entry, stopped on exit."""

    def __init__(self, workdir: Path) -> None:
        self.cluster = KafkaCluster(workdir, brokers=3)

    def __enter__(self) -> Unsupervised:
        self.cluster.__enter__()
        return Unsupervised(self.cluster)

    def __exit__(self, *exc: object) -> None:
        self.cluster.__exit__(None, None, None)


if __name__ == "__main__":
    raise SystemExit(main())
