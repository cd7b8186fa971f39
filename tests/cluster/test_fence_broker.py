"""FenceBroker: a supervisor that saw a broker's process exit has it fenced at once.

Three brokers with a 60-second ``broker.session.timeout.ms``, each started with a known
``broker.incarnation.id``. After a kill -9 of a partition's leader, FenceBroker naming the
dead process moves the leadership (well before the session could expire); naming another
process moves nothing; and once the broker restarts as a new process, the old
incarnation's FenceBroker leaves the new registration alone.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from controlplane.kafka import Admin, PartitionInfo
from tests.support.cluster_workload import wait_for
from tests.support.sluice_cluster import SluiceCluster

TOPIC = "fence-me"


def incarnated(tmp_path: Path, **settings: str) -> SluiceCluster:
    """Three brokers with a 60-second session, each with a known incarnation id."""
    cluster = SluiceCluster(
        tmp_path, brokers=3, settings={"broker.session.timeout.ms": "60000", **settings}
    )
    for i in range(3):
        cluster.broker(i).settings["broker.incarnation.id"] = str(uuid.uuid4())
    return cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SluiceCluster]:
    with incarnated(tmp_path) as cluster:
        yield cluster


def admin(cluster: SluiceCluster, i: int) -> Admin:
    return Admin("127.0.0.1", cluster.ports(i)[0], 10)


def partition(cluster: SluiceCluster, i: int) -> PartitionInfo | None:
    async def ask() -> PartitionInfo | None:
        try:
            (meta,) = await admin(cluster, i).metadata([TOPIC])
        except (OSError, ValueError):
            return None
        return meta.partitions[0] if meta.partitions else None

    return asyncio.run(ask())


def with_full_isr(cluster: SluiceCluster) -> PartitionInfo:
    """TOPIC created (1 partition, RF 3), once its ISR is full and both followers fetch
    from the leader: a new partition's ISR is every replica before any has fetched, so a
    record is acknowledged with acks=all first (each follower then holds a fetch open)."""
    asyncio.run(admin(cluster, 0).create_topic(TOPIC, 1, 3, {}))
    found: PartitionInfo = wait_for(
        lambda: (p := partition(cluster, 0)) is not None and len(p.isr) == 3 and p,
        60,
        "partition 0 with a full ISR",
    )
    results: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce(TOPIC, b"fetched by both", on_delivery=lambda err, _: results.append(err))
    assert producer.flush(60) == 0, "the acks=all record was not answered in 60 s"
    assert results == [None], f"the acks=all record failed: {results}"
    return found


def fence(cluster: SluiceCluster, via: int, broker: int, incarnation: str) -> bool:
    return asyncio.run(admin(cluster, via).fence_broker(broker, incarnation, "test: it exited"))


def test_fence_broker_moves_a_dead_process_s_leaderships_at_once(cluster: SluiceCluster) -> None:
    start = with_full_isr(cluster)
    leader = start.leader
    via = next(i for i in range(3) if i != leader)
    dead = cluster.broker(leader).settings["broker.incarnation.id"]

    cluster.kill(leader)
    assert fence(cluster, via, leader, str(uuid.uuid4())) is False  # not that process
    assert partition(cluster, via) == start
    assert fence(cluster, via, leader, dead) is True
    moved = wait_for(
        lambda: (p := partition(cluster, via)) is not None and p.leader != leader and p,
        30,
        "a new leader (the session alone would take 60 s)",
    )
    assert leader not in moved.isr
    assert fence(cluster, via, leader, dead) is False  # already fenced

    # a new process registers; the old one's FenceBroker leaves it alone
    cluster.broker(leader).settings["broker.incarnation.id"] = str(uuid.uuid4())
    cluster.start(leader)
    wait_for(
        lambda: (p := partition(cluster, via)) is not None and len(p.isr) == 3,
        120,
        "the restarted broker back in the ISR",
    )
    assert fence(cluster, via, leader, dead) is False
    assert leader in (partition(cluster, via) or start).isr


def controller_of(client: AdminClient) -> tuple[int] | None:
    """(the controller's id,) as a broker's metadata names it; None while it names none."""
    controller = client.list_topics(timeout=10).controller_id
    return (controller,) if controller >= 0 else None


def test_fence_broker_of_the_dead_controller_elects_a_new_one_at_once(
    cluster: SluiceCluster,
) -> None:
    """The process that exited was the active controller: the voter asked campaigns at once
    (the others wait 60 s for an election: ``controller.quorum.election.timeout.ms``), wins,
    and fences it; its leaderships move."""
    with_full_isr(cluster)
    client = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.ports(0)[0]}"})
    controller = wait_for(lambda: controller_of(client), 30, "a controller")[0]
    # the other voters restart with a 60-second election timeout, one at a time (a cluster
    # formed with it would wait that long for its first election)
    for i in (i for i in range(3) if i != controller):
        cluster.kill(i)
        cluster.broker(i).settings["controller.quorum.election.timeout.ms"] = "60000"
        cluster.broker(i).settings["broker.incarnation.id"] = str(uuid.uuid4())
        cluster.start(i)
        wait_for(
            lambda: (p := partition(cluster, controller)) is not None and len(p.isr) == 3,
            120,
            f"broker {i} back in the ISR",
        )
    assert client.list_topics(timeout=10).controller_id == controller
    via = next(i for i in range(3) if i != controller)
    dead = cluster.broker(controller).settings["broker.incarnation.id"]
    cluster.kill(controller)
    assert fence(cluster, via, controller, dead) is True
    others = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.ports(via)[0]}"})
    (new,) = wait_for(
        lambda: (c := controller_of(others)) is not None and c != (controller,) and c,
        30,
        "a new controller (an election timeout would take 60 s)",
    )
    assert new != controller
    assert wait_for(
        lambda: (p := partition(cluster, via)) is not None and controller not in p.isr and p,
        30,
        "the dead controller out of the ISR",
    )


def test_metadata_asked_between_a_death_and_its_fence_names_the_new_leader(
    tmp_path: Path,
) -> None:
    """A client asks for metadata the instant its connection to a dead leader resets,
    before the supervisor's fence lands (librdkafka: ~12 ms after a kill, the fence at
    17-30 ms); answered at once, it learned the dead leader and did not ask again for a
    second. A follower whose fetch connection the leader closed holds such an answer until
    the fence (up to ``metadata.leader.loss.wait.ms``, long here so that the test's own
    FenceBroker, sent after the request, is what ends the wait)."""
    with incarnated(tmp_path, **{"metadata.leader.loss.wait.ms": "30000"}) as cluster:
        leader = with_full_isr(cluster).leader
        asked, via = (i for i in range(3) if i != leader)
        dead = cluster.broker(leader).settings["broker.incarnation.id"]
        cluster.kill(leader)
        said = f"broker {leader} closed its fetch connection"
        wait_for(lambda: said in cluster.logs(asked, 400), 30, f"broker {asked}: {said}")

        async def ask_then_fence() -> PartitionInfo:
            answer = asyncio.ensure_future(admin(cluster, asked).metadata([TOPIC]))
            await asyncio.sleep(0.3)  # the request is in (an ordering, not a measurement)
            assert await admin(cluster, via).fence_broker(leader, dead, "test: it exited")
            (meta,) = await answer
            return meta.partitions[0]

        seen = asyncio.run(ask_then_fence())
        assert seen.leader not in (leader, -1)  # not the dead leader: the fence's outcome
        assert leader not in seen.isr
