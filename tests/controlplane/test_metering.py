"""The control plane's metering of provisioned capacity (controlplane/metering.py,
usage_history.py): the integral over recorded transitions, the store's hooks that record
them, the meter's cursor, and a real control plane metering a real cluster into its
``__sluice_usage`` topic across a kill -9."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Consumer, TopicPartition

from cli.client import Env
from cli.main import cloudctl
from controlplane import usage_history
from controlplane.config import Settings
from controlplane.metering import READS_LAG_MS, READS_SOURCE, Meter
from controlplane.states import ClusterState, OperationType
from controlplane.store import BrokerRecord, ClusterRecord, Store
from controlplane.usage_history import (
    DELETED,
    EndpointTransition,
    History,
    Transition,
    bucket_event,
    complete_until,
)
from tests.controlplane.harness import ControlPlaneProcess, kill_everything_under, wait_until
from tests.support.cluster_workload import high_watermark
from tiered.read_meter import Counts
from wire.usage import BUCKET_MS, USAGE_TOPIC, Dimension, Usage, UsageEvent

B = 1_764_104_400_000
"""A bucket start (2025-11-25T21:00:00Z, also an hour start)."""
M5 = "kafka.m5.large"
M7G = "kafka.m7g.large"


def history(*rows: tuple[int, int], kind: str = M5, **endpoints: list[tuple[int, bool]]) -> History:
    """A cluster's history from (at_ms, broker_count) rows (count 0: deleted)."""
    return History(
        cluster_id="id",
        cluster="c",
        transitions=tuple(
            Transition(at, count, kind, DELETED if count == 0 else "ACTIVE") for at, count in rows
        ),
        endpoints={
            name: tuple(EndpointTransition(at, name, active) for at, active in ts)
            for name, ts in endpoints.items()
        },
    )


def broker_ms(h: History, bucket: int) -> dict[str, int]:
    event = bucket_event(h, bucket)
    if event is None:
        return {}
    return {u.resource: u.quantity for u in event.usage if u.dimension is Dimension.BROKER_MS}


# ---------------------------------------------------------------------- the integral


def test_a_whole_bucket_of_one_count() -> None:
    h = history((B, 3))
    assert broker_ms(h, B) == {M5: 3 * BUCKET_MS}
    assert broker_ms(h, B + 5 * BUCKET_MS) == {M5: 3 * BUCKET_MS}, "holds until the next row"
    assert bucket_event(h, B - BUCKET_MS) is None, "nothing before the create"


def test_transitions_on_bucket_edges_belong_to_the_bucket_they_start() -> None:
    h = history((B, 1), (B + BUCKET_MS, 2), (B + 2 * BUCKET_MS, 1))
    assert broker_ms(h, B) == {M5: BUCKET_MS}
    assert broker_ms(h, B + BUCKET_MS) == {M5: 2 * BUCKET_MS}
    assert broker_ms(h, B + 2 * BUCKET_MS) == {M5: BUCKET_MS}


def test_scaling_mid_bucket_is_exact_to_the_ms() -> None:
    h = history((B - 7, 1), (B + 15_001, 2), (B + 44_999, 1))
    # 1 broker for 15001 ms, 2 for 29998 ms, 1 for 15001 ms
    assert broker_ms(h, B) == {M5: 15_001 + 2 * 29_998 + 15_001}
    assert broker_ms(h, B - BUCKET_MS) == {M5: 7}


def test_a_create_mid_bucket_counts_from_the_create() -> None:
    h = history((B + 20_000, 3))
    assert broker_ms(h, B) == {M5: 3 * 40_000}


def test_deletion_ends_the_billing_and_later_buckets_are_empty() -> None:
    h = history((B, 2), (B + 30_000, 0))
    assert broker_ms(h, B) == {M5: 2 * 30_000}
    assert bucket_event(h, B + BUCKET_MS) is None
    assert h.ended_at == B + 30_000
    # the bucket it ended in is complete at once; an open cluster's at the minute's end
    assert complete_until(h, B + 31_000) == B + BUCKET_MS
    assert complete_until(history((B, 2)), B + 31_000) == B


def test_rows_of_the_same_ms_the_last_holds() -> None:
    h = history((B + 10, 1), (B + 10, 3))
    assert broker_ms(h, B) == {M5: 3 * (BUCKET_MS - 10)}


def test_a_change_of_broker_type_bills_each_type_apart() -> None:
    h = History(
        "id", "c", (Transition(B, 2, M5, "ACTIVE"), Transition(B + 20_000, 2, M7G, "UPDATING"))
    )
    assert broker_ms(h, B) == {M5: 40_000, M7G: 80_000}


def test_endpoints_are_billed_while_they_exist() -> None:
    h = history((B, 1), pe=[(B + 10_000, True), (B + 40_000, False)], other=[(B - 5, True)])
    event = bucket_event(h, B)
    assert event is not None
    assert event.key == f"controlplane/0/{B}".encode()
    assert (event.start_ms, event.end_ms) == (B, B + BUCKET_MS)
    endpoints = {
        u.resource: u.quantity for u in event.usage if u.dimension is Dimension.ENDPOINT_MS
    }
    assert endpoints == {"pe": 30_000, "other": BUCKET_MS}
    assert UsageEvent.decode(event.encode()) == event


# ---------------------------------------------------------------------- the store's hooks


def _cluster(name: str = "demo", kind: str = M7G) -> ClusterRecord:
    return ClusterRecord(
        name=name,
        cluster_id=f"id-{name}-{time.monotonic_ns()}",
        state=ClusterState.CREATING,
        broker_count=2,
        broker_type=kind,
    )


def _broker(name: str, broker_id: int) -> BrokerRecord:
    return BrokerRecord(
        cluster=name,
        broker_id=broker_id,
        host="127.0.0.1",
        port=19000 + broker_id,
        data_dir=f"/data/{name}/{broker_id}",
        log_path=f"/logs/{name}/{broker_id}.log",
    )


def _rows(db: Store, cluster_id: str) -> list[tuple[int, str, str]]:
    return [
        (t.broker_count, t.broker_type, t.state)
        for t in usage_history.load(db.db, cluster_id).transitions
    ]


def test_the_store_records_every_change_of_capacity(tmp_path: Path) -> None:
    db = Store(tmp_path / "state.db")
    cluster = _cluster()
    db.insert_cluster(cluster, [_broker("demo", 0), _broker("demo", 1)])
    assert (db.get_cluster("demo") or cluster).broker_type == M7G
    db.update_cluster("demo", state=ClusterState.ACTIVE, operation="")
    db.update_cluster("demo", state_message="nothing billable changes")
    db.start_operation(
        "demo",
        OperationType.UPDATE_BROKER_COUNT,
        "2 -> 3 brokers",
        new_brokers=[_broker("demo", 2)],
        broker_count=3,
        state=ClusterState.UPDATING,
    )
    db.update_cluster("demo", state=ClusterState.FAILED)
    db.remove_brokers("demo", [2], broker_count=2)
    db.delete_cluster("demo")
    assert _rows(db, cluster.cluster_id) == [
        (2, M7G, "CREATING"),
        (2, M7G, "ACTIVE"),
        (3, M7G, "UPDATING"),
        (3, M7G, "FAILED"),
        (2, M7G, "FAILED"),
        (0, M7G, DELETED),
    ]
    times = [t.at_ms for t in usage_history.load(db.db, cluster.cluster_id).transitions]
    assert times == sorted(times)
    # a new cluster of the same name has a history of its own
    again = _cluster()
    db.insert_cluster(again, [_broker("demo", 0)])
    assert _rows(db, again.cluster_id) == [(1, M7G, "CREATING")]


def test_rows_are_never_dated_inside_a_bucket_already_sent(tmp_path: Path) -> None:
    db = Store(tmp_path / "state.db")
    cluster = _cluster()
    db.insert_cluster(cluster, [_broker("demo", 0)])
    future = usage_history.now_ms() + 10 * BUCKET_MS
    usage_history.advance(db.db, cluster.cluster_id, "demo", future)
    db.update_cluster("demo", state=ClusterState.ACTIVE)
    assert usage_history.load(db.db, cluster.cluster_id).transitions[-1].at_ms == future
    usage_history.advance(db.db, cluster.cluster_id, "demo", future - BUCKET_MS)
    assert usage_history.cursor(db.db, cluster.cluster_id) == future, "never moves back"


def test_endpoints_and_the_end_of_a_cluster(tmp_path: Path) -> None:
    db = Store(tmp_path / "state.db")
    cluster = _cluster()
    db.insert_cluster(cluster, [_broker("demo", 0)])
    clock = iter([B / 1000 + 1, B / 1000 + 2, B / 1000 + 3]).__next__
    usage_history.record_endpoint(db.db, "demo", "a", active=True, clock=clock)
    usage_history.record_endpoint(db.db, "demo", "a", active=True, clock=clock)  # no change
    usage_history.record_endpoint(db.db, "demo", "b", active=True, clock=clock)
    usage_history.record_endpoint(db.db, "demo", "b", active=False, clock=clock)
    ended = usage_history.end_cluster(db.db, "demo")
    assert ended is not None
    assert usage_history.end_cluster(db.db, "demo") == ended, "the first end is kept"
    h = usage_history.load(db.db, cluster.cluster_id)
    assert [(t.active) for t in h.endpoints["a"]] == [True, False]
    assert h.endpoints["a"][-1].at_ms == ended
    assert [(t.active) for t in h.endpoints["b"]] == [True, False]
    db.update_cluster("demo", state=ClusterState.DELETING)
    assert h.ended_at == ended
    assert usage_history.load(db.db, cluster.cluster_id).transitions[-1].state == DELETED


# ---------------------------------------------------------------------- the meter's cursor


class RecordingMeter(Meter):
    """The meter with its Kafka side replaced: what it would produce, one list per request."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        now_ms: int,
        reads: Callable[[], Counts] | None = None,
    ) -> None:
        super().__init__(store, settings, clock=lambda: self.now / 1000, reads=reads)
        self.now = now_ms
        self.sent: list[list[UsageEvent]] = []
        self.fail_after: int | None = None

    async def _leader(self, cluster: ClusterRecord, brokers: list[BrokerRecord]) -> BrokerRecord:
        return _broker(cluster.name, 0)

    async def _send(self, cluster: ClusterRecord, events: list[UsageEvent]) -> None:
        if self.fail_after is not None and len(self.sent) >= self.fail_after:
            raise ConnectionRefusedError("broker down")
        self.sent.append(list(events))


def _metered(
    tmp_path: Path, *rows: tuple[int, int], **settings: int
) -> tuple[Store, ClusterRecord]:
    db = Store(tmp_path / "state.db")
    cluster = ClusterRecord("m", "id-m", ClusterState.CREATING, 1)
    for at, count in rows:
        db.db.execute(
            "INSERT INTO capacity_history (cluster_id, cluster, at_ms, broker_count, broker_type,"
            " state) VALUES (?, ?, ?, ?, ?, ?)",
            ("id-m", "m", at, count, M5, DELETED if count == 0 else "ACTIVE"),
        )
    return db, cluster


async def test_complete_buckets_are_sent_in_batches_and_the_cursor_follows(tmp_path: Path) -> None:
    db, cluster = _metered(tmp_path, (B + 30_000, 2))
    meter = RecordingMeter(db, Settings(metering_batch_events=4), B + 10 * BUCKET_MS + 500)
    assert await meter.meter(cluster) == 10
    assert [len(batch) for batch in meter.sent] == [4, 4, 2]
    events = [e for batch in meter.sent for e in batch]
    assert [e.sequence for e in events] == [B + i * BUCKET_MS for i in range(10)]
    assert events[0].usage[0].quantity == 2 * 30_000
    assert all(e.usage[0].quantity == 2 * BUCKET_MS for e in events[1:])
    assert usage_history.cursor(db.db, "id-m") == B + 10 * BUCKET_MS
    assert await meter.meter(cluster) == 0, "the current minute is not complete"


async def test_a_failed_request_leaves_its_buckets_to_the_next_pass(tmp_path: Path) -> None:
    db, cluster = _metered(tmp_path, (B, 1))
    meter = RecordingMeter(db, Settings(metering_batch_events=3), B + 7 * BUCKET_MS)
    meter.fail_after = 1
    with pytest.raises(ConnectionRefusedError):
        await meter.meter(cluster)
    assert usage_history.cursor(db.db, "id-m") == B + 3 * BUCKET_MS
    assert await meter.meter_all() == 0, "a pass logs the failure and goes on"
    first = [e.encode() for e in meter.sent[0]]
    meter.fail_after = None
    assert await meter.meter(cluster) == 4
    assert [e.sequence for b in meter.sent[1:] for e in b] == [
        B + i * BUCKET_MS for i in range(3, 7)
    ]
    # computed again from the same rows (a restart), a bucket is the same event
    recomputed = usage_history.load(db.db, "id-m")
    assert [_encoded(bucket_event(recomputed, e.sequence)) for e in meter.sent[0]] == first


def _encoded(event: UsageEvent | None) -> bytes:
    assert event is not None
    return event.encode()


async def test_catch_up_is_capped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db, cluster = _metered(tmp_path, (B, 1))
    settings = Settings(metering_catchup_max_ms=5 * BUCKET_MS + 123, metering_batch_events=100)
    meter = RecordingMeter(db, settings, B + 60 * BUCKET_MS)
    with caplog.at_level(logging.WARNING, logger="sluice.controlplane.metering"):
        assert await meter.meter(cluster) == 5
    assert [e.sequence for e in meter.sent[0]] == [B + i * BUCKET_MS for i in range(55, 60)]
    assert "metering.catchup.max.ms" in caplog.text
    assert "is not metered" in caplog.text


async def test_a_cluster_recorded_before_metering_is_metered_from_when_it_is_seen(
    tmp_path: Path,
) -> None:
    db = Store(tmp_path / "state.db")
    cluster = _cluster()
    db.insert_cluster(cluster, [_broker("demo", 0), _broker("demo", 1)])
    db.db.execute("DELETE FROM capacity_history")  # a state.db of schema 6
    meter = RecordingMeter(db, Settings(), B + 30_000)
    assert await meter.meter(cluster) == 0
    meter.now = B + 2 * BUCKET_MS
    assert await meter.meter(cluster) == 2
    assert [(e.sequence, e.usage[0].quantity) for e in meter.sent[0]] == [
        (B, 2 * 30_000),
        (B + BUCKET_MS, 2 * BUCKET_MS),
    ]


async def test_a_deleted_cluster_is_metered_to_its_end_at_once(tmp_path: Path) -> None:
    db, cluster = _metered(tmp_path, (B, 3), (B + BUCKET_MS + 1_500, 0))
    meter = RecordingMeter(db, Settings(), B + BUCKET_MS + 2_000)
    await meter.until_deleted(cluster)
    events = [e for batch in meter.sent for e in batch]
    assert [(e.sequence, e.usage[0].quantity) for e in events] == [
        (B, 3 * BUCKET_MS),
        (B + BUCKET_MS, 3 * 1_500),
    ]
    assert usage_history.cursor(db.db, "id-m") == B + 2 * BUCKET_MS
    meter.now += 60 * BUCKET_MS
    assert await meter.meter(cluster) == 0, "nothing after the end"


async def test_object_store_reads_are_metered_per_final_minute_and_topic(tmp_path: Path) -> None:
    db, cluster = _metered(tmp_path, (B + 30_000, 1))
    cluster = replace(cluster, s3_bucket="bkt")
    counts: Counts = {
        ("bkt", B, "t1"): 100,
        ("bkt", B, "t2"): 5,
        ("bkt", B + 2 * BUCKET_MS, "t1"): 7,
        ("other", B + BUCKET_MS, "t1"): 999,
        ("bkt", B + 3 * BUCKET_MS, "t1"): 1,
    }
    # B+3m ended less than READS_LAG_MS ago: its counts may still grow
    now = B + 4 * BUCKET_MS + READS_LAG_MS - 1
    meter = RecordingMeter(db, Settings(metering_batch_events=1), now, reads=lambda: counts)
    assert await meter.meter(cluster) == 4 + 2, "4 capacity minutes, 2 read minutes"
    reads = [e for batch in meter.sent for e in batch if e.source == READS_SOURCE]
    assert [(e.sequence, e.start_ms, e.end_ms) for e in reads] == [
        (B, B, B + BUCKET_MS),
        (B + 2 * BUCKET_MS, B + 2 * BUCKET_MS, B + 3 * BUCKET_MS),
    ]
    assert [[(u.dimension, u.topic, u.quantity) for u in e.usage] for e in reads] == [
        [
            (Dimension.SPARK_TIERED_READ_BYTES, "t1", 100),
            (Dimension.SPARK_TIERED_READ_BYTES, "t2", 5),
        ],
        [(Dimension.SPARK_TIERED_READ_BYTES, "t1", 7)],
    ]
    assert usage_history.cursor(db.db, "id-m", usage_history.READ_CURSORS) == B + 3 * BUCKET_MS
    meter.sent.clear()
    meter.now += 1
    assert await meter.meter(cluster) == 1, "B+3m is final now; nothing sent twice"
    assert [e.sequence for batch in meter.sent for e in batch] == [B + 3 * BUCKET_MS]
    # a request that fails leaves its minutes to the next pass, sent the same
    counts["bkt", B + 5 * BUCKET_MS, "t1"] = 3
    meter.now = B + 6 * BUCKET_MS + READS_LAG_MS
    meter.fail_after = 0
    with pytest.raises(ConnectionRefusedError):
        await meter.meter(cluster)
    meter.fail_after = None
    meter.sent.clear()
    assert await meter.meter(cluster) == 2 + 1
    (again,) = [e for batch in meter.sent for e in batch if e.source == READS_SOURCE]
    assert again == UsageEvent(
        READS_SOURCE,
        0,
        B + 5 * BUCKET_MS,
        B + 5 * BUCKET_MS,
        B + 6 * BUCKET_MS,
        (Usage(Dimension.SPARK_TIERED_READ_BYTES, 3, topic="t1"),),
    )


async def test_a_deletion_whose_brokers_do_not_answer_says_what_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db, cluster = _metered(tmp_path, (B, 1), (B + 90_000, 0))
    meter = RecordingMeter(db, Settings(), B + 90_001)
    meter.fail_after = 0
    with caplog.at_level(logging.WARNING, logger="sluice.controlplane.metering"):
        await meter.until_deleted(cluster)
    assert "lost with its usage topic" in caplog.text


# ---------------------------------------------------------------------- a real control plane


class Plane:
    """The module's control plane; a test that restarts it puts the new process here."""

    def __init__(self, home: Path) -> None:
        self.process = ControlPlaneProcess(home, {"metering.interval.ms": "1000"}).start()

    def restart_after_kill_9(self) -> None:
        """kill -9 the control plane (its brokers keep running) and start it again."""
        self.process.kill9()
        time.sleep(1)  # down for a while: the meter catches up after the restart
        self.process = ControlPlaneProcess(self.process.home, self.process.settings).start()


@pytest.fixture(scope="module")
def metered_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    home = tmp_path_factory.mktemp("metering-home")
    plane = Plane(home)
    try:
        yield plane
    finally:
        plane.process.stop()
        assert kill_everything_under(home) == []


def cli(plane: Plane, *args: str) -> Result:
    process = plane.process
    return CliRunner().invoke(cloudctl, list(args), obj=Env(process.home, process.endpoint))


def state_db(plane: Plane) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{plane.process.home / 'state.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def read_usage(bootstrap: str) -> list[tuple[bytes, bytes]]:
    """Every record of the usage topic: (key, value)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "metering-test",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        high = high_watermark(consumer, USAGE_TOPIC, 0)
        consumer.assign([TopicPartition(USAGE_TOPIC, 0, 0)])
        out: list[tuple[bytes, bytes]] = []
        position = 0
        deadline = time.monotonic() + 60
        while position < high and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            out.append((message.key() or b"", message.value() or b""))
            position = (message.offset() or 0) + 1
        assert position >= high, f"read {position} of {high} records of {USAGE_TOPIC}"
        return out
    finally:
        consumer.close()


def expected_broker_ms(rows: list[sqlite3.Row], bucket: int) -> int:
    """The integral of the recorded broker counts over one bucket, by the definition."""
    total = 0
    for i, row in enumerate(rows):
        until = rows[i + 1]["at_ms"] if i + 1 < len(rows) else bucket + BUCKET_MS
        low, high = max(row["at_ms"], bucket), min(until, bucket + BUCKET_MS)
        if high > low:
            total += row["broker_count"] * (high - low)
    return total


def test_an_unknown_broker_type_is_refused(metered_plane: Plane) -> None:
    bad = cli(metered_plane, "create-cluster", "typo", "--broker-type", "kafka.m7g.lage")
    assert bad.exit_code == 1
    assert "kafka.m7g.large" in bad.stderr, "the message names the known types"
    assert "kafka.t3.small" in bad.stderr
    assert cli(metered_plane, "describe-cluster", "typo").exit_code == 1, "nothing was created"


@pytest.mark.timeout(480)
def test_a_cluster_is_metered_exactly_across_a_kill_9(metered_plane: Plane) -> None:
    plane = metered_plane
    made = cli(plane, "create-cluster", "metered", "--brokers", "1", "--broker-type", M7G, "--wait")
    assert made.exit_code == 0, made.stderr
    described = json.loads(cli(plane, "describe-cluster", "metered", "-o", "json").stdout)
    assert described["broker_type"] == M7G
    assert re.search(
        rf"^broker type: +{M7G}$", cli(plane, "describe-cluster", "metered").stdout, re.M
    )
    assert f"broker_type: {M7G}" in cli(plane, "describe-cluster", "metered", "-o", "yaml").stdout
    assert M7G in cli(plane, "list-clusters").stdout
    cluster_id = described["cluster_id"]

    # the meter creates the usage topic once the cluster runs (replicated on its one broker,
    # so the scale-in below can move everything back to broker 0)
    def topic_exists() -> bool:
        listed = json.loads(
            cli(plane, "list-topics", "--cluster", "metered", "--internal", "-o", "json").stdout
        )
        return any(t["name"] == USAGE_TOPIC for t in listed["topics"])

    wait_until(topic_exists, 60, f"{USAGE_TOPIC} created")

    def cursor() -> int:
        with contextlib.closing(state_db(plane)) as db:
            row = db.execute(
                "SELECT next_bucket_ms FROM metering_cursors WHERE cluster_id = ?", (cluster_id,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def scale(count: int) -> int:
        """Scale to ``count`` brokers; returns when it was asked."""
        asked = usage_history.now_ms()
        scaled = cli(plane, "update-broker-count", "metered", "--brokers", str(count), "--wait")
        assert scaled.exit_code == 0, scaled.stderr
        return asked

    # a scale-out, metered before the kill -9; a scale-in after the restart, metered after
    scaled_out = scale(2)
    wait_until(lambda: cursor() > scaled_out, 150, "the bucket of the scale-out metered")
    plane.restart_after_kill_9()  # its brokers run on: billed while nobody watches
    scaled_in = scale(1)
    wait_until(lambda: cursor() > scaled_in, 150, "the bucket of the scale-in metered")
    metered_until = cursor()
    with contextlib.closing(state_db(plane)) as db:
        rows = db.execute(
            "SELECT * FROM capacity_history WHERE cluster_id = ? ORDER BY seq", (cluster_id,)
        ).fetchall()
    counts = [r["broker_count"] for r in rows]
    assert [c for i, c in enumerate(counts) if i == 0 or c != counts[i - 1]] == [1, 2, 1]
    assert {r["broker_type"] for r in rows} == {M7G}

    bootstrap = plane.process.get("metered").bootstrap_brokers
    contents: dict[bytes, set[bytes]] = {}
    for key, value in read_usage(bootstrap):
        if key.startswith(b"controlplane/"):
            contents.setdefault(key, set()).add(value)
    assert all(len(values) == 1 for values in contents.values()), "a bucket sent differently"
    events = sorted(
        (UsageEvent.decode(next(iter(v))) for v in contents.values()), key=lambda e: e.sequence
    )
    first = rows[0]["at_ms"] - rows[0]["at_ms"] % BUCKET_MS
    buckets = [e.sequence for e in events]
    assert buckets[0] == first
    assert len(buckets) >= 2, "the scale-out and the scale-in are in buckets of their own"
    assert buckets == list(range(first, buckets[-1] + BUCKET_MS, BUCKET_MS)), "a bucket missing"
    assert buckets[-1] >= metered_until - BUCKET_MS, "every acknowledged bucket is there"
    for event in events:
        assert (event.source, event.epoch, event.start_ms) == ("controlplane", 0, event.sequence)
        assert event.end_ms == event.start_ms + BUCKET_MS
        (usage,) = event.usage
        assert (usage.dimension, usage.resource) == (Dimension.BROKER_MS, M7G)
        assert usage.quantity == expected_broker_ms(rows, event.sequence), event

    # deleted: metered up to its end before its brokers went
    gone = cli(plane, "delete-cluster", "metered", "--yes", "--wait")
    assert gone.exit_code == 0, gone.stderr
    with contextlib.closing(state_db(plane)) as db:
        last = db.execute(
            "SELECT * FROM capacity_history WHERE cluster_id = ? ORDER BY seq DESC LIMIT 1",
            (cluster_id,),
        ).fetchone()
    assert (last["broker_count"], last["state"]) == (0, DELETED)
    assert cursor() == -(-last["at_ms"] // BUCKET_MS) * BUCKET_MS
