"""The control plane has a broker fenced the moment its process exits.

It watches each broker process through a pidfd. When one dies it sends FenceBroker (through
another broker) naming the process by the ``broker.incarnation.id`` it started it with, and
the controller moves that broker's leaderships without waiting for its session to expire.
Which of the two fenced it first depends on the machine's load (the session here is the
default 1.5 s), so this test checks that the control plane named the process, asked, and
that leadership moved; ``tests/cluster/test_fence_broker.py`` checks the fencing itself with
a 60-second session.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid

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


def test_a_killed_broker_is_fenced_when_its_process_exits(plane: ControlPlaneProcess) -> None:
    cluster = plane.create("exits", brokers=3)
    brokers = {b.id: b for b in cluster.brokers}
    first = next(iter(brokers.values()))
    asyncio.run(Admin(first.host, first.port, 30).create_topic(TOPIC, 1, 3, {}))
    before = wait_until(
        lambda: (p := partition_zero(first)) is not None and len(p.isr) == 3 and p,
        60,
        "partition 0 with a full ISR",
    )
    leader = brokers[before.leader]
    other = next(b for b in brokers.values() if b.id != leader.id)
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
    wait_until(
        lambda: (p := partition_zero(other)) is not None and len(p.isr) == 3,
        120,
        "the restarted broker back in the ISR",
    )
