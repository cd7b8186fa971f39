"""A consumer group's coordinator killed mid-session moves; committed offsets survive.

Parametrized over a 3-node Apache Kafka KRaft cluster (the oracle) and a 3-broker Sluice
cluster. A topic of 3 partitions, RF=3, holds ``RECORDS`` records written with acks=all. Two
confluent-kafka consumers of one group, in threads (enable.auto.commit=false), read them at
a bounded pace and commit synchronously every ``COMMIT_EVERY`` records (and whatever is left
when they run dry). Once about half is committed, the group's coordinator (from
DescribeGroups: the leader of the group's ``__consumer_offsets`` partition) is SIGKILLed
while they go on reading: they must find the new coordinator and commit again; the dead
node is restarted after that. Once every record has been read and the committed offsets
equal the end offsets, the consumers close; ListConsumerGroupOffsets must return the end
offsets, and a new member of the group must receive nothing until one more record is
written to each partition, then exactly those. Every record must have been received at
least once; duplicates (redeliveries after rebalances or failed commits) are counted and
printed, not asserted on. The time from the kill to the first successful commit started
after it is printed; nothing asserts on timing.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.cluster_workload import (
    Cluster,
    admin_client,
    create_topic,
    end_offsets,
    wait_for,
)
from tests.support.kafka_cluster import KafkaCluster
from tests.support.kafka_oracle import oracle_available
from tests.support.sluice_cluster import SluiceCluster

RECORDS = 3000
PARTITIONS = 3
REPLICATION = 3
MEMBERS = 2
COMMIT_EVERY = 100
PACE = 0.004  # seconds per record and member: a few seconds of reading after the kill
RETRY_COMMIT_AFTER = 0.25  # seconds between commit attempts after a failed one
TOPIC = "coordinator-failover"
GROUP = "coordinator-failover-group"


@contextmanager
def running_cluster(kind: str, workdir: Path) -> Iterator[Cluster]:
    cluster: KafkaCluster | SluiceCluster
    if kind == "kafka":
        reason = oracle_available()
        if reason:
            pytest.skip(f"Apache Kafka oracle cannot run here: {reason}")
        cluster = KafkaCluster(workdir / "kafka", brokers=3)
    else:
        cluster = SluiceCluster(workdir / "sluice", brokers=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def all_logs(cluster: Cluster) -> str:
    return "\n".join(f"--- node {i}:\n{cluster.logs(i, 40)}" for i in range(cluster.size))


def consumer_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": GROUP,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 1_000,
        "fetch.wait.max.ms": 100,
        "log_level": 0,
    }


@dataclass(frozen=True)
class Commit:
    started: float
    finished: float
    error: str | None  # None: every partition committed


class Member(threading.Thread):
    """One consumer of the group in a thread: reads at ``PACE`` s per record, commits
    synchronously every ``COMMIT_EVERY`` records and when a poll comes back empty with
    uncommitted records; a failed commit is retried (at most every ``RETRY_COMMIT_AFTER``
    s) until one succeeds. Records what it received and every commit attempt."""

    def __init__(self, name: str, bootstrap: str) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.lock = threading.Lock()
        self.received: list[tuple[float, int, int, int]] = []  # (when, partition, offset, value)
        self.commits: list[Commit] = []
        self.errors: list[str] = []  # consumer errors from poll (not fatal by themselves)
        self.run_error: BaseException | None = None
        self.closed = threading.Event()
        self._quit = threading.Event()

    def stop(self, timeout: float = 60) -> None:
        self._quit.set()
        if self.ident is not None:  # started
            self.join(timeout)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.run_error = exc
        finally:
            self.closed.set()

    def _run(self) -> None:
        consumer = Consumer(consumer_config(self.bootstrap))
        try:
            consumer.subscribe([TOPIC])
            pending = 0
            next_try = 0.0
            while not self._quit.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is not None:
                    with self.lock:
                        self.errors.append(str(message.error()))
                    continue
                if message is not None:
                    partition, offset = message.partition(), message.offset()
                    assert partition is not None
                    assert offset is not None
                    value = int(message.value() or b"")
                    with self.lock:
                        self.received.append((time.monotonic(), partition, offset, value))
                    pending += 1
                    time.sleep(PACE)
                due = pending >= COMMIT_EVERY or (message is None and pending > 0)
                if due and time.monotonic() >= next_try:
                    if self._commit(consumer):
                        pending = 0
                    else:
                        next_try = time.monotonic() + RETRY_COMMIT_AFTER
        finally:
            consumer.close()

    def _commit(self, consumer: Any) -> bool:
        """A synchronous commit of the current positions; True when it holds (committed, or
        nothing new to commit)."""
        started = time.monotonic()
        error: str | None = None
        try:
            committed = consumer.commit(asynchronous=False)
            failed = [tp for tp in committed or [] if tp.error is not None]
            if failed:
                error = "; ".join(f"{tp.partition}: {tp.error}" for tp in failed)
        except Exception as exc:
            if "NO_OFFSET" in str(exc):  # positions already committed (e.g. after a rebalance)
                return True
            error = str(exc)
        with self.lock:
            self.commits.append(Commit(started, time.monotonic(), error))
        return error is None

    def snapshot(self) -> tuple[list[tuple[float, int, int, int]], list[Commit]]:
        with self.lock:
            return list(self.received), list(self.commits)


def coordinator_of(admin: Any) -> int:
    (future,) = admin.describe_consumer_groups([GROUP], request_timeout=10).values()
    return int(future.result(timeout=15).coordinator.id)


def committed_by(observer: Any) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch through ``observer``, a consumer with the
    group's id that never joins it; -1001: none), refreshed from the coordinator."""
    tps = observer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    for tp in tps:
        if tp.error is not None:
            raise RuntimeError(f"committed offset of partition {tp.partition}: {tp.error}")
    return {tp.partition: int(tp.offset) for tp in tps}


# ListConsumerGroupOffsets runs in a child process: librdkafka's AdminClient dereferences a
# null consumer-group handle when an OffsetFetch answer carries an error that asks for a new
# coordinator lookup (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE), which a broker rightly
# sends while a group's coordinator is created or moves (rd_kafka_handle_OffsetFetch ->
# rd_kafka_cgrp_op(NULL, ...); librdkafka issue #5040, seen with confluent-kafka 2.16.1), and
# the SIGSEGV would take the whole test session down. While the coordinator may move, the
# test reads committed offsets through a consumer instead (``committed_by``).
LIST_OFFSETS = """
import json, sys
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

bootstrap, group, topic, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
(future,) = admin.list_consumer_group_offsets([request], request_timeout=10).values()
out = {}
for tp in future.result(timeout=15).topic_partitions:
    if tp.error is not None:
        sys.exit(f"partition {tp.partition}: {tp.error}")
    out[tp.partition] = tp.offset
print(json.dumps(out))
"""


def list_group_offsets(bootstrap: str) -> dict[int, int]:
    """AdminClient.list_consumer_group_offsets of the group, in a child process."""
    done = subprocess.run(
        [sys.executable, "-c", LIST_OFFSETS, bootstrap, GROUP, TOPIC, str(PARTITIONS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode == -signal.SIGSEGV:
        raise RuntimeError("AdminClient crashed (SIGSEGV: librdkafka issue #5040)")
    if done.returncode != 0:
        raise RuntimeError(f"list_consumer_group_offsets: {done.stderr.strip()[-500:]}")
    return {int(p): int(o) for p, o in json.loads(done.stdout).items()}


def values_received(members: list[Member]) -> list[int]:
    return [value for m in members for _, _, _, value in m.snapshot()[0]]


@pytest.mark.parametrize(
    "kind",
    [
        # Kafka's side takes minutes (a node restarts in 10-20 s here): `make test-long`
        pytest.param("kafka", id="kafka", marks=[pytest.mark.oracle, pytest.mark.long]),
        pytest.param("sluice", id="sluice"),
    ],
)
def test_coordinator_killed_offsets_survive(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    with running_cluster(kind, tmp_path) as cluster:
        try:
            run_scenario(kind, cluster, capsys, started)
        except BaseException as exc:
            exc.add_note(all_logs(cluster))
            raise


def run_scenario(
    kind: str, cluster: Cluster, capsys: pytest.CaptureFixture[str], started: float
) -> None:
    admin = admin_client(cluster.bootstrap)
    create_topic(cluster.bootstrap, TOPIC, partitions=PARTITIONS, replication=REPLICATION)
    # idempotent: the records written after the end are counted exactly, and a retry of a
    # plain producer (a slow answer on a loaded machine) writes a record twice
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "log_level": 0,
        }
    )
    for i in range(RECORDS):
        producer.produce(TOPIC, b"%06d" % i, partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(60) == 0, "records not delivered"
    ends = end_offsets(cluster.bootstrap, TOPIC, PARTITIONS)
    assert sum(ends.values()) == RECORDS, ends

    members = [Member(f"member-{n}", cluster.bootstrap) for n in range(MEMBERS)]
    observer = Consumer(consumer_config(cluster.bootstrap))  # never subscribes
    try:
        for member in members:
            member.start()
        # About half read and committed.
        wait_for(
            lambda: sum(max(0, o) for o in committed_by(observer).values()) >= RECORDS // 2,
            120,
            "half of the records committed",
            interval=0.1,
        )
        victim = coordinator_of(admin)
        killed_at = time.monotonic()
        cluster.kill(victim)
        read_at_kill = len(values_received(members))

        def commit_after_kill() -> Commit | None:
            ok = [
                c
                for m in members
                for c in m.snapshot()[1]
                if c.error is None and c.started >= killed_at
            ]
            return min(ok, key=lambda c: c.finished) if ok else None

        first: Commit = wait_for(commit_after_kill, 120, "a successful commit after the kill")

        def new_coordinator() -> tuple[int] | None:
            node = coordinator_of(admin)  # a tuple: node 0 is a coordinator too
            return (node,) if node not in (victim, -1) else None

        moved_to: int = wait_for(
            new_coordinator,
            60,
            f"the coordinator to move away from node {victim}",
            interval=0.2,
        )[0]
        restarted_at = time.monotonic()
        cluster.start(victim)
        restart_seconds = time.monotonic() - restarted_at

        # Everything read and committed (the members commit what is left when they run dry).
        wait_for(
            lambda: len(set(values_received(members))) == RECORDS,
            180,
            "every record to be received",
            interval=0.2,
        )
        wait_for(
            lambda: committed_by(observer) == ends,
            120,
            f"the committed offsets to reach the end offsets {ends}",
            interval=0.2,
        )
    finally:
        for member in members:
            member.stop()
        observer.close()
    for member in members:
        assert member.closed.is_set(), f"{member.name} did not stop"
        assert member.run_error is None, f"{member.name}: {member.run_error!r}"

    received = values_received(members)
    missing = sorted(set(range(RECORDS)) - set(received))
    duplicates = len(received) - len(set(received))
    read_after_kill = len(received) - read_at_kill
    commits = [c for m in members for c in m.snapshot()[1]]
    failed_commits = [c for c in commits if c.error is not None]
    commits_after = [c for c in commits if c.error is None and c.started >= killed_at]
    poll_errors = [e for m in members for e in m.errors]
    with capsys.disabled():
        print(
            f"\n[{kind}] coordinator node {victim} killed after {read_at_kill} records read; "
            f"first successful commit started after the kill {first.finished - killed_at:.2f} s "
            f"after it (coordinator now node {moved_to}); node {victim} restarted in "
            f"{restart_seconds:.1f} s"
        )
        print(
            f"[{kind}] {len(received)} records received for {RECORDS} ({duplicates} duplicate(s)), "
            f"{read_after_kill} after the kill; {len(commits_after)} successful commit(s) after "
            f"the kill, {len(failed_commits)} failed commit attempt(s)"
            + (f" (first: {failed_commits[0].error})" if failed_commits else "")
            + f", {len(poll_errors)} consumer error(s)"
            + (f" (first: {poll_errors[0]})" if poll_errors else "")
        )
    assert not missing, f"{len(missing)} record(s) never received, e.g. {missing[:10]}"
    assert read_after_kill > 0, "the members read nothing after the kill"

    listed = wait_for(
        lambda: list_group_offsets(cluster.bootstrap), 60, "list_consumer_group_offsets", interval=1
    )
    assert listed == ends, f"list_consumer_group_offsets {listed}, end offsets {ends}"

    # A new member of the group starts at the committed offsets, the end: it gets nothing
    # until one more record per partition is written, then exactly those.
    got = fresh_member_reads(cluster.bootstrap, producer)
    expected = sorted((p, ends[p]) for p in range(PARTITIONS))
    assert got == expected, (
        f"a new member of the group received {len(got)} record(s) (partition, offset), "
        f"{got[:10]}, expected only the records written after the end offsets {expected}"
    )
    with capsys.disabled():
        print(f"[{kind}] test took {time.monotonic() - started:.1f} s")


def fresh_member_reads(bootstrap: str, producer: Any) -> list[tuple[int, int]]:
    """Join the group with a new consumer and wait until it owns every partition; poll two
    more seconds, then write one record to each partition and poll until that many records
    arrived. Every (partition, offset) it received, sorted."""
    consumer = Consumer(consumer_config(bootstrap))
    got: list[tuple[int, int]] = []

    def poll() -> int:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append((message.partition() or 0, message.offset() or 0))
        return len(got)

    try:
        consumer.subscribe([TOPIC])
        wait_for(
            lambda: poll() >= 0 and len(consumer.assignment()) == PARTITIONS,
            60,
            "the new member to be assigned every partition",
        )
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            poll()
        for p in range(PARTITIONS):
            producer.produce(TOPIC, b"%06d" % (RECORDS + p), partition=p)
        assert producer.flush(30) == 0, "records after the end not delivered"
        with contextlib.suppress(TimeoutError):  # reported by the caller's comparison
            wait_for(lambda: poll() >= PARTITIONS, 30, "the records written after the end")
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            poll()
    finally:
        consumer.close()
    return sorted(got)
