"""The control plane has a broker fenced the moment its process exits.

It watches each broker process through a pidfd. When one dies it sends FenceBroker (through
another broker) naming the process by the ``broker.incarnation.id`` it started it with, and
the controller moves that broker's leaderships without waiting for its session to expire.
Which of the two fenced it first depends on the machine's load (the session here is the
default 1.5 s), so this test checks that the control plane named the process, asked, and
that leadership moved; ``tests/cluster/test_fence_broker.py`` checks the fencing itself with
a 60-second session. A broker that lives but makes no progress (SIGSTOP) is killed by the
control plane's watchdog, fenced and restarted, and a client whose write waited on it moves
to the new leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from pathlib import Path

from confluent_kafka import Producer

from controlplane.kafka import Admin, PartitionInfo
from controlplane.process import cmdline_setting
from proto.sluice.v1 import clusters_pb2 as cpb
from tests.controlplane.harness import ControlPlaneProcess, wait_until

TOPIC = "fenced-on-exit"


def partition_zero(broker: cpb.Broker) -> PartitionInfo | None:
    async def ask() -> PartitionInfo | None:
        try:
            (meta,) = await Admin(broker.host, broker.port, 5).metadata([TOPIC])
        except (OSError, ValueError):
            return None
        return meta.partitions[0] if meta.partitions else None

    return asyncio.run(ask())


def cluster_with_topic(
    plane: ControlPlaneProcess, name: str
) -> tuple[PartitionInfo, cpb.Broker, cpb.Broker]:
    """A 3-broker cluster ``name`` with TOPIC (1 partition, RF 3) once its ISR is full:
    the partition, its leader and another broker."""
    cluster = plane.create(name, brokers=3)
    brokers = {b.id: b for b in cluster.brokers}
    first = next(iter(brokers.values()))
    asyncio.run(Admin(first.host, first.port, 30).create_topic(TOPIC, 1, 3, {}))
    before: PartitionInfo = wait_until(
        lambda: (p := partition_zero(first)) is not None and len(p.isr) == 3 and p,
        60,
        "partition 0 with a full ISR",
    )
    leader = brokers[before.leader]
    return before, leader, next(b for b in brokers.values() if b.id != leader.id)


def back_in_the_isr(other: cpb.Broker) -> None:
    """Wait until ``other`` shows the restarted broker back in partition 0's ISR."""
    wait_until(
        lambda: (p := partition_zero(other)) is not None and len(p.isr) == 3,
        120,
        "the restarted broker back in the ISR",
    )


def test_a_killed_broker_is_fenced_when_its_process_exits(plane: ControlPlaneProcess) -> None:
    before, leader, other = cluster_with_topic(plane, "exits")
    incarnation = cmdline_setting(leader.pid, "broker.incarnation.id")
    assert uuid.UUID(incarnation)  # the control plane named the process

    # another process's incarnation fences nothing
    stranger = str(uuid.uuid4())
    fenced = asyncio.run(Admin(other.host, other.port, 10).fence_broker(leader.id, stranger, "t"))
    assert fenced is False
    assert partition_zero(other) == before

    os.kill(leader.pid, signal.SIGKILL)
    after = wait_until(
        lambda: (p := partition_zero(other)) is not None and p.leader != leader.id and p,
        60,
        "a new leader",
    )
    assert leader.id not in after.isr
    said = f"its process (pid {leader.pid}) exited"
    wait_until(lambda: said in plane.log_path.read_text(errors="replace"), 30, said)

    # the restarted process registers again and returns to the ISR
    back_in_the_isr(other)


def test_a_stopped_broker_is_killed_by_the_watchdog(plane: ControlPlaneProcess) -> None:
    """SIGSTOP of a partition leader while a client writes to it: the kernel still accepts
    the client's requests, so without the watchdog they wait for their request timeout (or
    the slower ApiVersions probes). The broker's watchdog file stops changing; the control
    plane fences and kills the process, the kernel closes its sockets, the client refreshes
    its metadata and its write is acknowledged by the new leader; the broker restarts."""
    _, leader, other = cluster_with_topic(plane, "watched")
    (data_dir,) = Path(plane.home, "clusters").glob(f"watched-*/broker-{leader.id}")
    assert (data_dir / "watchdog").exists()  # touched by the serving broker

    producer = Producer(
        {
            "bootstrap.servers": f"{other.host}:{other.port}",
            "enable.idempotence": True,
            "request.timeout.ms": 60_000,
            "message.timeout.ms": 120_000,
        }
    )
    acked: list[int] = []

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        acked.append(msg.partition())  # type: ignore[attr-defined]

    producer.produce(TOPIC, b"before", partition=0, on_delivery=delivered)
    producer.flush(30)
    assert acked == [0]

    os.kill(leader.pid, signal.SIGSTOP)
    try:
        producer.produce(TOPIC, b"during", partition=0, on_delivery=delivered)
        said = "is stuck: its watchdog file did not change"
        wait_until(lambda: said in plane.log_path.read_text(errors="replace"), 30, said)
        producer.flush(60)
        assert acked == [0, 0]
        after = partition_zero(other)
        assert after is not None
        assert after.leader != leader.id
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(leader.pid, signal.SIGCONT)

    # the old process is gone, a new one serves and is back in the ISR
    def restarted() -> bool:
        now = next(b for b in plane.get("watched").brokers if b.id == leader.id)
        return now.pid not in (0, leader.pid)

    wait_until(restarted, 60, "the broker restarted")
    back_in_the_isr(other)
