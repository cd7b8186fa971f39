"""Apache Kafka Connect 4.3 (distributed mode, from Maven Central) against a 3-broker Sluice
cluster: the worker creates its compacted config, offset and status topics, FileStream
connectors configured through the REST API move a file through a topic and back, and a
worker killed with -9 hands its connectors and tasks to the other worker without losing a
line (FileStream is at least once: duplicates are counted and reported, not failed on).

One cluster and two workers per module (a JVM starts in seconds; the tests make their own
connectors, files and topics).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.controlplane.harness import wait_until
from tests.support.connect import ConnectWorker, connect_available
from tests.support.sluice_cluster import SluiceCluster

GROUP = "connect-sluice"
FAILOVER = {
    # the worker group notices a dead worker within 6 s and reassigns its connectors at once
    # (Kafka's default waits up to 5 minutes for it to come back)
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": "2000",
    # a sink task's consumer group notices its dead member within 6 s, too (default 45 s)
    "consumer.session.timeout.ms": "6000",
    "consumer.heartbeat.interval.ms": "1000",
    "offset.flush.interval.ms": "1000",
    "config.storage.replication.factor": "3",
    "offset.storage.replication.factor": "3",
    "status.storage.replication.factor": "3",
}
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@dataclass
class Connect:
    cluster: SluiceCluster
    workers: list[ConnectWorker]
    root: dict[str, object]

    def live(self) -> ConnectWorker:
        return next(w for w in self.workers if w.alive())


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connect]:
    reason = connect_available()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("connect")
    with SluiceCluster(workdir / "cluster", brokers=3) as cluster:
        workers = [
            ConnectWorker(workdir / f"worker{i}", cluster.bootstrap, GROUP, FAILOVER)
            for i in range(2)
        ]
        try:
            for worker in workers:
                worker.start()
            root = workers[0].wait_ready()
            workers[1].wait_ready()
            yield Connect(cluster, workers, root)
        finally:
            for worker in workers:
                worker.stop()


def lines(count: int, start: int = 0) -> list[str]:
    return [f"line-{i:06d} {'x' * (i % 50)}" for i in range(start, start + count)]


def read_lines(path: Path) -> list[str]:
    """The complete lines of ``path`` (a last line still being written is left out)."""
    try:
        return path.read_text().split("\n")[:-1]
    except FileNotFoundError:
        return []


def first_occurrences(found: list[str]) -> list[str]:
    """The lines in order with repeats dropped (what an at-least-once pipeline delivered)."""
    seen: set[str] = set()
    out = []
    for line in found:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out


def start_pipeline(worker: ConnectWorker, name: str, source: Path, sink: Path) -> None:
    """A FileStream source reading ``source`` into topic ``name`` (created by Connect with 3
    replicas: the brokers do not auto-create topics) and a sink writing it to ``sink``."""
    worker.put_connector(
        f"{name}-source",
        {
            "connector.class": SOURCE,
            "file": str(source),
            "topic": name,
            "tasks.max": "1",
            "topic.creation.default.replication.factor": "3",
            "topic.creation.default.partitions": "1",
        },
    )
    worker.put_connector(
        f"{name}-sink",
        {"connector.class": SINK, "file": str(sink), "topics": name, "tasks.max": "1"},
    )


def committed(worker: ConnectWorker, connector: str, field: str) -> int:
    """A connector's committed offset (GET /connectors/NAME/offsets): a source's ``position``
    in its file, a sink's ``kafka_offset`` (its consumer group's); -1 while none."""
    found = worker.rest("GET", f"/connectors/{connector}/offsets")["offsets"]
    return int(found[0]["offset"][field]) if found else -1


def topic_records(bootstrap: str, topic: str) -> int:
    """Records in a one-partition topic (its end offset: nothing is deleted or compacted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-test-watermarks"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def running_on(worker: ConnectWorker, connector: str) -> set[str] | None:
    """The workers running ``connector`` and its tasks, once all of them run."""
    status = worker.status(connector)
    states = [status["connector"], *status["tasks"]]
    if status["tasks"] and all(s["state"] == "RUNNING" for s in states):
        return {str(s["worker_id"]) for s in states}
    return None


def test_the_worker_makes_its_compacted_topics(connect: Connect) -> None:
    admin = AdminClient({"bootstrap.servers": connect.cluster.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    expected = {f"{GROUP}-configs": 1, f"{GROUP}-offsets": 25, f"{GROUP}-status": 5}
    for name, partitions in expected.items():
        assert name in topics, f"{name} was not created: {sorted(topics)}"
        assert len(topics[name].partitions) == partitions
        assert all(len(p.replicas) == 3 for p in topics[name].partitions.values())
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        config = admin.describe_configs([resource])[resource].result(timeout=10)
        assert config["cleanup.policy"].value == "compact", name
    assert connect.root["version"] == "4.3.1"
    assert connect.root["kafka_cluster_id"] == connect.cluster.cluster_id


def test_a_file_goes_through_a_topic_and_back(connect: Connect, tmp_path: Path) -> None:
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    written = lines(2_000)
    source.write_text("\n".join(written) + "\n")
    worker = connect.live()
    start_pipeline(worker, "file-roundtrip", source, sink)
    wait_until(lambda: len(read_lines(sink)) >= len(written), 90, f"{sink} to fill")
    assert read_lines(sink) == written
    for name in ("file-roundtrip-source", "file-roundtrip-sink"):
        assert running_on(worker, name), worker.status(name)
    listed = worker.rest("GET", "/connectors")
    assert {"file-roundtrip-source", "file-roundtrip-sink"} <= set(listed)
    # committed every offset.flush.interval.ms, through the compacted offsets topic
    wait_until(
        lambda: committed(worker, "file-roundtrip-source", "position") == source.stat().st_size,
        30,
        "the source's offset",
    )


def test_a_killed_worker_hands_its_tasks_over_and_no_line_is_lost(
    connect: Connect, tmp_path: Path
) -> None:
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    written = lines(1_000)
    source.write_text("\n".join(written) + "\n")
    start_pipeline(connect.live(), "failover", source, sink)
    wait_until(lambda: len(read_lines(sink)) >= len(written), 90, "the first 1,000 lines")
    names = ("failover-source", "failover-sink")
    placed = wait_until(
        lambda: set().union(*[running_on(connect.live(), n) or {""} for n in names]) - {""},
        60,
        "the pipeline's tasks to run",
    )
    before = len(read_lines(sink)) - len(written)  # a task moved by the rebalance repeats
    # both sides' positions committed (source: the file position, in the offsets topic;
    # sink: its consumer group's offset): a new task must resume from them
    wait_until(
        lambda: (
            committed(connect.live(), "failover-source", "position") == source.stat().st_size
            and committed(connect.live(), "failover-sink", "kafka_offset") == len(written)
        ),
        30,
        "the pipeline's offsets to be committed",
    )
    victim = next(w for w in connect.workers if w.worker_id in placed)
    survivor = next(w for w in connect.workers if w is not victim)
    victim.kill()  # kill -9: no goodbye to the group
    more = lines(1_000, start=1_000)
    with source.open("a") as out:
        out.write("\n".join(more) + "\n")

    def moved() -> bool:
        return all(running_on(survivor, n) == {survivor.worker_id} for n in names)

    wait_until(moved, 90, f"every task to run on {survivor.worker_id}")
    everything = written + more
    wait_until(
        lambda: set(read_lines(sink)) >= set(everything), 120, "every line in the output file"
    )
    found = read_lines(sink)
    assert first_occurrences(found) == everything, "a line was lost or reordered"
    again = [line for line in found[len(written) + before :] if line in set(written)]
    assert not again, f"{len(again)} line(s) committed before the kill came again"
    in_topic = topic_records(connect.cluster.bootstrap, "failover")
    print(
        f"\nFileStream pipeline, worker {victim.worker_id} killed -9: {len(found)} lines out for "
        f"{len(everything)} in: {len(found) - len(everything)} duplicate(s) ({before} before the "
        f"kill), {in_topic - len(everything)} of them written twice by the source "
        f"({in_topic} records in the topic); at least once, as Kafka Connect's FileStream is"
    )
    worker_log = victim.log_path.read_text() + survivor.log_path.read_text()
    assert "UnsupportedVersionException" not in worker_log
