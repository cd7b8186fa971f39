"""The scale-in procedure of the reconciler against a simulated cluster (no processes): moves
planned and sent, progress polled, brokers stopped, unregistered and forgotten; failures."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from controlplane import reconciler as rec
from controlplane import scaling, store
from controlplane.config import Settings
from controlplane.kafka import KafkaResponseError, PartitionInfo, Reassignment, TopicMetadata
from controlplane.reconciler import BrokerRuntime, ClusterManager, ClusterReconciler
from controlplane.states import BrokerState, ClusterState
from controlplane.store import BrokerRecord, ClusterRecord, Store


class FakeProcess:
    def __init__(self) -> None:
        self.running = True

    def alive(self) -> bool:
        return self.running

    async def stop(self, timeout: float) -> None:
        self.running = False


class SimulatedCluster:
    """What the brokers answer: topics, reassignments that finish after ``polls`` polls."""

    def __init__(self, replicas: dict[tuple[str, int], tuple[int, ...]], polls: int = 2) -> None:
        self.replicas = dict(replicas)
        self.polls = polls
        self.moving: dict[tuple[str, int], tuple[list[int], int]] = {}
        self.sent: list[dict[tuple[str, int], Any]] = []
        self.unregistered: list[int] = []
        self.refuse: set[tuple[str, int]] = set()

    # the Admin methods the reconciler calls
    async def list_partition_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        out = {}
        for key, (target, left) in list(self.moving.items()):
            if left == 0:
                self.replicas[key] = tuple(target)
                del self.moving[key]
                continue
            self.moving[key] = (target, left - 1)
            old = self.replicas[key]
            out[key] = Reassignment(
                replicas=tuple(dict.fromkeys([*target, *old])),
                adding=tuple(r for r in target if r not in old),
                removing=tuple(r for r in old if r not in target),
            )
        return out

    async def metadata(self) -> list[TopicMetadata]:
        topics: dict[str, list[PartitionInfo]] = {}
        for (name, index), replicas in sorted(self.replicas.items()):
            topics.setdefault(name, []).append(
                PartitionInfo(index, replicas[0], replicas, replicas)
            )
        return [TopicMetadata(n, "", n.startswith("__"), tuple(ps)) for n, ps in topics.items()]

    async def alter_partition_reassignments(
        self, moves: dict[tuple[str, int], Any]
    ) -> dict[tuple[str, int], KafkaResponseError]:
        self.sent.append(dict(moves))
        refused = {}
        for key, target in moves.items():
            if key in self.refuse:
                refused[key] = KafkaResponseError(
                    ErrorCode.invalid_replica_assignment, "no", "reassign"
                )
            elif target is None:
                self.moving.pop(key, None)
            else:
                self.moving[key] = (list(target), self.polls)
        return refused

    async def unregister_broker(self, broker_id: int) -> None:
        self.unregistered.append(broker_id)


@pytest.fixture
def setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[ClusterReconciler, Store, list[BrokerRuntime]]:
    db = Store(tmp_path / "state.db")
    settings = Settings(reassignment_poll_ms=1, reassignment_timeout_ms=60_000)
    manager = ClusterManager(db, settings, tmp_path)
    cluster = ClusterRecord(
        name="c",
        cluster_id="id",
        state=ClusterState.ACTIVE,
        broker_count=4,
        voters=(0, 1, 2),
    )
    records = [
        BrokerRecord(
            "c", i, "127.0.0.1", 9000 + i, str(tmp_path / f"b{i}"), "/l", raft_port=9100 + i
        )
        for i in range(4)
    ]
    for r in records:
        Path(r.data_dir).mkdir()
    db.insert_cluster(cluster, records)
    reconciler = ClusterReconciler(manager, "c")
    runtimes = []
    for r in records:
        rt = BrokerRuntime(r, proc=FakeProcess(), state=BrokerState.RUNNING)  # type: ignore[arg-type]
        reconciler.runtimes[r.broker_id] = rt
        runtimes.append(rt)
    db.update_cluster(
        "c", broker_count=3, state=ClusterState.UPDATING, operation=store.OP_UPDATE_BROKER_COUNT
    )
    return reconciler, db, runtimes


def simulate(monkeypatch: pytest.MonkeyPatch, cluster: SimulatedCluster) -> list[list[int]]:
    asked: list[list[int]] = []

    async def on_any(brokers: Any, call: Any, timeout: float, *, read_only: bool = False) -> Any:
        asked.append([b.broker_id for b in brokers])
        return await call(cluster)

    monkeypatch.setattr(scaling, "on_any", on_any)
    return asked


async def test_partitions_move_then_the_broker_goes(
    setup: tuple[ClusterReconciler, Store, list[BrokerRuntime]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reconciler, db, runtimes = setup
    sim = SimulatedCluster({("t", 0): (3, 0, 1), ("t", 1): (0, 1, 2), ("__o", 0): (3,)})
    asked = simulate(monkeypatch, sim)
    cluster = db.get_cluster("c")
    assert cluster is not None
    assert await reconciler._scale_in(cluster, runtimes) == rec.AGAIN
    # internal topics move too; broker 2 is the least loaded (1 replica against 2)
    assert sim.sent == [{("__o", 0): [2], ("t", 0): [2, 0, 1]}]
    assert sim.replicas == {("t", 0): (2, 0, 1), ("t", 1): (0, 1, 2), ("__o", 0): (2,)}
    assert sim.unregistered == [3]
    assert [b.broker_id for b in db.brokers("c")] == [0, 1, 2]
    assert sorted(reconciler.runtimes) == [0, 1, 2]
    assert runtimes[3].proc is None
    assert not Path(runtimes[3].record.data_dir).exists()  # noqa: ASYNC240
    assert Path(runtimes[2].record.data_dir).exists()  # noqa: ASYNC240
    assert asked[0] == [0, 1, 2, 3], "any broker, those that stay first"
    assert asked[-1] == [0, 1, 2], "unregistered through a broker that stays"


async def test_a_refused_move_fails_and_keeps_the_brokers(
    setup: tuple[ClusterReconciler, Store, list[BrokerRuntime]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reconciler, db, runtimes = setup
    sim = SimulatedCluster({("t", 0): (3, 0), ("t", 1): (3, 1)})
    sim.refuse = {("t", 1)}
    simulate(monkeypatch, sim)
    cluster = db.get_cluster("c")
    assert cluster is not None
    assert await reconciler._scale_in(cluster, runtimes) == rec.IDLE
    after = db.get_cluster("c")
    assert after is not None
    assert (after.state, after.operation, after.broker_count) == (ClusterState.FAILED, "", 4)
    assert "1 partition(s) refused, e.g. t-1" in after.state_message
    assert "cancelled" in after.state_message
    assert sim.sent[-1] == {("t", 0): None}, "the move it started is cancelled"
    assert sim.unregistered == []
    assert len(db.brokers("c")) == 4
    assert all(rt.proc and rt.proc.alive() for rt in runtimes)


async def test_too_few_brokers_left_fails_before_anything_moves(
    setup: tuple[ClusterReconciler, Store, list[BrokerRuntime]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reconciler, db, runtimes = setup
    sim = SimulatedCluster({("t", 0): (0, 1, 2, 3)})
    simulate(monkeypatch, sim)
    cluster = db.get_cluster("c")
    assert cluster is not None
    await reconciler._scale_in(cluster, runtimes)
    after = db.get_cluster("c")
    assert after is not None
    assert after.state == ClusterState.FAILED
    assert "t-0 has 4 replicas but only 3 broker(s) would remain" in after.state_message
    assert sim.sent == []


async def test_a_reassignment_that_does_not_finish_times_out(
    setup: tuple[ClusterReconciler, Store, list[BrokerRuntime]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reconciler, db, runtimes = setup
    reconciler.manager.settings = dataclasses.replace(
        reconciler.settings, reassignment_timeout_ms=50
    )
    sim = SimulatedCluster({("t", 0): (3, 0)}, polls=10**9)
    simulate(monkeypatch, sim)
    cluster = db.get_cluster("c")
    assert cluster is not None
    await reconciler._scale_in(cluster, runtimes)
    after = db.get_cluster("c")
    assert after is not None
    assert after.state == ClusterState.FAILED
    assert "not moved off broker(s) 3 within 50 ms" in after.state_message
    assert "still moving: t-0" in after.state_message
    assert sim.moving == {}, "cancelled"
    assert len(db.brokers("c")) == 4
