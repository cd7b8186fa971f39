"""A full disk stops produce with a clear, retriable error and corrupts nothing.

The broker runs with RLIMIT_FSIZE: a segment file cannot grow past the limit, so its writes
fail part-way as writes to a full disk do (EFBIG instead of ENOSPC, the same path: a short
write, then failures). Producers get KAFKA_STORAGE_ERROR naming the full disk; the broker
stays up and serves what it has; after a restart without the limit every acknowledged
record is there, the segment ends at a whole batch, and produce works again."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dataplane.log.local_log import FULL_LOG_INTERVAL_S
from tests.conftest import unique
from tests.support.broker import BrokerProcess

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
