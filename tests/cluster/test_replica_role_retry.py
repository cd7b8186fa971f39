"""A replica role that could not be taken is retried until it is (found by the soak).

A follower whose disk was full when the metadata made it a replica of a partition logged
"cannot take the replica role" and then waited for that partition's next metadata change:
it never fetched, the ISR stayed one short, and an acks=all producer with
min.insync.replicas=2 had nowhere to write. The role is now retried every second. Here the
cause is a file lying where the follower's partition directory goes, removed once the
failure shows in its log; then, with no metadata change, the follower must join the ISR
and acks=all produce must succeed."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.support.cluster_workload import admin_client, partition_states, wait_for
from tests.support.sluice_cluster import SluiceCluster

TOPIC = "role-retry"


def test_a_follower_that_could_not_open_its_log_joins_the_isr_once_it_can(
    tmp_path: Path,
) -> None:
    settings = {"replica.lag.time.max.ms": "2000", "min.insync.replicas": "2"}
    with SluiceCluster(tmp_path, brokers=2, settings=settings) as cluster:
        blocker = cluster.log_dir(1) / f"{TOPIC}-0"
        blocker.write_text("not a directory\n")
        admin = admin_client(cluster.bootstrap)
        admin.create_topics(
            [NewTopic(TOPIC, num_partitions=1, replication_factor=-1, replica_assignment=[[0, 1]])]
        )[TOPIC].result(30)
        wait_for(
            lambda: "cannot take the replica role" in cluster.broker(1).logs() or None,
            30,
            "the follower's failure to open its log",
        )
        wait_for(
            lambda: partition_states(admin, TOPIC)[0].isr == (0,) or None,
            30,
            "the ISR to shrink to the leader",
        )
        blocker.unlink()
        wait_for(
            lambda: sorted(partition_states(admin, TOPIC)[0].isr) == [0, 1] or None,
            30,
            "the follower to take its role on a retry and join the ISR",
        )
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        errors: list[object] = []
        producer.produce(TOPIC, b"durable", on_delivery=lambda err, _msg: errors.append(err))
        assert producer.flush(30) == 0
        assert errors == [None]
        assert "replica role taken on a retry" in cluster.broker(1).logs()
