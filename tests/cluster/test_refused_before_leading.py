"""A write refused NOT_LEADER_OR_FOLLOWER by a replica that then becomes the leader: the
batches behind it are refused alike until it comes again, not answered
OUT_OF_ORDER_SEQUENCE (found by the rolling-restart test: two records duplicated).

During a planned restart the old leader answers its waiting writes NOT_LEADER_OR_FOLLOWER
naming the new leader (KIP-951), and librdkafka sends its retries there at once, often
before the new leader has applied its leadership: the first retries are refused, and a
later one that arrives once it leads was a sequence gap. librdkafka answers a gap behind
its first batch in flight by bumping its producer epoch and re-sending what it has in
flight under new sequence numbers, duplicating the batches that had been written.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from kio.schema.errors import ErrorCode

from tests.support.cluster_workload import admin_client, create_topic, leader_of, wait_for
from tests.support.raw_client import RawClient
from tests.support.records import fetch_request, partition_response, produce_request
from tests.support.sluice_cluster import SluiceCluster
from wire.record_batch import encode_batch, iter_headers

TOPIC = "refused-then-led"
PID = 4711


def batch(sequence: int) -> bytes:
    return encode_batch(
        [(b"k", b"record %d" % sequence)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=sequence,
        timestamp_ms=int(time.time() * 1000),  # an old one would be past retention
    )


def produce(cluster: SluiceCluster, broker: int, sequence: int) -> ErrorCode:
    with RawClient(cluster.broker(broker).bootstrap) as client:
        answer = partition_response(client.request(produce_request(TOPIC, batch(sequence))))
    return ErrorCode(answer.error_code)


def test_a_gap_behind_a_write_refused_before_leading_is_refused_alike(tmp_path: Path) -> None:
    with SluiceCluster(tmp_path, brokers=3) as cluster:
        create_topic(cluster.bootstrap, TOPIC, partitions=1, replication=3)
        leader = leader_of(admin_client(cluster.bootstrap), TOPIC, 0)
        followers = [b for b in range(3) if b != leader]

        # acks=all: every replica has it (retried while the leader's metadata catches up)
        def first() -> tuple[ErrorCode] | None:  # a tuple: ErrorCode.none is falsy
            code = produce(cluster, leader, 0)
            return None if code == ErrorCode.unknown_topic_or_partition else (code,)

        assert wait_for(first, 30, "the leader to know the topic") == (ErrorCode.none,)
        for follower in followers:  # the retry of sequence 1, sent on a leader hint too early
            assert produce(cluster, follower, 1) == ErrorCode.not_leader_or_follower

        cluster.stop(leader)  # a planned restart: the controlled shutdown moves the leadership
        admin = admin_client(",".join(cluster.broker(b).bootstrap for b in followers))

        def moved() -> tuple[int] | None:  # a tuple: broker 0 is falsy
            now = leader_of(admin, TOPIC, 0)
            return (now,) if now in followers else None

        (new,) = wait_for(moved, 60, "the leadership to move to a follower")
        # sequence 2 arrives before sequence 1 is retried: refused alike, retriable
        assert produce(cluster, new, 2) == ErrorCode.not_leader_or_follower
        assert produce(cluster, new, 1) == ErrorCode.none
        assert produce(cluster, new, 2) == ErrorCode.none
        assert produce(cluster, new, 0) == ErrorCode.none  # a retry of a written batch

        def stored() -> list[int]:
            with RawClient(cluster.broker(new).bootstrap) as client:
                records = partition_response(client.request(fetch_request(TOPIC, 0))).records
            return [h.base_sequence for h in iter_headers(records or b"")]

        sequences = wait_for(lambda: len(stored()) >= 3 and stored(), 30, "three batches")
        assert sequences == [0, 1, 2], "each batch once, in order"
        # each broker's start-up line splits its registration in two (the soak's table
        # reads it): the controller's answer, then the replay of it here
        for i in range(3):
            text = cluster.broker(i).log_path.read_text(errors="replace")
            started = re.findall(r"broker \d+ started: .*", text)
            assert started, cluster.logs(i)
            assert all(
                re.search(r", registration answered [\d.]+ s, registration replayed [\d.]+ s, ", s)
                for s in started
            ), started
