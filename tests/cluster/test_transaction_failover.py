"""kill -9 of a transaction coordinator's broker while many transactional producers run:
every transaction ends committed on all its partitions or aborted on all, never half.

A 3-broker Sluice cluster; a topic of 3 partitions, RF=3; ``__transaction_state`` RF=3.
``PRODUCERS`` confluent-kafka transactional producers, each in its own thread with its own
transactional id, run transactions of one record per partition, committing two of every
three and aborting the third, and note how each call ended (committed, aborted, or unknown
when the call failed). After a few seconds the broker that coordinates the first producer's
id (FindCoordinator) is SIGKILLed and later restarted; the producers retry or start over.
Once they stop and every transaction has ended (the last stable offset reaches the high
watermark on every partition), a read_committed consumer reads the topic:

- each transaction's records are all there or none are (never half);
- every transaction whose commit returned is there, every one whose abort returned is not;
- no record is there twice.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewTopic, OffsetSpec
from kio.schema.find_coordinator.v4 import request as find_req
from kio.static.primitive import i8

from tests.support.cluster_workload import (
    admin_client,
    create_topic,
    partition_states,
    wait_for,
)
from tests.support.sluice_cluster import SluiceCluster
from wire.client import BlockingConnection

PRODUCERS = 6
PARTITIONS = 3
TOPIC = "txn-failover"
RUN_BEFORE_KILL_S = 3.0
DOWN_S = 4.0
RUN_AFTER_RESTART_S = 3.0
SETTINGS = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "min.insync.replicas": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SluiceCluster]:
    cluster = SluiceCluster(tmp_path_factory.mktemp("txn-failover"), 3, SETTINGS)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


class Worker(threading.Thread):
    def __init__(self, bootstrap: str, tid: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.tid = tid
        self.stop_event = stop
        self.outcomes: dict[int, str] = {}
        self.errors: list[str] = []

    def producer(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.tid,
                "transaction.timeout.ms": 6000,
                "log_level": 0,
            }
        )
        producer.init_transactions(60)
        return producer

    def run(self) -> None:
        producer: Producer | None = None
        n = 0
        while not self.stop_event.is_set():
            try:
                if producer is None:
                    producer = self.producer()
                n += 1
                self.outcomes[n] = "unknown"
                producer.begin_transaction()
                for p in range(PARTITIONS):
                    producer.produce(TOPIC, f"{self.tid}:{n}:{p}".encode(), partition=p)
                if n % 3:
                    producer.commit_transaction(30)
                    self.outcomes[n] = "committed"
                else:
                    producer.flush(30)
                    producer.abort_transaction(30)
                    self.outcomes[n] = "aborted"
            except KafkaException as exc:
                error = exc.args[0]
                self.errors.append(str(error))
                if error.txn_requires_abort():
                    try:
                        assert producer is not None
                        producer.abort_transaction(30)
                    except KafkaException:
                        producer = None
                else:
                    producer = None  # fatal or not abortable: a new producer fences this one
                time.sleep(0.2)


def coordinator_of(cluster: SluiceCluster, tid: str) -> int:
    def find() -> tuple[int] | None:
        with BlockingConnection.to(cluster.broker(0).bootstrap) as conn:
            answer = conn.request(
                find_req.FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(tid,))
            )
        coordinator = answer.coordinators[0]
        return (int(coordinator.node_id),) if coordinator.error_code.value == 0 else None

    found: tuple[int] = wait_for(find, 30, f"the coordinator of {tid}", interval=0.2)
    return found[0]


def stable_everywhere(bootstrap: str) -> bool:
    """The last stable offset equals the high watermark on every partition."""
    admin = admin_client(bootstrap)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    ends = {}
    for isolation in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        futures = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in tps}, isolation_level=isolation, request_timeout=10
        )
        ends[isolation] = {tp.partition: f.result(15).offset for tp, f in futures.items()}
    return ends[IsolationLevel.READ_UNCOMMITTED] == ends[IsolationLevel.READ_COMMITTED]


def read_committed(bootstrap: str) -> list[str]:
    admin = admin_client(bootstrap)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=10)
    ends = {tp.partition: f.result(15).offset for tp, f in futures.items()}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-failover-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            assert msg.error() is None, msg.error()
            values.append((msg.value() or b"").decode())
        positions = consumer.position([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        if all(tp.offset >= ends[tp.partition] for tp in positions):
            break
    else:
        pytest.fail(f"read_committed did not reach the end offsets {ends}")
    consumer.close()
    return values


def test_a_coordinator_kill_leaves_no_transaction_half_done(cluster: SluiceCluster) -> None:
    create_topic(cluster.bootstrap, TOPIC, partitions=PARTITIONS, replication=3)
    stop = threading.Event()
    workers = [Worker(cluster.bootstrap, f"txn-{i}", stop) for i in range(PRODUCERS)]
    for worker in workers:
        worker.start()
    try:
        time.sleep(RUN_BEFORE_KILL_S)
        victim = coordinator_of(cluster, workers[0].tid)
        cluster.kill(victim)
        before = sum(len(w.outcomes) for w in workers)
        moved_to = coordinator_of(cluster, workers[0].tid)
        print(f"killed broker {victim}, the coordinator of {workers[0].tid}; now {moved_to}")
        time.sleep(DOWN_S)
        assert sum(len(w.outcomes) for w in workers) > before, "no transaction while it was down"
        cluster.start(victim)
        time.sleep(RUN_AFTER_RESTART_S)
    finally:
        stop.set()
        for worker in workers:
            worker.join(120)
    assert not any(w.is_alive() for w in workers), "a producer thread hung"
    wait_for(lambda: stable_everywhere(cluster.bootstrap), 60, "every transaction to end")
    values = read_committed(cluster.bootstrap)
    counts = Counter(values)
    assert not [v for v, c in counts.items() if c > 1], "records read twice"
    by_txn = Counter(v.rsplit(":", 1)[0] for v in values)
    half = {txn: c for txn, c in by_txn.items() if c != PARTITIONS}
    assert not half, f"transactions visible on only some partitions: {half}"
    tally: Counter[str] = Counter()
    for worker in workers:
        for n, outcome in worker.outcomes.items():
            seen = f"{worker.tid}:{n}" in by_txn
            tally[outcome] += 1
            tally["unknown and visible"] += outcome == "unknown" and seen
            if outcome == "committed":
                assert seen, f"{worker.tid}:{n} was committed and is missing"
            elif outcome == "aborted":
                assert not seen, f"{worker.tid}:{n} was aborted and is visible"
    errors = sum(len(w.errors) for w in workers)
    print(f"transactions: {dict(tally)}; producer errors: {errors}")
    committed = tally["committed"]
    assert committed > PRODUCERS, "too few transactions committed to mean anything"


def test_a_new_coordinator_finishes_a_decided_commit(cluster: SluiceCluster) -> None:
    """The commit is decided (EndTxn answered) while one partition's only replica is down,
    so its marker cannot be written; then the coordinator itself is killed. The broker
    that takes over its ``__transaction_state`` partition must finish the commit: once
    everything is back, both records are visible to read_committed."""
    tid = "decided-commit"
    init = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    init.init_transactions(60)
    coordinator = coordinator_of(cluster, tid)
    held, other = [i for i in range(cluster.size) if i != coordinator]
    topic = "decided-commit"
    admin = admin_client(cluster.bootstrap)
    admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=2,
                replication_factor=-1,
                replica_assignment=[[held], [other]],
                config={"min.insync.replicas": "1"},
            )
        ]
    )[topic].result(30)
    wait_for(lambda: all(s.leader >= 0 for s in partition_states(admin, topic).values()), 30, topic)
    init.begin_transaction()
    init.produce(topic, b"on-the-held-broker", partition=0)
    init.produce(topic, b"on-the-other-broker", partition=1)
    init.flush(30)
    cluster.kill(held)  # partition 0 has no leader now: its marker must wait
    init.commit_transaction(60)  # answered once PREPARE_COMMIT is in __transaction_state
    cluster.kill(coordinator)
    cluster.start(held)
    cluster.start(coordinator)
    wait_for(lambda: stable_partitions(cluster.bootstrap, topic), 90, "the markers")
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "decided-reader",
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < deadline:
        for msg in consumer.consume(10, 0.5):
            if msg.error() is None:
                seen.add(msg.value() or b"")
    consumer.close()
    assert seen == {b"on-the-held-broker", b"on-the-other-broker"}


def stable_partitions(bootstrap: str, topic: str) -> bool:
    admin = admin_client(bootstrap)
    tps = [TopicPartition(topic, p) for p in range(2)]
    ends = []
    for isolation in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        futures = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in tps}, isolation_level=isolation, request_timeout=10
        )
        ends.append({tp.partition: f.result(15).offset for tp, f in futures.items()})
    return ends[0] == ends[1] and all(v >= 2 for v in ends[0].values())
