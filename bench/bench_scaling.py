"""Produce pauses while a cluster scales, beside the pause of a failover, in the same run.

    python -m bench.bench_scaling [--cycles N] [--no-write]

Starts a control plane (``python -m controlplane.main``) under a temporary SLUICE_HOME and
creates a 3-broker cluster with a 4-partition RF=3 topic. A steady idempotent acks=all
producer (confluent-kafka, 400 records/s spread over the 4 partitions) runs throughout. Each
cycle:

1. scale-out: update-broker-count 3 -> 4 (a Raft learner joins; nothing moves);
2. move onto it: AlterPartitionReassignments puts the new broker first in the replicas of
   partitions 0 and 2 (it catches up, then becomes their preferred leader);
3. scale-in: update-broker-count 4 -> 3 (the control plane moves every replica off the
   broker, waits for the reassignments, then stops and unregisters it);
4. failover: the leader of partition 1 is SIGKILLed (the control plane restarts it).

Before each step the cluster settles: full ISRs, preferred leaders, every partition acked.
The pause of a step is the largest gap between two consecutive acknowledgements of one
partition from the request until every partition has acknowledged a record produced after the
step's action returned (the cluster ACTIVE again; for the failover, the killed broker
restarted by the control plane), over all partitions. At the end every acknowledged
record is read back: each must be at its acknowledged offset exactly once.

Prints a table and replaces the "Scaling" section of bench/RESULTS.md unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import REPO, replace_section
from controlplane.kafka import Admin
from proto.sluice.v1 import clusters_pb2 as cpb
from proto.sluice.v1 import topics_pb2 as tpb
from tests.controlplane.harness import ControlPlaneProcess, running_control_plane, wait_until
from tests.support.cluster_workload import Ack, SteadyProducer, read_partitions

BEGIN = "<!-- BEGIN scaling (bench/bench_scaling.py) -->"
END = "<!-- END scaling -->"
RESULTS = REPO / "bench" / "RESULTS.md"
CLUSTER = "scaling"
TOPIC = "steady"
PARTITIONS = 4
RATE = 400.0
STEPS = ("scale-out", "move onto the new broker", "scale-in", "failover (kill -9 a leader)")


@dataclass
class Step:
    name: str
    started: float
    ended: float
    pause_ms: float = 0.0
    partition: int = -1


@dataclass
class Run:
    steps: list[Step] = field(default_factory=list)
    baseline_ms: float = 0.0
    acked: int = 0
    verified: int = 0
    failed: list[tuple[int, str]] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


def largest_gap(acks: list[Ack], started: float, ended: float) -> tuple[float, int]:
    """The longest time one partition went without an acknowledgement within
    [started, ended], in ms, and that partition. The gap that spans ``started`` counts from
    ``started``; a partition with no acknowledgement after ``ended`` yet counts until the first
    one after it."""
    worst, where = 0.0, -1
    for partition in range(PARTITIONS):
        times = sorted(a.acked for a in acks if a.partition == partition)
        previous = max((t for t in times if t <= started), default=started)
        for t in (t for t in times if t > started):
            gap = t - previous
            if gap > worst:
                worst, where = gap, partition
            if t > ended:
                break
            previous = t
    return worst * 1000, where


def brokers(plane: ControlPlaneProcess) -> list[cpb.Broker]:
    return list(plane.get(CLUSTER).brokers)


def describe(plane: ControlPlaneProcess) -> tpb.Topic:
    return plane.topics.DescribeTopic(
        tpb.DescribeTopicRequest(cluster=CLUSTER, name=TOPIC), metadata=plane.metadata, timeout=30
    )


def admin(plane: ControlPlaneProcess) -> Admin:
    first = brokers(plane)[0]
    return Admin(first.host, first.port, 30)


def all_in_sync(plane: ControlPlaneProcess, count: int) -> bool:
    parts = describe(plane).partition_details
    return all(len(p.isr) == len(p.replicas) == 3 and p.leader >= 0 for p in parts) and all(
        max(p.replicas) < count for p in parts
    )


def update_broker_count(plane: ControlPlaneProcess, count: int) -> None:
    plane.clusters.UpdateBrokerCount(
        cpb.UpdateBrokerCountRequest(name=CLUSTER, broker_count=count),
        metadata=plane.metadata,
        timeout=30,
    )
    plane.wait_state(CLUSTER, timeout=300)


def move_onto(plane: ControlPlaneProcess, newcomer: int) -> None:
    parts = {p.partition: list(p.replicas) for p in describe(plane).partition_details}
    moves: dict[tuple[str, int], Sequence[int] | None] = {}
    for partition in (0, 2):
        old = parts[partition]
        moves[(TOPIC, partition)] = [newcomer, *[r for r in old if r != newcomer][:2]]
    refused = asyncio.run(admin(plane).alter_partition_reassignments(moves))
    assert not refused, refused

    def led_by_newcomer() -> bool:
        details = {p.partition: p for p in describe(plane).partition_details}
        return all(
            details[p].leader == newcomer and len(details[p].isr) == 3 for p in (0, 2)
        ) and not asyncio.run(admin(plane).list_partition_reassignments())

    wait_until(led_by_newcomer, 120, f"broker {newcomer} leading partitions 0 and 2")


def kill_leader(plane: ControlPlaneProcess, partition: int) -> None:
    details = {p.partition: p for p in describe(plane).partition_details}
    leader = details[partition].leader
    pid = next(b.pid for b in brokers(plane) if b.id == leader)
    os.kill(pid, signal.SIGKILL)
    wait_until(
        lambda: next(b.pid for b in brokers(plane) if b.id == leader) not in (0, pid),
        60,
        f"broker {leader} restarted by the control plane",
    )


def settle(plane: ControlPlaneProcess, producer: SteadyProducer) -> None:
    """Until every replica is in the ISR, every partition is led by its preferred replica,
    and every partition has acknowledged a record produced after that."""

    def settled() -> bool:
        parts = describe(plane).partition_details
        return all_in_sync(plane, len(brokers(plane))) and all(
            p.leader == p.replicas[0] for p in parts
        )

    wait_until(settled, 120, "preferred leaders and full ISRs")
    now = time.monotonic()
    for partition in range(PARTITIONS):
        producer.wait_ack_after(partition, now, 60)


def timed(run: Run, producer: SteadyProducer, name: str, action: Callable[[], None]) -> None:
    started = time.monotonic()
    action()
    ended = time.monotonic()
    for partition in range(PARTITIONS):  # the pauses the step caused have ended
        producer.wait_ack_after(partition, ended, 120)
    with producer.lock:
        acks = list(producer.acks)
    pause, partition = largest_gap(acks, started, ended)
    run.steps.append(Step(name, started, ended, pause, partition))
    print(
        f"  {name}: {ended - started:.1f} s, largest pause {pause:.0f} ms (partition {partition})",
        flush=True,
    )


def measure(cycles: int) -> Run:
    run = Run(load_before=os.getloadavg())
    home = Path(tempfile.mkdtemp(prefix="sluice-bench-scaling-"))
    with running_control_plane(home) as plane:
        plane.create(CLUSTER, brokers=3)
        plane.topics.CreateTopic(
            tpb.CreateTopicRequest(
                cluster=CLUSTER, name=TOPIC, partitions=PARTITIONS, replication_factor=3
            ),
            metadata=plane.metadata,
            timeout=30,
        )
        wait_until(lambda: all_in_sync(plane, 3), 60, "every replica in the ISR")
        bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers(plane))
        producer = SteadyProducer(bootstrap, TOPIC, PARTITIONS, rate=RATE).start()
        try:
            wait_until(lambda: len(producer.acks) >= RATE, 60, "the first acknowledgements")
            quiet_from = time.monotonic()
            time.sleep(5)
            with producer.lock:
                acks = list(producer.acks)
            run.baseline_ms = largest_gap(acks, quiet_from, time.monotonic())[0]
            print(f"  steady state: largest pause {run.baseline_ms:.0f} ms over 5 s", flush=True)
            for cycle in range(cycles):
                print(f"  cycle {cycle + 1}/{cycles}", flush=True)
                settle(plane, producer)
                timed(run, producer, STEPS[0], lambda: update_broker_count(plane, 4))
                settle(plane, producer)
                timed(run, producer, STEPS[1], lambda: move_onto(plane, 3))
                settle(plane, producer)
                timed(run, producer, STEPS[2], lambda: update_broker_count(plane, 3))
                settle(plane, producer)
                timed(run, producer, STEPS[3], lambda: kill_leader(plane, 1))
        finally:
            undelivered = producer.stop(120)
        assert undelivered == 0, f"{undelivered} records undelivered"
        assert not producer.fatal, producer.fatal
        run.failed = list(producer.failed)
        run.acked = len(producer.acks)
        records, _ = read_partitions(bootstrap, TOPIC, PARTITIONS)
        at = {p: dict(rs) for p, rs in records.items()}
        seen = [int(v) for rs in records.values() for _, v in rs]
        assert len(seen) == len(set(seen)), "a record was written twice"
        for ack in producer.acks:
            value = at[ack.partition].get(ack.offset)
            if value is None or int(value) != ack.seq:
                raise AssertionError(f"acknowledged {ack} is not at its offset: {value!r}")
        run.verified = len(producer.acks)
    run.load_after = os.getloadavg()
    return run


def render(run: Run, cycles: int) -> str:
    rows = []
    for name in STEPS:
        steps = [s for s in run.steps if s.name == name]
        pauses = [s.pause_ms for s in steps]
        durations = [s.ended - s.started for s in steps]
        rows.append(
            f"| {name} | {statistics.median(durations):.1f} s | "
            f"{statistics.median(pauses):,.0f} ms | {max(pauses):,.0f} ms |"
        )
    failover = max(s.pause_ms for s in run.steps if s.name == STEPS[3])
    scale_in = max(s.pause_ms for s in run.steps if s.name == STEPS[2])
    moves = max(s.pause_ms for s in run.steps if s.name in STEPS[:3])
    verdict = "PASS" if moves <= failover else "FAIL"
    lines = [
        BEGIN,
        "## Scaling (issue 4)",
        "",
        f"`python -m bench.bench_scaling --cycles {cycles}` on {platform.node()} "
        f"({os.cpu_count()} cores), {time.strftime('%Y-%m-%d %H:%M')}; load average before "
        f"{run.load_before[0]:.1f}, after {run.load_after[0]:.1f}. A 3-broker cluster made by the "
        f"control plane; one {PARTITIONS}-partition RF=3 topic; an idempotent acks=all "
        f"confluent-kafka producer at {RATE:.0f} records/s throughout. Pause: the largest gap "
        "between two acknowledgements of one partition while the step runs (request to ACTIVE; "
        "for the failover, kill to the broker restarted by the control plane), until every "
        "partition has acknowledged a record produced after that. The cluster settles (full "
        "ISRs, preferred leaders) before each step.",
        "",
        f"| step (x{cycles}) | median duration | median pause | max pause |",
        "|---|---|---|---|",
        *rows,
        "",
        f"Steady state (5 s before the first step): largest pause {run.baseline_ms:.0f} ms. "
        f"Largest pause while scaling or moving replicas {moves:,.0f} ms (scale-in alone "
        f"{scale_in:,.0f} ms) against {failover:,.0f} ms for a failover in the same run: "
        f'target "no pause longer than a failover": {verdict}. '
        f"{run.acked:,} records acknowledged, {run.verified:,} read back at their acknowledged "
        f"offsets exactly once; {len(run.failed)} delivery errors.",
        END,
    ]
    return "\n".join(lines) + "\n"


def write(section: str) -> None:
    replace_section(RESULTS, BEGIN, END, section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    args = parser.parse_args(argv)
    run = measure(args.cycles)
    section = render(run, args.cycles)
    print(section)
    if not args.no_write:
        write(section)
        print(f"updated {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
