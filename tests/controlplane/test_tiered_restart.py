"""Tiered data survives a crash of everything: a cluster made by the control plane tiers a
topic to its bucket on the embedded S3 server; then the control plane, the brokers and the
S3 server are all SIGKILLed (a machine crash, as far as processes go); the control plane
starts again, brings back the S3 server and the brokers, and every record is read from
offset 0, most of it from the object store."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from proto.sluice.v1 import topics_pb2 as tpb
from tests.conftest import unique
from tests.controlplane.harness import (
    kill_everything_under,
    processes_under,
    running_control_plane,
    wait_until,
)

RECORDS = 4000
FAST = {
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
}


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4000, "acks": "all"}
    )
    for i in range(RECORDS):
        producer.produce(topic, key=b"%d" % i, value=b"v" * 200)
        producer.poll(0)
    assert producer.flush(60) == 0


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("r"), "enable.auto.commit": False}
    )
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 90
        while len(got) < RECORDS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    got.append((msg.offset(), msg.key()))
    finally:
        consumer.close()
    return got


def first_local_offset(data_dir: Path, topic: str) -> int:
    return int(sorted((data_dir / f"{topic}-0").glob("*.log"))[0].name.split(".")[0])


def test_everything_killed_then_restarted_keeps_tiered_data(tmp_path: Path) -> None:
    home = tmp_path / "home"
    topic = "history"
    with running_control_plane(home) as plane:
        cluster = plane.create("tiers", brokers=1, **FAST)
        broker = cluster.brokers[0]
        plane.topics.CreateTopic(
            tpb.CreateTopicRequest(
                cluster="tiers",
                name=topic,
                partitions=1,
                replication_factor=1,
                config={
                    "remote.storage.enable": "true",
                    "segment.bytes": "40000",
                    "local.retention.bytes": "80000",
                },
            ),
            metadata=plane.metadata,
            timeout=30,
        )
        bootstrap = f"{broker.host}:{broker.port}"
        produce(bootstrap, topic)
        data_dir = Path(broker.data_dir)
        wait_until(
            lambda: first_local_offset(data_dir, topic) > RECORDS // 2,
            60,
            "most of the topic uploaded and deleted locally",
        )

        plane.kill9()
        killed = kill_everything_under(home)
        assert any("embedded_s3" in cmd for _, cmd in killed), killed
        wait_until(lambda: not processes_under(home), 10, "every process gone")

        plane.start()
        cluster = plane.wait_state("tiers")
        broker = cluster.brokers[0]
        got = read_all(f"{broker.host}:{broker.port}", topic)
        assert [o for o, _ in got] == list(range(RECORDS))
        assert [k for _, k in got] == [b"%d" % i for i in range(RECORDS)]
        assert first_local_offset(Path(broker.data_dir), topic) > RECORDS // 2
