"""A committed offset is visible to OffsetFetch only once it is durable (found by the soak).

The group coordinator used to apply a commit to what OffsetFetch answers as soon as it had
written the record, before the ISR had it. An observer then saw an offset that a
coordinator failover lost: the group's committed offsets went backwards. Kafka applies a
commit once its append completes. Here one follower of the offsets partition is frozen
(SIGSTOP) for a few seconds while a commit waits for it; sessions and the replica lag
allowance are longer than that, so the ISR keeps the frozen follower and the commit cannot
be durable: every OffsetFetch meanwhile must show the offset before it. Once the follower
runs again the commit completes and shows. The frozen follower is not the controller: a
new controller gives the one before it only a few heartbeat intervals, then fences it."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.sluice_cluster import SluiceCluster

TOPIC = "visibility"
GROUP = "visibility-group"
FROZEN_S = 3.0  # under the commit's own 5 s wait for the ISR, and the 30 s allowances


def commit(bootstrap: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def wait_for_full_isr(admin: AdminClient) -> None:
    """Until every replica of the offsets partition is in its ISR (a follower joins once it
    has caught up; on a loaded machine that can take a while after the topic is made)."""
    deadline = time.monotonic() + 60
    while True:
        topic = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
        partition = topic.partitions.get(0)
        if partition is not None and sorted(partition.isrs) == [0, 1, 2]:
            return
        assert time.monotonic() < deadline, f"ISR still {partition and partition.isrs}"
        time.sleep(0.2)


def test_offset_fetch_never_shows_a_commit_the_isr_does_not_have(tmp_path: Path) -> None:
    settings = {
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "3",
        "broker.session.timeout.ms": "30000",
        "replica.lag.time.max.ms": "30000",
    }
    with SluiceCluster(tmp_path, brokers=3, settings=settings) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        commit(cluster.bootstrap, 5)
        wait_for_full_isr(admin)  # the frozen follower must be one the commit waits for
        (future,) = admin.describe_consumer_groups([GROUP], request_timeout=10).values()
        coordinator = int(future.result(timeout=15).coordinator.id)
        # not the controller: a new controller gives the one before it only a few heartbeat
        # intervals (it has most likely died), fences it and the ISR shrinks without it
        controller = admin.list_topics(timeout=10).controller_id
        follower = next(b for b in range(3) if b not in (coordinator, controller))
        frozen = cluster.broker(follower).proc
        assert frozen is not None

        observer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
        # it finds the coordinator and connects now: a lookup sent to the frozen broker would
        # wait for an answer until the freeze ends
        (tp,) = observer.committed([TopicPartition(TOPIC, 0)], timeout=30)
        assert tp.offset == 5
        seen_while_pending: list[int] = []
        outcome: list[BaseException | None] = []

        def committing() -> None:
            try:
                commit(cluster.bootstrap, 9)
                outcome.append(None)
            except KafkaException as exc:
                outcome.append(exc)

        frozen.send_signal(signal.SIGSTOP)
        try:
            thread = threading.Thread(target=committing)
            thread.start()
            frozen_until = time.monotonic() + FROZEN_S
            while time.monotonic() < frozen_until:
                (tp,) = observer.committed([TopicPartition(TOPIC, 0)], timeout=30)
                seen_while_pending.append(int(tp.offset))
                time.sleep(0.05)
        finally:
            frozen.send_signal(signal.SIGCONT)
        thread.join(60)
        assert seen_while_pending, "no OffsetFetch answered while the follower was frozen"
        assert set(seen_while_pending) == {5}, seen_while_pending
        if outcome == [None]:  # acknowledged once the follower caught up: visible
            (tp,) = observer.committed([TopicPartition(TOPIC, 0)], timeout=30)
            assert tp.offset == 9
        observer.close()
