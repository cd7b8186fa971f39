"""A full disk stops produce with a clear, retriable error and corrupts nothing.

The broker runs with RLIMIT_FSIZE: a segment file cannot grow past the limit, so its writes
fail part-way as writes to a full disk do (EFBIG instead of ENOSPC, the same path: a short
write, then failures). Producers get KAFKA_STORAGE_ERROR naming the full disk; the broker
stays up and serves what it has; after a restart without the limit every acknowledged
record is there, the segment ends at a whole batch, and produce works again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from dataplane.log.local_log import FULL_LOG_INTERVAL_S
from dataplane.transactions.records import decode_value
from dataplane.transactions.state import TxnState
from tests.conftest import unique
from tests.support.broker import BrokerProcess
from wire.record_batch import decode_records, iter_headers

LIMIT = 400_000
VALUE = b"x" * 1000


def produce(bootstrap: str, topic: str, count: int) -> tuple[list[int], list[str]]:
    acked: list[int] = []
    errors: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.offset())  # type: ignore[attr-defined]
        else:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 2,
            "batch.size": 20_000,
            "message.timeout.ms": 3000,
            "retries": 2,
            "log_level": 0,
        }
    )
    for _ in range(count):
        producer.produce(topic, VALUE, on_delivery=delivered)
        producer.poll(0)
    producer.flush(30)
    return acked, errors


def test_full_disk_refuses_writes_and_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, file_size_limit=LIMIT).start()
    topic = unique("full")
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "50000000"})])[
            topic
        ].result(30)
        started = time.monotonic()
        acked, errors = produce(broker.bootstrap, topic, 800)  # ~800 KB into a 400 KB file
        took = time.monotonic() - started
        assert acked, "writes below the limit succeed"
        assert errors, "writes past it fail"
        assert any("KAFKA_STORAGE_ERROR" in e or "storage" in e.lower() for e in errors), errors
        assert broker.alive()
        # said, but not once per refused write: at most once per FULL_LOG_INTERVAL_S
        said = [line for line in broker.logs().splitlines() if "is full" in line]
        assert 1 <= len(said) <= took // FULL_LOG_INTERVAL_S + 1, said
        segment = next((data / f"{topic}-0").glob("*.log"))
        assert segment.stat().st_size <= LIMIT
    finally:
        broker.stop()

    broker = BrokerProcess(data, port=broker.port).start()  # space again
    try:
        more, errors = produce(broker.bootstrap, topic, 50)
        assert errors == []
        assert len(more) == 50
        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "log_level": 0}
        )
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen: list[int] = []
        while len(seen) < len(acked) + 50:
            batch = consumer.consume(500, 5)
            assert batch, f"stalled at {len(seen)} of {len(acked) + 50}"
            for msg in batch:
                assert msg.error() is None, msg.error()
                seen.append(msg.offset())
        consumer.close()
        assert seen == list(range(len(seen)))
        assert set(acked) <= set(seen)
        assert "truncat" not in broker.logs().lower(), "the segment ended at a whole batch"
    finally:
        broker.stop()


def test_a_metadata_log_that_cannot_be_written_halts_the_broker(tmp_path: Path) -> None:
    """Found by the soak (tests/chaos): a broker whose Raft log write failed on a full disk
    stopped its Raft node but lived on, fenced and useless, so its supervisor never
    restarted it and the cluster ran a replica short until something else killed it. It
    now halts, as Kafka's fatal fault handler does (exit 70), and a restart with space
    recovers it with its topics."""
    broker = BrokerProcess(tmp_path / "data", file_size_limit=150_000).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = unique("small")
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        # a few thousand partition records: more metadata log than the disk takes
        big = unique("big")
        # (its answer may or may not leave before the halt: not checked)
        admin.create_topics([NewTopic(big, 3000, 1)], request_timeout=30)
        assert broker.proc is not None
        code = broker.proc.wait(60)
        assert code == 70, broker.logs()
        assert "halting: the metadata log cannot be written or applied" in broker.logs()
    finally:
        broker.stop()
    restarted = BrokerProcess(tmp_path / "data", port=broker.port).start()
    try:
        admin = AdminClient({"bootstrap.servers": restarted.bootstrap})
        assert topic in admin.list_topics(timeout=30).topics
    finally:
        restarted.stop()


def test_a_metadata_log_that_fails_while_the_broker_joins_halts_it_at_once(
    tmp_path: Path,
) -> None:
    """Found by the soak: a broker whose Raft log write failed during start-up (a disk
    still full from before its restart) sat unregistered until its start-up timeout, its
    supervisor none the wiser; it halts at once now, as it does once running."""
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        big = unique("big")
        admin.create_topics([NewTopic(big, 3000, 1)])[big].result(60)
    finally:
        broker.stop()
    assert sum(f.stat().st_size for f in data.glob("__cluster_metadata-0/*")) > 150_000
    limited = BrokerProcess(data, port=broker.port, file_size_limit=150_000).spawn()
    assert limited.proc is not None
    try:
        assert limited.proc.wait(20) == 70, limited.logs()
    finally:
        limited.stop()


def test_a_start_that_fails_after_registering_exits_at_once(tmp_path: Path) -> None:
    """Found by the soak: a broker whose start-up failed after it had registered (its
    usage spool on a disk still full) left asyncio.run cancelling the tasks the start had
    begun, one of them stuck on the same disk; the process lived on, registered but deaf,
    until its supervisor killed it. It exits at once now, saying why. Here the cause is a
    spool marker that is not a number, which fails the start at the same step."""
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    broker.stop()
    (data / "usage" / "incarnation").write_text("not a number\n")
    failing = BrokerProcess(data, port=broker.port).spawn()
    assert failing.proc is not None
    try:
        assert failing.proc.wait(60) == 1, failing.logs()
        logs = failing.logs()
        assert "start-up failed" in logs, logs
        assert "not a number: remove it" in logs, logs
    finally:
        failing.stop()


TXN_SETTINGS = {"transaction.state.log.num.partitions": "1"}
TXN_TOPIC = "txn-full"
TXN_ID = "txn-full-id"


def txn_producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": TXN_ID,
            "transaction.timeout.ms": 60_000,
            "log_level": 0,
        }
    )


def commit_one(producer: Producer, value: int, timeout: float = 10) -> None:
    producer.begin_transaction()
    producer.produce(TXN_TOPIC, b"%d" % value)
    producer.commit_transaction(timeout)


def txn_log(data: Path) -> list[tuple[int, int, TxnState]]:
    """(position, size, state) of every batch in the transaction log's one segment."""
    (segment,) = (data / "__transaction_state-0").glob("*.log")
    raw = segment.read_bytes()
    out, position = [], 0
    for header in iter_headers(raw):
        (record,) = decode_records(raw[position : position + header.size])
        assert record.value is not None
        out.append((position, header.size, decode_value(record.value).state))
        position += header.size
    return out


def test_a_full_transaction_log_fails_a_commit_retriably_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """Found by the soak: a PREPARE_COMMIT that a full disk refused was answered
    UNKNOWN_SERVER_ERROR (the coordinator's log wrapped the partition's LogDirFull in a
    plain error), which librdkafka takes as a permanent EndTxn failure. Kafka answers a
    storage error on the coordinator's log NOT_COORDINATOR, which clients retry: the commit
    fails retriably while the disk is full, and goes through once there is space again.

    The write that fills the disk must be the PREPARE_COMMIT: a first broker measures the
    transaction log's batches (their sizes are fixed: same id, topic and fields), and the
    second runs with a file size limit that ends in the middle of a PREPARE_COMMIT."""
    measured = BrokerProcess(tmp_path / "measure", TXN_SETTINGS).start()
    try:
        admin = AdminClient({"bootstrap.servers": measured.bootstrap})
        admin.create_topics([NewTopic(TXN_TOPIC, 1, 1)])[TXN_TOPIC].result(30)
        producer = txn_producer(measured.bootstrap)
        producer.init_transactions(30)
        for value in range(2):
            commit_one(producer, value)
        wait = time.monotonic() + 30
        while len(txn_log(tmp_path / "measure")) < 7:  # Empty, then 3 per transaction
            assert time.monotonic() < wait, txn_log(tmp_path / "measure")
            time.sleep(0.05)
        batches = txn_log(tmp_path / "measure")
    finally:
        measured.stop()
    states = [state for _, _, state in batches]
    assert states[1:4] == [TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    first, cycle = batches[1][0], batches[4][0] - batches[1][0]
    sizes = [size for _, size, _ in batches]
    assert sizes[1:4] == sizes[4:7], batches  # every transaction adds the same bytes
    full_after = 100  # transactions that fit; the next one's PREPARE_COMMIT does not
    prepare_at = first + full_after * cycle + batches[2][0] - first
    limit = prepare_at + batches[2][1] // 2

    data = tmp_path / "data"
    broker = BrokerProcess(data, TXN_SETTINGS, file_size_limit=limit).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TXN_TOPIC, 1, 1)])[TXN_TOPIC].result(30)
        producer = txn_producer(broker.bootstrap)
        producer.init_transactions(30)
        for value in range(full_after):
            commit_one(producer, value)
        with pytest.raises(KafkaException) as failed:
            commit_one(producer, full_after, timeout=5)
        error = failed.value.args[0]
        assert error.code() != KafkaError.UNKNOWN, error
        assert error.retriable(), error
        assert (error.fatal(), error.txn_requires_abort()) == (False, False), error
        assert broker.alive()
    finally:
        broker.stop()

    broker = BrokerProcess(data, TXN_SETTINGS, port=broker.port).start()  # space again
    try:
        producer.commit_transaction(60)  # the same commit, retried
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": unique("g"),
                "isolation.level": "read_committed",
                "log_level": 0,
            }
        )
        consumer.assign([TopicPartition(TXN_TOPIC, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        while len(values) < full_after + 1:
            batch = consumer.consume(500, 10)
            assert batch, f"stalled at {len(values)} of {full_after + 1} committed records"
            values += [msg.value() for msg in batch if msg.error() is None]
        consumer.close()
        assert values == [b"%d" % i for i in range(full_after + 1)], "every commit, once"
    finally:
        broker.stop()
