"""Transactions end to end on one broker, with confluent-kafka's transactional API: commit
and abort as read_committed and read_uncommitted consumers see them, a zombie fenced by a
new producer of its transactional id, a transaction aborted by its timeout, offsets sent
to a transaction, DescribeTransactions / ListTransactions, and a kill -9 of the broker
with a transaction open (it ends aborted, never half)."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.describe_transactions.v0 import request as describe_req
from kio.schema.list_transactions.v1 import request as list_req

from tests.conftest import unique
from tests.support.broker import BrokerProcess
from wire.client import BlockingConnection

SETTINGS = {
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "4",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", SETTINGS).start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill()


def create_topic(bootstrap: str, partitions: int = 2) -> str:
    name = unique("txn")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 0, **extra}
    )


def read_all(bootstrap: str, topic: str, isolation: str, expected: int) -> list[str]:
    """Values of ``topic`` from the start, waiting for ``expected`` of them (at most 20 s),
    then half a second more so that extra records would show."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: list[str] = []
    deadline = time.monotonic() + 20
    settle = None
    while time.monotonic() < deadline:
        for msg in consumer.consume(100, 0.2):
            assert msg.error() is None, msg.error()
            seen.append((msg.value() or b"").decode())
        if len(seen) >= expected:
            settle = settle or time.monotonic() + 0.5
            if time.monotonic() > settle:
                break
    consumer.close()
    return sorted(seen)


def test_commit_and_abort_as_consumers_see_them(txn_broker: BrokerProcess) -> None:
    topic = create_topic(txn_broker.bootstrap)
    p = producer(txn_broker.bootstrap, unique("tid"))
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"a{i}".encode(), partition=i % 2)
    p.flush(10)
    p.abort_transaction(20)
    p.begin_transaction()
    p.produce(topic, b"c-last", partition=0)
    p.commit_transaction(20)
    committed = sorted([f"c{i}" for i in range(10)] + ["c-last"])
    assert read_all(txn_broker.bootstrap, topic, "read_committed", 11) == committed
    everything = sorted(committed + [f"a{i}" for i in range(5)])
    assert read_all(txn_broker.bootstrap, topic, "read_uncommitted", 16) == everything


def test_an_open_transaction_holds_back_read_committed(txn_broker: BrokerProcess) -> None:
    topic = create_topic(txn_broker.bootstrap, 1)
    plain = Producer({"bootstrap.servers": txn_broker.bootstrap, "log_level": 0})
    plain.produce(topic, b"before", partition=0)
    plain.flush(10)
    p = producer(txn_broker.bootstrap, unique("tid"))
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(10)
    plain.produce(topic, b"after", partition=0)
    plain.flush(10)
    # the last stable offset stops at the open transaction: "after" waits behind it
    assert read_all(txn_broker.bootstrap, topic, "read_committed", 1) == ["before"]
    assert read_all(txn_broker.bootstrap, topic, "read_uncommitted", 3) == [
        "after",
        "before",
        "open",
    ]
    p.commit_transaction(20)
    assert read_all(txn_broker.bootstrap, topic, "read_committed", 3) == [
        "after",
        "before",
        "open",
    ]


def test_a_new_producer_fences_the_zombie(txn_broker: BrokerProcess) -> None:
    topic = create_topic(txn_broker.bootstrap)
    tid = unique("tid")
    zombie = producer(txn_broker.bootstrap, tid)
    zombie.init_transactions(20)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(10)
    successor = producer(txn_broker.bootstrap, tid)
    successor.init_transactions(30)  # aborts the zombie's open transaction first
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=1)
    successor.commit_transaction(20)
    zombie.produce(topic, b"late", partition=0)
    with pytest.raises(KafkaException) as caught:
        zombie.commit_transaction(20)
    error = caught.value.args[0]
    assert error.fatal() or error.txn_requires_abort(), error
    assert read_all(txn_broker.bootstrap, topic, "read_committed", 1) == ["successor"]


def test_the_coordinator_aborts_a_transaction_past_its_timeout(
    txn_broker: BrokerProcess,
) -> None:
    topic = create_topic(txn_broker.bootstrap)
    tid = unique("tid")
    p = producer(txn_broker.bootstrap, tid, **{"transaction.timeout.ms": 1500})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, b"too-slow", partition=0)
    p.flush(10)
    deadline = time.monotonic() + 20
    while describe(txn_broker, tid).transaction_state != "CompleteAbort":
        assert time.monotonic() < deadline, describe(txn_broker, tid)
        time.sleep(0.2)
    with pytest.raises(KafkaException):
        p.commit_transaction(20)
    assert read_all(txn_broker.bootstrap, topic, "read_committed", 0) == []


def test_offsets_sent_to_a_transaction_commit_with_it(txn_broker: BrokerProcess) -> None:
    source = create_topic(txn_broker.bootstrap, 1)
    sink = create_topic(txn_broker.bootstrap, 1)
    group = unique("etl")
    consumer = Consumer(
        {
            "bootstrap.servers": txn_broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(source, 0, 0)])
    p = producer(txn_broker.bootstrap, unique("tid"))
    p.init_transactions(20)
    p.begin_transaction()
    p.send_offsets_to_transaction(
        [TopicPartition(source, 0, 7)], consumer.consumer_group_metadata(), 20
    )
    p.produce(sink, b"x", partition=0)
    p.abort_transaction(20)
    assert committed(consumer, source) < 0, "aborted offsets are never visible"
    p.begin_transaction()
    for offset in (30, 42):  # two TxnOffsetCommits of one producer epoch: the last wins
        p.send_offsets_to_transaction(
            [TopicPartition(source, 0, offset)], consumer.consumer_group_metadata(), 20
        )
    p.produce(sink, b"y", partition=0)
    p.commit_transaction(20)
    deadline = time.monotonic() + 10
    while committed(consumer, source) != 42:
        assert time.monotonic() < deadline, committed(consumer, source)
        time.sleep(0.1)
    consumer.close()


def committed(consumer: Consumer, topic: str) -> int:
    return int(consumer.committed([TopicPartition(topic, 0)], 10)[0].offset)


def describe(proc: BrokerProcess, tid: str) -> Any:
    with BlockingConnection.to(proc.bootstrap) as conn:
        answer = conn.request(describe_req.DescribeTransactionsRequest(transactional_ids=(tid,)))
    return answer.transaction_states[0]


def describe_state(proc: BrokerProcess, tid: str) -> tuple[int, str]:
    """(error code, state) read from the frame itself: an Empty id has start time -1, as
    Kafka answers, which kio's reader refuses to parse."""
    with BlockingConnection.to(proc.bootstrap) as conn:
        conn.send(describe_req.DescribeTransactionsRequest(transactional_ids=(tid,)))
        frame = conn.read_frame()
    # flexible: correlation id, header tags, throttle, compact array count (1 + 1), then
    # the first entry: error int16, compact string id, compact string state
    (code,) = struct.unpack_from(">h", frame, 10)
    at = 13 + frame[12] - 1
    state_length = frame[at] - 1
    return code, frame[at + 1 : at + 1 + state_length].decode()


def test_describe_and_list_transactions(txn_broker: BrokerProcess) -> None:
    topic = create_topic(txn_broker.bootstrap)
    tid = unique("tid")
    p = producer(txn_broker.bootstrap, tid)
    p.init_transactions(20)
    assert describe_state(txn_broker, tid) == (0, "Empty")
    p.begin_transaction()
    p.produce(topic, b"v", partition=1)
    p.flush(10)
    state = describe(txn_broker, tid)
    assert state.transaction_state == "Ongoing"
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic, [1])]
    assert state.producer_epoch == 0
    with BlockingConnection.to(txn_broker.bootstrap) as conn:
        listed = conn.request(
            list_req.ListTransactionsRequest(
                state_filters=("Ongoing", "NoSuchState"), producer_id_filters=(), duration_filter=-1
            )
        )
    assert listed.unknown_state_filters == ("NoSuchState",)
    assert tid in [t.transactional_id for t in listed.transaction_states]
    p.commit_transaction(20)
    assert describe_state(txn_broker, "never-used") == (105, "")  # TRANSACTIONAL_ID_NOT_FOUND


def test_a_kill_mid_transaction_ends_it_aborted(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", SETTINGS).start()
    try:
        topic = create_topic(proc.bootstrap)
        group = unique("etl")
        offsets = producer(proc.bootstrap, unique("tid"))
        offsets.init_transactions(20)
        offsets.begin_transaction()
        metadata = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": group})
        for offset in (30, 42):  # two offset records of one epoch: both reach the log
            offsets.send_offsets_to_transaction(
                [TopicPartition(topic, 0, offset)], metadata.consumer_group_metadata(), 20
            )
        offsets.commit_transaction(20)
        tid = unique("tid")
        p = producer(proc.bootstrap, tid, **{"transaction.timeout.ms": 2000})
        p.init_transactions(20)
        p.begin_transaction()
        for i in range(20):
            p.produce(topic, f"open{i}".encode(), partition=i % 2)
        p.flush(10)
        proc.kill()
        proc.start()
        # the restarted coordinator reloads the Ongoing state and its timeout aborts it
        deadline = time.monotonic() + 30
        while describe(proc, tid).transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline, describe(proc, tid)
            time.sleep(0.2)
        after = producer(proc.bootstrap, tid)
        after.init_transactions(20)
        after.begin_transaction()
        after.produce(topic, b"after", partition=0)
        after.commit_transaction(20)
        assert read_all(proc.bootstrap, topic, "read_committed", 1) == ["after"]
        assert len(read_all(proc.bootstrap, topic, "read_uncommitted", 21)) == 21
        # the committed offsets were replayed from __consumer_offsets: the last one wins
        reader = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": group})
        assert committed(reader, topic) == 42
        reader.close()
        metadata.close()
    finally:
        proc.stop()
        proc.kill()
