"""Many idempotent producers at once: nothing acknowledged is lost, nothing is duplicated.

Idempotent producers that start at the same moment must get distinct producer ids; two
producers sharing one id write the same sequence numbers to a partition, and the broker
then takes one producer's batch for a retry of the other's and acknowledges it without
writing it (8 confluent-kafka producers once had 16,000 records acknowledged and 6,000-8,000
in the log).

Producers of four libraries (confluent-kafka, kafka-python, aiokafka and the Java client,
tests/support/many_producers.py) are released together by a barrier and write distinct,
self-describing records (key and value ``NAME:SEQ``) to every partition of a 3-partition
topic, acks=all. After they stop the topic is read from offset 0 with a consumer, and
each partition's batch headers by raw Fetch, and ``check_log`` asserts: every acknowledged
record is in the log exactly once, at the offset it was acknowledged at; no record twice;
each producer's records in order within a partition; no producer id shared by two
producers. Counts per client are in the assertion message.

Tests (times on 2 shared cores):
- ``test_init_producer_id_at_once_gives_distinct_ids``: 30 raw InitProducerId requests at
  the same instant, spread over every broker: 30 distinct ids.
- ``test_many_idempotent_producers_lose_nothing``: 24 producers (10 confluent-kafka, 6
  kafka-python, 6 aiokafka, 2 Java) x 300 records, nothing may fail (about 4-8 s).
  Both run against one Sluice broker, a 3-broker Sluice cluster (RF 3,
  min.insync.replicas 2) and Apache Kafka 4.3.1 as the oracle, single node and 3 nodes
  (``oracle``; skipped with the reason when it cannot run); one system at a time. The
  3-node Kafka is ``long`` (`make test-long`): it takes minutes to start on 2 loaded cores.
- ``test_many_producers_while_leaders_are_killed`` (18 producers, 3 kills) and
  ``test_fifty_producers_while_leaders_are_killed`` (50 at once, then 5 more; 5 kills):
  3-broker cluster, partition leaders SIGKILLed and restarted while the producers run (as
  tests/cluster/test_kill_leader.py); failed records may be absent or present once. The
  fifty-producer run is ``long`` on both systems (`make test-long`).
  Sluice about 25 s and 35 s; Kafka about 2 and 4 minutes (``long``: `make test-long`).
Nothing asserts on timing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import (
    admin_client,
    create_topic,
    leader_of,
    partition_states,
    wait_for,
    wait_in_isr,
    wait_out_of_isr,
)
from tests.support.java_client import java_available
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_oracle import KafkaOracle, oracle_available
from tests.support.many_producers import (
    ProducerPool,
    Verdict,
    check_log,
    init_producer_ids_at_once,
    read_batches,
    read_log,
)
from tests.support.sluice_cluster import SluiceCluster

PARTITIONS = 3
# The default mix: 24 producers x 300 records. The Python producers write 100 records/s
# each, so that all of them are still writing when the JVMs (about a second to start) begin:
# every producer's batches interleave with everyone else's on every partition.
MIX = {"confluent": 10, "kafka-python": 6, "aiokafka": 6, "java": 2}
RECORDS = 300
RATE = 100.0


@dataclass
class System:
    kind: str
    bootstrap: str
    size: int
    cluster: BrokerProcess | SluiceCluster | KafkaOracle | KafkaCluster

    @property
    def servers(self) -> list[str]:
        return self.bootstrap.split(",")

    def logs(self) -> str:
        c = self.cluster
        if isinstance(c, BrokerProcess):
            return c.logs()[-3000:]
        if isinstance(c, KafkaOracle):
            return c.log_tail(30)
        return "\n".join(f"--- node {i}:\n{c.logs(i, 30)}" for i in range(c.size))


def need_java() -> None:
    reason = java_available()
    if reason:
        pytest.skip(f"the Java client cannot run here: {reason}")


def need_kafka() -> None:
    reason = oracle_available()
    if reason:
        pytest.skip(f"Apache Kafka oracle cannot run here: {reason}")


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sluice", id="sluice"),
        pytest.param("sluice3", id="sluice3"),
        pytest.param("kafka", id="kafka", marks=pytest.mark.oracle),
        # a 3-node Kafka takes minutes to start on 2 loaded cores: `make test-long`
        pytest.param("kafka3", id="kafka3", marks=[pytest.mark.oracle, pytest.mark.long]),
    ],
)
def system(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[System]:
    """A running system, one at a time (module scope, parametrized: pytest runs every test
    of one system before it starts the next)."""
    kind: str = request.param
    workdir = tmp_path_factory.mktemp(kind)
    if kind.startswith("kafka"):
        need_kafka()
    if kind == "sluice":
        broker = BrokerProcess(workdir / "data")
        try:
            broker.start()
            yield System(kind, broker.bootstrap, 1, broker)
        finally:
            broker.stop()
            broker.kill()
        return
    cluster: SluiceCluster | KafkaOracle | KafkaCluster
    if kind == "sluice3":
        cluster = SluiceCluster(workdir, brokers=3)
    elif kind == "kafka":
        cluster = KafkaOracle(workdir)
    else:
        cluster = KafkaCluster(workdir, brokers=3)
    try:
        cluster.start()
        yield System(kind, cluster.bootstrap, 1 if kind == "kafka" else 3, cluster)
    finally:
        cluster.stop()


def test_init_producer_id_at_once_gives_distinct_ids(system: System) -> None:
    """30 InitProducerId requests on 30 raw connections at the same instant (spread over
    every broker of a cluster): 30 distinct producer ids, each at epoch 0."""
    answers = init_producer_ids_at_once(system.servers, 30)
    ids = Counter(pid for pid, _ in answers)
    assert len(ids) == 30, (
        f"{len(ids)} distinct producer ids for 30 producers; shared: "
        f"{ {pid: n for pid, n in ids.items() if n > 1} }"
    )
    assert {epoch for _, epoch in answers} == {0}, answers


def test_many_idempotent_producers_lose_nothing(
    system: System, capsys: pytest.CaptureFixture[str]
) -> None:
    """24 producers of four libraries x 300 records, started together, acks=all: every
    record acknowledged, each in the log once where it was acknowledged, in order, and no
    producer id shared."""
    need_java()
    started = time.monotonic()
    topic = f"many-producers-{time.monotonic_ns()}"
    replication = min(3, system.size)
    create_topic(
        system.bootstrap,
        topic,
        partitions=PARTITIONS,
        replication=replication,
        config={"min.insync.replicas": "2"} if replication >= 3 else {},
    )
    with ProducerPool(
        system.bootstrap,
        topic,
        PARTITIONS,
        records=RECORDS,
        rate=RATE,
        java_records=RECORDS,
        # no faults: nothing should wait long; a broken broker fails the test sooner
        delivery_timeout_ms=30_000,
        request_timeout_ms=10_000,
    ) as pool:
        for client, count in MIX.items():
            pool.add(client, count)
        pool.start()
        finished = pool.join(180)
    log = read_log(system.bootstrap, topic, PARTITIONS)
    batches = read_batches(system.bootstrap, topic, PARTITIONS)
    verdict = check_log(pool.outcomes, log, batches, every_record_acknowledged=True)
    with capsys.disabled():
        print(
            f"\n[{system.kind}] {verdict.lines[0]}; all producers active together for "
            f"{pool.overlap():.1f} s; test took {time.monotonic() - started:.1f} s"
        )
    try:
        assert finished, "producers still running after 180 s\n" + verdict.report()
        assert not verdict.problems, f"[{system.kind}] " + verdict.report()
    except AssertionError as exc:
        exc.add_note(system.logs())
        raise


# --------------------------------------------------------------------------- leader kills


@dataclass(frozen=True)
class KillRun:
    mix: dict[str, int]  # Python producers (run until stopped) and Java ones at the barrier
    rate: float  # records/s of each Python producer
    kills: int  # a Java producer is launched with each kill too
    java_records: int


DEFAULT_KILLS = KillRun(
    mix={"confluent": 6, "kafka-python": 4, "aiokafka": 4, "java": 1},
    rate=20,
    kills=3,
    java_records=400,
)
LARGE_KILLS = KillRun(
    mix={"confluent": 20, "kafka-python": 12, "aiokafka": 14, "java": 4},
    rate=15,
    kills=5,
    java_records=1000,
)


@contextmanager
def killable_cluster(kind: str, workdir: Path) -> Iterator[SluiceCluster | KafkaCluster]:
    cluster: SluiceCluster | KafkaCluster
    if kind == "kafka":
        need_kafka()
        cluster = KafkaCluster(workdir / "kafka", brokers=3)
    else:
        cluster = SluiceCluster(workdir / "sluice", brokers=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def run_with_kills(
    kind: str, workdir: Path, run: KillRun, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python producers write at ``run.rate`` each until stopped; ``run.kills`` times the
    leader of a partition is SIGKILLed (a Java producer launched just before), the failover
    observed (an acknowledgement on that partition of a record produced after the kill),
    the node restarted and waited for until it is back in the ISR of its partitions."""
    need_java()
    started = time.monotonic()
    with killable_cluster(kind, workdir) as cluster:
        try:
            failovers, verdict, finished = kill_scenario(cluster, run)
        except BaseException as exc:
            exc.add_note("\n".join(f"--- node {i}:\n{cluster.logs(i, 30)}" for i in range(3)))
            raise
    with capsys.disabled():
        print(f"\n[{kind}] {verdict.lines[0]} ({time.monotonic() - started:.1f} s)")
        for partition, node, failover in failovers:
            print(
                f"[{kind}] killed node {node} (leader of partition {partition}): first "
                f"acknowledged write on the new leader {failover * 1000:.0f} ms after the kill"
            )
    assert finished, "producers still running 300 s after they were stopped\n" + verdict.report()
    assert not verdict.problems, f"[{kind}] " + verdict.report()


def kill_scenario(
    cluster: SluiceCluster | KafkaCluster, run: KillRun
) -> tuple[list[tuple[int, int, float]], Verdict, bool]:
    topic = "many-producers-kills"
    admin = admin_client(cluster.bootstrap)
    create_topic(
        cluster.bootstrap,
        topic,
        partitions=PARTITIONS,
        replication=3,
        config={"min.insync.replicas": "2"},
    )
    failovers: list[tuple[int, int, float]] = []
    python_producers = sum(n for client, n in run.mix.items() if client != "java")
    with ProducerPool(
        cluster.bootstrap,
        topic,
        PARTITIONS,
        records=None,
        rate=run.rate,
        java_records=run.java_records,
    ) as pool:
        for client, count in run.mix.items():
            pool.add(client, count)
        pool.start()
        pool.wait_acked(int(python_producers * run.rate), 120)  # about a second's worth
        for round_ in range(run.kills):
            partition = round_ % PARTITIONS
            leader = leader_of(admin, topic, partition)
            pool.launch_java()
            killed_at = time.monotonic()
            cluster.kill(leader)
            ack = pool.wait_ack_after(partition, killed_at, 90)
            failovers.append((partition, leader, ack.at - killed_at))
            wait_out_of_isr(admin, topic, partition, leader, 30)
            cluster.start(leader)
            wait_in_isr(admin, topic, leader, 120)
        pool.stop()
        finished = pool.join(300)
    wait_for(
        lambda: all(len(s.isr) == 3 for s in partition_states(admin, topic).values()),
        120,
        "full ISRs",
    )
    log = read_log(cluster.bootstrap, topic, PARTITIONS)
    batches = read_batches(cluster.bootstrap, topic, PARTITIONS)
    verdict = check_log(pool.outcomes, log, batches, every_record_acknowledged=False)
    return failovers, verdict, finished


# Sluice: about 20-30 s (default) and 30-45 s (fifty); Kafka about 2 and 4 minutes (a Kafka
# node takes 10-20 s to restart here): the oracle runs are slow.
KINDS = [
    pytest.param("sluice", id="sluice"),
    pytest.param("kafka", id="kafka", marks=[pytest.mark.oracle, pytest.mark.long]),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", KINDS)
def test_many_producers_while_leaders_are_killed(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """15 producers of four libraries (and 3 more Java producers, one per kill) on a
    3-broker cluster, RF 3, min.insync.replicas 2, while 3 partition leaders are SIGKILLed
    and restarted."""
    run_with_kills(kind, tmp_path, DEFAULT_KILLS, capsys)


# The larger run is `make test-long` on both systems; the default run above keeps Sluice's
# side of leader kills under many producers in `make test`.
@pytest.mark.long
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", KINDS)
def test_fifty_producers_while_leaders_are_killed(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """50 producers of four libraries (and 5 more Java producers, one per kill), 5 kills."""
    run_with_kills(kind, tmp_path, LARGE_KILLS, capsys)
