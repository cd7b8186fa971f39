"""Replication rules on a 3-broker Sluice cluster, as Kafka states them.

- acks=all with fewer in-sync replicas than ``min.insync.replicas`` is refused with
  NOT_ENOUGH_REPLICAS (nothing written), while acks=1 still works;
- a write or read sent to a follower gets NOT_LEADER_OR_FOLLOWER;
- when the last in-sync replica dies the partition goes offline (no unclean election) and
  comes back with that replica, losing nothing acknowledged;
- a returning preferred replica gets its leadership back.

One cluster serves the module; each test uses its own topic.
"""

from __future__ import annotations

import datetime
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v16.request import FetchPartition, FetchTopic
from kio.schema.fetch.v16.request import FetchRequest as FetchV16
from kio.schema.produce.v10.request import ProduceRequest as ProduceV10

from tests.conftest import unique
from tests.support.cluster_workload import (
    admin_client,
    create_topic,
    leader_of,
    partition_states,
    wait_for,
    wait_in_isr,
    wait_out_of_isr,
)
from tests.support.raw_client import RawClient
from tests.support.records import (
    fetch_request,
    metadata_request,
    partition_response,
    produce_request,
)
from tests.support.sluice_cluster import SluiceCluster
from wire.record_batch import encode_batch


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SluiceCluster]:
    workdir: Path = tmp_path_factory.mktemp("rules")
    sluice = SluiceCluster(workdir, brokers=3)
    sluice.start()
    try:
        yield sluice
    finally:
        sluice.stop()


def produce_to(cluster: SluiceCluster, node: int, topic: str, acks: int) -> ErrorCode:
    """One record to broker ``node``; its error code. Brokers replay the metadata log on
    their own, so a broker may learn of a new topic a moment after another did: until then
    it answers UNKNOWN_TOPIC_OR_PARTITION (as Kafka's do), which is retried here."""
    batch = encode_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))

    def send() -> ErrorCode:
        with RawClient(cluster.broker(node).bootstrap) as client:
            client.send(produce_request(topic, batch, acks=acks, timeout_ms=5000))
            _, response = client.receive(type(produce_request(topic, batch)))
        return ErrorCode(partition_response(response).error_code)

    deadline = time.monotonic() + 10
    while (code := send()) == ErrorCode.unknown_topic_or_partition:
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return code


def produce_until(
    cluster: SluiceCluster, node: int, topic: str, acks: int, expected: ErrorCode
) -> ErrorCode:
    """``produce_to`` until it answers ``expected`` (or 15 s pass); the last answer. Each
    broker applies the metadata log on its own, so the ISR a Metadata request showed may
    reach the leader a moment later: a Kafka leader has the same window."""
    deadline = time.monotonic() + 15
    while (code := produce_to(cluster, node, topic, acks)) != expected:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return code


def ensure_running(cluster: SluiceCluster) -> None:
    for i in range(3):
        if not cluster.alive(i):
            cluster.start(i)


def test_min_insync_replicas_refuses_acks_all(cluster: SluiceCluster) -> None:
    topic = unique("minisr")
    states = create_topic(
        cluster.bootstrap,
        topic,
        partitions=1,
        replication=3,
        config={"min.insync.replicas": "3"},
    )
    leader = states[0].leader
    assert produce_to(cluster, leader, topic, -1) == ErrorCode.none
    follower = next(b for b in states[0].replicas if b != leader)
    admin = admin_client(cluster.bootstrap)
    cluster.kill(follower)
    try:
        wait_out_of_isr(admin, topic, 0, follower, 30)
        refused = produce_until(cluster, leader, topic, -1, ErrorCode.not_enough_replicas)
        assert refused == ErrorCode.not_enough_replicas
        assert produce_to(cluster, leader, topic, 1) == ErrorCode.none
    finally:
        cluster.start(follower)
    wait_in_isr(admin, topic, follower, 60)
    assert produce_until(cluster, leader, topic, -1, ErrorCode.none) == ErrorCode.none


def test_followers_answer_not_leader(cluster: SluiceCluster) -> None:
    ensure_running(cluster)
    topic = unique("follower")
    states = create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
    follower = next(b for b in states[0].replicas if b != states[0].leader)
    # brokers replay the metadata log on their own: the follower may learn of the topic a
    # moment after the leader did (UNKNOWN_TOPIC_OR_PARTITION until then, as in Kafka)
    code = wait_for(
        lambda: (
            (c := produce_to(cluster, follower, topic, 1)) != ErrorCode.unknown_topic_or_partition
            and c
        ),
        10,
        "the follower to know the topic",
    )
    assert code == ErrorCode.not_leader_or_follower
    with RawClient(cluster.broker(follower).bootstrap) as client:
        client.send(fetch_request(topic, 0))
        _, response = client.receive(type(fetch_request(topic, 0)))
    assert partition_response(response).error_code == ErrorCode.not_leader_or_follower


def fetch_v16(topic_id: uuid.UUID) -> FetchV16:
    return FetchV16(
        max_wait=datetime.timedelta(0),  # type: ignore[arg-type]
        min_bytes=1,  # type: ignore[arg-type]
        max_bytes=1 << 20,  # type: ignore[arg-type]
        isolation_level=0,  # type: ignore[arg-type]
        session_id=0,  # type: ignore[arg-type]
        session_epoch=-1,  # type: ignore[arg-type]
        topics=(
            FetchTopic(
                topic_id=topic_id,
                partitions=(
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),  # type: ignore[arg-type]
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_a_follower_names_the_leader_to_go_to(cluster: SluiceCluster) -> None:
    """KIP-951: NOT_LEADER_OR_FOLLOWER from Produce v10+ and Fetch v16+ carries the leader
    (id and epoch) and its endpoint, so a client goes there without a Metadata request;
    older versions have no such fields."""
    ensure_running(cluster)
    topic = unique("hint")
    states = create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
    leader = states[0].leader
    follower = next(b for b in states[0].replicas if b != leader)
    wait_for(
        lambda: produce_to(cluster, follower, topic, 1) == ErrorCode.not_leader_or_follower,
        10,
        "the follower to know the topic",
    )
    host, port = cluster.broker(leader).bootstrap.rsplit(":", 1)
    batch = encode_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
    with RawClient(cluster.broker(follower).bootstrap) as client:
        client.send(metadata_request(topic))
        _, meta = client.receive(type(metadata_request(topic)))
        epoch = meta.topics[0].partitions[0].leader_epoch
        answers = []
        for request in (
            produce_request(topic, batch, acks=1, version=10),
            fetch_v16(meta.topics[0].topic_id),
            produce_request(topic, batch, acks=1),  # v9: before KIP-951
        ):
            client.send(request)
            answers.append(client.receive(type(request))[1])
    for response in answers[:2]:
        part = partition_response(response)
        assert part.error_code == ErrorCode.not_leader_or_follower
        hint = part.current_leader
        assert (hint.leader_id, hint.leader_epoch) == (leader, epoch)
        endpoints = [(n.node_id, n.host, n.port) for n in response.node_endpoints]
        assert endpoints == [(leader, host, int(port))]
    older = partition_response(answers[2])
    assert older.error_code == ErrorCode.not_leader_or_follower
    assert not hasattr(older, "current_leader")


def test_a_stopping_leader_answers_a_waiting_write_with_the_new_leader(tmp_path: Path) -> None:
    """The controlled shutdown comes before the listener closes (Kafka's order), and the
    requests already read are answered: an acks=all write waiting on a stopping leader gets
    NOT_LEADER_OR_FOLLOWER naming the new leader (KIP-951), not a closed connection. A
    follower (not the controller) is held with SIGSTOP so that the write waits; sessions
    and replica lag are long enough that nothing else moves meanwhile."""
    slow = {"broker.session.timeout.ms": "60000", "replica.lag.time.max.ms": "60000"}
    with SluiceCluster(tmp_path, brokers=3, settings=slow) as cluster:
        topic = unique("stopping")
        states = create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
        leader = states[0].leader
        followers = [b for b in states[0].replicas if b != leader]
        wait_for(
            lambda: produce_to(cluster, leader, topic, -1) == ErrorCode.none, 30, "a first write"
        )
        batch = encode_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
        with RawClient(cluster.broker(leader).bootstrap, timeout=60) as client:
            client.send(metadata_request(topic))
            controller = client.receive(type(metadata_request(topic)))[1].controller_id
            held = cluster.broker(next(b for b in followers if b != controller)).proc
            assert held is not None
            held.send_signal(signal.SIGSTOP)
            try:
                client.send(produce_request(topic, batch, acks=-1, timeout_ms=60_000, version=10))
                stopping = cluster.broker(leader).proc
                assert stopping is not None
                stopping.send_signal(signal.SIGTERM)
                _, response = client.receive(ProduceV10)
            finally:
                held.send_signal(signal.SIGCONT)
    part = partition_response(response)
    assert part.error_code == ErrorCode.not_leader_or_follower
    assert part.current_leader.leader_id in followers


def test_last_isr_member_down_takes_the_partition_offline(cluster: SluiceCluster) -> None:
    ensure_running(cluster)
    topic = unique("offline")
    states = create_topic(cluster.bootstrap, topic, partitions=1, replication=2)
    leader, other = states[0].leader, next(b for b in states[0].replicas if b != states[0].leader)
    admin = admin_client(cluster.bootstrap)
    assert produce_to(cluster, leader, topic, -1) == ErrorCode.none
    cluster.kill(other)
    wait_out_of_isr(admin, topic, 0, other, 30)
    assert produce_to(cluster, leader, topic, -1) == ErrorCode.none  # written by the leader only
    cluster.kill(leader)
    try:
        # every broker is a voter: the quorum needs ``other`` back to fence the leader.
        # The only in-sync replica is dead: no leader, and ``other``, alive but out of
        # sync, is not elected (unclean.leader.election.enable=false)
        cluster.start(other, wait=False)  # the cluster lacks the leader: do not wait for it
        wait_for(lambda: partition_states(admin, topic)[0].leader == -1, 30, "no leader")
        time.sleep(1)
        assert partition_states(admin, topic)[0].leader == -1
    finally:
        cluster.start(leader)
    assert leader_of(admin, topic, 0, 60) == leader
    wait_in_isr(admin, topic, other, 60)
    with RawClient(cluster.broker(leader).bootstrap) as client:
        client.send(fetch_request(topic, 0))
        _, response = client.receive(type(fetch_request(topic, 0)))
    assert partition_response(response).high_watermark == 2


def test_preferred_leader_is_restored(cluster: SluiceCluster) -> None:
    ensure_running(cluster)
    topic = unique("preferred")
    states = create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
    preferred = states[0].replicas[0]
    assert states[0].leader == preferred
    admin = admin_client(cluster.bootstrap)
    cluster.kill(preferred)
    try:
        wait_for(
            lambda: partition_states(admin, topic)[0].leader not in (-1, preferred),
            30,
            "another leader",
        )
    finally:
        cluster.start(preferred)
    # back in the ISR, then leader again (leader.imbalance.check.interval.seconds=5)
    wait_for(lambda: partition_states(admin, topic)[0].leader == preferred, 60, "preferred leader")


def test_a_restarted_leader_hands_over_before_its_session_expires(tmp_path: Path) -> None:
    """A broker process that dies and comes back (a supervisor restarts it in well under a
    session) registers a new incarnation: the controller fences the old one at once, so its
    partitions get another leader (clients move to a broker they are connected to) instead of
    waiting for the restarted process, and it rejoins as a follower."""
    slow_sessions = {
        "broker.session.timeout.ms": "120000",
        # the preferred-leader check would give the partition back to the restarted broker
        # once it is in the ISR, racing the produce and fetch below (a clean-clone run
        # lost that race: NOT_LEADER_OR_FOLLOWER from the leader found earlier)
        "auto.leader.rebalance.enable": "false",
    }
    with SluiceCluster(tmp_path, brokers=3, settings=slow_sessions) as cluster:
        topic = unique("restarted")
        states = create_topic(cluster.bootstrap, topic, partitions=1, replication=3)
        leader = states[0].leader
        admin = admin_client(cluster.bootstrap)
        assert produce_to(cluster, leader, topic, -1) == ErrorCode.none
        cluster.kill(leader)
        cluster.start(leader)
        (new_leader,) = wait_for(
            lambda: (now := partition_states(admin, topic)[0].leader) not in (-1, leader) and [now],
            30,
            "another leader, long before the 120 s session expires",
        )
        wait_in_isr(admin, topic, leader, 60)
        assert produce_until(cluster, new_leader, topic, -1, ErrorCode.none) == ErrorCode.none
        with RawClient(cluster.broker(new_leader).bootstrap) as client:
            client.send(fetch_request(topic, 0))
            _, response = client.receive(type(fetch_request(topic, 0)))
        assert partition_response(response).high_watermark == 2
