"""Broker metering (issue 16): the counters are exact, usage events reach __sluice_usage
under idempotent keys, and a broker killed with -9 while clients produce and consume loses
no event it made (every incarnation's sequences arrive without a gap) and counts none
twice (re-sends carry the key of the first send)."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from dataplane.metering.meter import Meter
from dataplane.metering.spool import Spool
from tests.conftest import BrokerProcess, unique
from wire.usage import BUCKET_MS, USAGE_TOPIC, Dimension, Usage, UsageEvent

FAST = {
    "usage.flush.interval.ms": "1000",
    "auto.create.topics.enable": "true",
    "num.partitions": "2",
}


def _event(seq: int, quantity: int = 5) -> UsageEvent:
    return UsageEvent(
        "broker-1", 1, seq, 1_000, 2_000, (Usage(Dimension.BYTES_IN, quantity, "t", "User:a"),)
    )


def test_spool_keeps_unsent_events_across_restarts(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_events=10)
    assert spool.open() == 1
    for seq in range(3):
        spool.append(_event(seq))
    spool.acknowledged(1)
    again = Spool(tmp_path, max_events=10)
    assert again.open() == 2
    assert [e.sequence for e in again.pending] == [1, 2]


def test_spool_drops_a_torn_line_and_keeps_the_rest(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_events=10)
    spool.open()
    spool.append(_event(0))
    with open(spool.path, "ab") as f:
        f.write(_event(1).encode()[:20])  # a kill in the middle of an append
    again = Spool(tmp_path, max_events=10)
    again.open()
    assert [e.sequence for e in again.pending] == [0]


def test_full_spool_drops_the_oldest(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(tmp_path, max_events=10)
    spool.open()
    for seq in range(12):
        spool.append(_event(seq))
    assert [e.sequence for e in spool.pending] == list(range(2, 12))
    assert spool.dropped == 2
    assert "usage.spool.max.events=10" in caplog.text


def test_meter_carries_sub_millisecond_guest_time_over() -> None:
    meter = Meter()
    meter.transform("upper", 10, 700_000)
    assert {u.dimension for u in meter.take()} == {Dimension.TRANSFORM_RECORDS}
    meter.transform("upper", 10, 700_000)
    taken = {u.dimension: u.quantity for u in meter.take()}
    assert taken == {Dimension.TRANSFORM_RECORDS: 10, Dimension.TRANSFORM_CPU_MS: 1}
    meter.bytes_in(USAGE_TOPIC, None, 100)  # the usage topic is never metered
    assert meter.take() == []


def read_usage(bootstrap: str, timeout: float = 30, until: Any = None) -> list[UsageEvent]:
    """Every record of __sluice_usage, decoded, in topic order (reads until ``until``
    holds for what was read, or ``timeout``)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("usage-reader"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([USAGE_TOPIC])
    events: list[UsageEvent] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                event = UsageEvent.decode(message.value() or b"")
                assert message.key() == event.key
                events.append(event)
            elif message is None and until is not None and until(events):
                break
    finally:
        consumer.close()
    return events


def totals(events: list[UsageEvent], topic: str) -> dict[Dimension, int]:
    seen: set[bytes] = set()
    out: defaultdict[Dimension, int] = defaultdict(int)
    for event in events:
        if event.key in seen:
            continue
        seen.add(event.key)
        for usage in event.usage:
            if usage.topic == topic:
                out[usage.dimension] += usage.quantity
    return dict(out)


def log_bytes(data_dir: Path, topic: str) -> int:
    return sum(f.stat().st_size for f in data_dir.glob(f"{topic}-*/*.log"))


def test_bytes_in_and_out_equal_the_batches_stored(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker(FAST)
    topic = unique("metered")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(2_000):
        producer.produce(topic, key=str(i).encode(), value=b"v" * (50 + i % 100))
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < 2_000 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got += 1
    consumer.close()
    assert got == 2_000
    stored = log_bytes(broker.data_dir, topic)

    def complete(events: list[UsageEvent]) -> bool:
        t = totals(events, topic)
        return t.get(Dimension.BYTES_IN) == stored and t.get(Dimension.BYTES_OUT) == stored

    events = read_usage(broker.bootstrap, until=complete)
    measured = totals(events, topic)
    assert measured[Dimension.BYTES_IN] == stored
    assert measured[Dimension.BYTES_OUT] == stored
    assert measured[Dimension.HOT_STORAGE_BYTE_MS] > 0
    principals = {u.principal for e in events for u in e.usage if u.dimension == Dimension.BYTES_IN}
    assert principals == {"User:ANONYMOUS"}
    controller_dimensions = {Dimension.PARTITION_MS, Dimension.TIERED_STORAGE_BYTE_MS}
    for event in events:
        # the broker is also the active controller: at each minute boundary it writes the
        # minute's partition-hours as source "controller" (one event per minute, key = minute)
        if event.source == "controller":
            assert {u.dimension for u in event.usage} <= controller_dimensions
            assert event.end_ms - event.start_ms == BUCKET_MS
            continue
        assert event.source == "broker-1"
        assert event.end_ms - event.start_ms <= 1000 or event.sequence == 0


class Workload(threading.Thread):
    """Produces (idempotent, acks=all) and consumes until stopped, across broker kills."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.stopping = threading.Event()
        self.acked = 0

    def run(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )

        def delivered(err: Any, _msg: Any) -> None:
            if err is None:
                self.acked += 1

        while not self.stopping.is_set():
            try:
                producer.produce(self.topic, value=b"x" * 200, on_delivery=delivered)
            except BufferError:
                producer.poll(0.1)
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(30)


def test_kill_minus_nine_loses_no_usage_event(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker(FAST)
    topic = unique("killed")
    workload = Workload(broker.bootstrap, topic)
    workload.start()
    try:
        for _ in range(3):
            time.sleep(3.5)
            broker.kill()
            broker.restart()
        time.sleep(3)
    finally:
        workload.stopping.set()
        workload.join(60)
    assert workload.acked > 0
    time.sleep(2)
    broker.stop()  # its last event may wait in the spool: the next start sends it
    assert (broker.data_dir / "usage" / "incarnation").read_text().strip() == "4"
    broker.restart()

    def every_epoch_complete(events: list[UsageEvent]) -> bool:
        return {e.epoch for e in events if e.source == "broker-1"} >= {1, 2, 3, 4, 5}

    events = read_usage(broker.bootstrap, timeout=30, until=every_epoch_complete)
    by_key = Counter(e.key for e in events)
    contents: dict[bytes, UsageEvent] = {}
    for event in events:
        assert contents.setdefault(event.key, event) == event  # a re-send is the same event
    sequences: defaultdict[int, set[int]] = defaultdict(set)
    for event in events:
        if event.source == "broker-1":
            sequences[event.epoch].add(event.sequence)
    assert sorted(sequences)[:4] == [1, 2, 3, 4]
    for epoch in (1, 2, 3, 4):
        assert sequences[epoch] == set(range(max(sequences[epoch]) + 1)), f"gap in epoch {epoch}"
    produced = totals(events, topic).get(Dimension.BYTES_IN, 0)
    assert produced > 0
    assert produced <= log_bytes(broker.data_dir, topic)  # never more than was stored
    assert sum(by_key.values()) >= len(by_key)
