"""Transactions in the partition log: open transactions, markers, the aborted-transaction
index (``.txnindex``), the last stable offset, read_committed Fetch and ListOffsets.

Unit level on a PartitionLog in a temporary directory; the Fetch handler on an in-process
broker (markers written with ``append_marker``, as the coordinator's WriteTxnMarkers will);
and a broker process driven with raw requests and confluent-kafka consumers (no
coordinator exists there yet, so only an open transaction is shown).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import crc32c
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from dataplane.broker import Broker
from dataplane.cluster.topics import NewTopic
from dataplane.config import BrokerConfig
from dataplane.handlers import fetch
from dataplane.handlers.context import RequestContext
from dataplane.log.cleaner import LogCleaner
from dataplane.log.partition_log import PartitionLog
from dataplane.log.producer_state import ProducerStateTable
from dataplane.log.transactions import read_txn_index
from tests.conftest import BrokerProcess, unique
from tests.dataplane.test_log_partition import open_log, produce, read_all
from tests.support.raw_client import RawClient
from tests.support.records import fetch_request, partition_response, produce_request
from wire.client import BlockingConnection
from wire.errors import (
    InvalidProducerEpoch,
    InvalidTxnState,
    TransactionCoordinatorFenced,
)
from wire.record_batch import TRANSACTIONAL_BIT, decode_records, encode_batch, iter_headers
from wire.transactions import TXN_INDEX_ENTRY_SIZE, AbortedTxn, ControlType, decode_marker

ABORT, COMMIT = ControlType.ABORT, ControlType.COMMIT
NOW = int(time.time() * 1000)


# --------------------------------------------------------------------------- helpers


class Txn:
    """A producer writing transactional batches to one log (sequence numbers kept)."""

    def __init__(self, plog: PartitionLog, pid: int, epoch: int = 0) -> None:
        self.plog, self.pid, self.epoch, self.seq = plog, pid, epoch, 0

    def send(self, *keys: bytes, value: bytes = b"v") -> int:
        """Write one transactional batch; returns its base offset."""
        data = bytearray(txn_batch(self.pid, self.epoch, self.seq, keys, value=value))
        self.seq += len(keys)
        return self.plog.append(data, list(iter_headers(data))).base_offset

    def end(self, control: ControlType, coordinator_epoch: int = 0) -> int:
        return self.plog.append_marker(self.pid, self.epoch, control, coordinator_epoch).base_offset


def txn_batch(
    pid: int, epoch: int, seq: int, keys: tuple[bytes, ...], value: bytes = b"v"
) -> bytes:
    return encode_batch(
        [(k, value) for k in keys],
        timestamp_ms=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TRANSACTIONAL_BIT,
    )


def entries(plog: PartitionLog) -> list[list[AbortedTxn]]:
    return [list(s.aborted) for s in plog.segments]


def flat(lists: list[list[AbortedTxn]]) -> list[AbortedTxn]:
    return [e for sub in lists for e in sub]


def on_disk(plog: PartitionLog) -> list[list[AbortedTxn]]:
    return [read_txn_index(s.txn_index_path) for s in plog.segments]


def txn_state(plog: PartitionLog) -> tuple[Any, ...]:
    """What recovery must rebuild exactly."""
    producers = plog.producers.producers
    return (
        plog.log_end_offset,
        plog.last_stable_offset,
        dict(plog.producers.ongoing),
        {p: (e.epoch, e.txn_first_offset, e.coordinator_epoch) for p, e in producers.items()},
        entries(plog),
    )


# --------------------------------------------------------------------------- open / end


def test_commit_and_abort_move_the_lso_and_abort_is_indexed(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    produce(plog, [(b"plain", b"1")], timestamp_ms=NOW)
    p = Txn(plog, 7)
    first = p.send(b"a", b"b")
    p.send(b"c")
    assert plog.producers.ongoing == {7: first}
    assert plog.last_stable_offset == first == 1
    assert plog.high_watermark == 4
    commit = p.end(COMMIT, coordinator_epoch=3)
    assert plog.last_stable_offset == plog.high_watermark == commit + 1
    assert plog.producers.producers[7].coordinator_epoch == 3
    assert entries(plog) == [[]]
    second = p.send(b"d")
    assert plog.last_stable_offset == second
    abort = p.end(ABORT, coordinator_epoch=3)
    expected = AbortedTxn(7, second, abort, abort + 1)
    assert entries(plog) == on_disk(plog) == [[expected]]
    assert plog.last_stable_offset == plog.high_watermark
    # a marker with nothing open is written (as Kafka) but ends nothing and adds no entry
    lone = p.end(ABORT, coordinator_epoch=3)
    assert lone == abort + 1
    assert plog.log_end_offset == lone + 1
    assert entries(plog) == [[expected]]
    data = plog.read(abort, 1 << 20)
    markers = [decode_marker(data, h) for h in iter_headers(data) if h.is_control]
    assert [m.type for m in markers] == [ABORT, ABORT]
    assert plog.aborted_transactions(0, plog.high_watermark) == [(7, second)]


def test_two_interleaved_producers(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    p1, p2 = Txn(plog, 1), Txn(plog, 2)
    a = p1.send(b"a")
    b = p2.send(b"b")
    p1.send(b"a2")
    p2.send(b"b2")
    assert plog.last_stable_offset == a
    m1 = p1.end(ABORT)  # p2 is still open: the entry's LSO is p2's first offset
    assert plog.last_stable_offset == b
    p1_again = p1.send(b"a3")
    m2 = p2.end(COMMIT)
    assert plog.last_stable_offset == p1_again
    m3 = p1.end(ABORT)
    assert plog.last_stable_offset == plog.high_watermark == m3 + 1
    assert entries(plog) == [[AbortedTxn(1, a, m1, b), AbortedTxn(1, p1_again, m3, m3 + 1)]]
    assert m2 < m3


def test_lso_waits_for_the_marker_to_be_below_the_high_watermark(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.auto_high_watermark = False  # replication moves it
    p = Txn(plog, 5)
    first = p.send(b"x")
    marker = p.end(COMMIT)
    assert plog.high_watermark == 0  # never above the HW
    assert plog.last_stable_offset == 0
    plog.advance_high_watermark(marker)  # the data is replicated, the marker not yet
    assert plog.last_stable_offset == first
    plog.advance_high_watermark(marker + 1)
    assert plog.last_stable_offset == marker + 1
    assert plog.producers.unreplicated == []


def test_marker_epochs_and_fencing(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    p = Txn(plog, 9, epoch=2)
    p.send(b"a")
    with pytest.raises(InvalidProducerEpoch):
        plog.append_marker(9, 1, ABORT, 0)
    p.end(COMMIT, coordinator_epoch=4)
    with pytest.raises(TransactionCoordinatorFenced):
        plog.append_marker(9, 2, COMMIT, 3)
    end = plog.log_end_offset
    # a newer producer epoch (the coordinator fenced the producer) becomes the producer's
    plog.append_marker(9, 3, ABORT, 4)
    assert plog.producers.producers[9].epoch == 3
    with pytest.raises(InvalidProducerEpoch):
        Txn(plog, 9, epoch=2).send(b"zombie")
    assert plog.log_end_offset == end + 1  # nothing refused was written
    # a non-transactional batch while a transaction is open
    p = Txn(plog, 11)
    p.send(b"t")
    data = bytearray(
        encode_batch([(b"k", b"v")], producer_id=11, producer_epoch=0, base_sequence=1)
    )
    with pytest.raises(InvalidTxnState):
        plog.append(data, list(iter_headers(data)))


def test_aborted_transactions_over_ranges(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    p1, p2, p3 = Txn(plog, 1), Txn(plog, 2), Txn(plog, 3)
    a1 = p1.send(b"a")  # 0
    a2 = p2.send(b"b")  # 1
    m1 = p1.end(ABORT)  # 2
    produce(plog, [(b"plain", b"x")], timestamp_ms=NOW)  # 3
    c3 = p3.send(b"c")  # 4
    m3 = p3.end(COMMIT)  # 5
    m2 = p2.end(ABORT)  # 6
    b1 = p1.send(b"d")  # 7
    n1 = p1.end(ABORT)  # 8
    assert (a1, a2, m1, c3, m3, m2, b1, n1) == (0, 1, 2, 4, 5, 6, 7, 8)
    assert plog.aborted_transactions(0, 9) == [(1, 0), (2, 1), (1, 7)]
    assert plog.aborted_transactions(0, 1) == [(1, 0)]
    assert plog.aborted_transactions(3, 5) == [(2, 1)]  # p2 spans [1, 6]
    assert plog.aborted_transactions(7, 9) == [(1, 7)]
    assert plog.aborted_transactions(9, 9) == []


# --------------------------------------------------------------------------- files


def test_segments_keep_their_own_entries_and_retention_deletes_them(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=300)
    expected: list[AbortedTxn] = []
    for i in range(6):
        p = Txn(plog, 100 + i)
        first = p.send(b"k%d" % i, value=b"x" * 60)
        marker = p.end(ABORT if i % 2 == 0 else COMMIT)
        if i % 2 == 0:
            expected.append(AbortedTxn(100 + i, first, marker, marker + 1))
        plog.roll()
    assert len(plog.segments) == 7
    per_segment = entries(plog)
    assert per_segment == on_disk(plog)
    assert [e for seg in per_segment for e in seg] == expected
    for segment, seg_entries in zip(plog.segments, per_segment, strict=True):
        assert all(segment.base_offset <= e.last_offset < segment.next_offset for e in seg_entries)
        assert segment.txn_index_path.exists() == bool(seg_entries)
    assert plog.aborted_transactions(0, plog.high_watermark) == [
        (e.producer_id, e.first_offset) for e in expected
    ]
    doomed = plog.segments[0].txn_index_path
    plog.delete_records_before(plog.segments[1].base_offset)  # DeleteRecords
    assert not doomed.exists()
    assert plog.aborted_transactions(0, plog.high_watermark) == [
        (e.producer_id, e.first_offset) for e in expected[1:]
    ]
    # a year later retention.ms (7 days) has expired every segment
    assert plog.apply_retention(now_ms=NOW + 365 * 86_400_000) > 0
    assert not any(path.suffix == ".txnindex" for path in plog.directory.iterdir())
    assert plog.aborted_transactions(plog.log_start_offset, plog.high_watermark) == []


def build_history(plog: PartitionLog) -> None:
    """Aborted and committed transactions over several segments, two left open."""
    p1, p2, p3 = Txn(plog, 1, epoch=1), Txn(plog, 2), Txn(plog, 3)
    for round_ in range(4):
        p1.send(b"a%d" % round_, value=b"x" * 50)
        p2.send(b"b%d" % round_, value=b"x" * 50)
        p1.end(ABORT, coordinator_epoch=round_)
        p2.end(COMMIT if round_ % 2 else ABORT, coordinator_epoch=round_)
        produce(plog, [(b"plain%d" % round_, b"y" * 50)], timestamp_ms=NOW)
    p3.send(b"open-3")
    p1.send(b"open-1")
    p4 = Txn(plog, 4)  # an abort in the active segment, with two transactions open
    p4.send(b"d")
    p4.end(ABORT, coordinator_epoch=2)


@pytest.mark.parametrize("how", ["clean", "killed", "no-snapshot", "torn", "missing"])
def test_recovery_rebuilds_transactions_exactly(tmp_path: Path, how: str) -> None:
    plog = open_log(tmp_path, segment_bytes=600)
    build_history(plog)
    assert len(plog.segments) > 2
    before = txn_state(plog)
    assert before[1] < plog.high_watermark
    assert len(before[2]) == 2
    assert plog.active.aborted  # the last abort is in the active segment
    directory = plog.directory
    if how == "clean":
        plog.close_cleanly()
    else:
        plog.close()  # as after kill -9: no shutdown snapshot, active segment unsealed
    if how == "no-snapshot":
        for path in directory.glob("*.snapshot"):
            path.unlink()
    if how == "torn":  # a crash mid-append, or damage: a partial trailing entry
        for segment in plog.segments:
            if segment.aborted:
                with open(segment.txn_index_path, "ab") as f:
                    f.write(b"\x00" * 11)
    if how == "missing":  # the active segment's file lost with the page cache
        plog.active.txn_index_path.unlink()
    again = open_log(tmp_path, segment_bytes=600)
    after = txn_state(again)
    assert after == before
    assert on_disk(again) == after[4]
    for segment in again.segments:
        if segment.txn_index_path.exists():
            assert segment.txn_index_path.stat().st_size % TXN_INDEX_ENTRY_SIZE == 0
    # the open transactions still hold the LSO, and can still end
    Txn(again, 3).end(COMMIT, coordinator_epoch=9)
    assert again.last_stable_offset < again.high_watermark
    Txn(again, 1, epoch=1).end(COMMIT, coordinator_epoch=9)
    assert again.last_stable_offset == again.high_watermark
    again.close()


def replica_of(source: PartitionLog, directory: Path, end: int) -> PartitionLog:
    """A log holding ``source``'s batches below ``end``, copied as a follower copies."""
    copy = open_log(directory, segment_bytes=600)
    offset = source.log_start_offset
    while offset < end:
        data = source.read(offset, 1 << 20, upper=end)
        if not data:
            break
        offset = copy.append_replica(data).last_offset + 1
    return copy


def flat_state(plog: PartitionLog) -> tuple[Any, ...]:
    """``txn_state`` with the entries of all segments in one list (segments of a follower
    roll at other points)."""
    state = txn_state(plog)
    return (*state[:4], [e for seg in state[4] for e in seg])


def test_follower_rebuilds_the_same_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=600)
    build_history(leader)
    follower = replica_of(leader, tmp_path / "follower", leader.log_end_offset)
    assert flat_state(follower) == flat_state(leader)
    assert follower.aborted_transactions(0, follower.high_watermark) == (
        leader.aborted_transactions(0, leader.high_watermark)
    )


def test_truncation_rebuilds_what_a_shorter_log_has(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "log", segment_bytes=600)
    build_history(plog)
    p = Txn(plog, 3)
    first = plog.producers.ongoing[3]
    marker = p.end(ABORT, coordinator_epoch=5)
    assert plog.active.aborted[-1] == AbortedTxn(3, first, marker, plog.producers.ongoing[1])
    history = sorted(
        {e.last_offset for seg in entries(plog) for e in seg}
        | {e.first_offset for seg in entries(plog) for e in seg}
    )
    for i, cut in enumerate([marker, *reversed(history[1::3])]):
        reference = replica_of(plog, tmp_path / f"ref{i}", cut)
        plog.truncate_to(cut)
        assert flat_state(plog) == flat_state(reference), cut
        assert on_disk(plog) == entries(plog)
        reference.close()
    assert plog.last_stable_offset <= plog.high_watermark == plog.log_end_offset
    state = txn_state(plog)
    plog.close()
    again = open_log(tmp_path / "log", segment_bytes=600)
    assert txn_state(again) == state
    again.close()


def test_snapshot_version_1_still_loads() -> None:
    table = ProducerStateTable()
    data = bytearray(txn_batch(4, 0, 0, (b"a",)))
    header = next(iter_headers(data))
    table.record(header)
    v2 = table.snapshot()
    assert b'"version":2' in v2
    v1_body = b'{"version":1,"producers":[[4,0,5,[[0,0,0,0,1]]]]}'
    loaded = ProducerStateTable()
    assert loaded.load_snapshot(b"%08x\n" % crc32c.crc32c(v1_body) + v1_body)
    assert loaded.producers[4].txn_first_offset == -1
    assert loaded.ongoing == {}
    again = ProducerStateTable()
    assert again.load_snapshot(v2)
    assert again.ongoing == {4: 0}


# --------------------------------------------------------------------------- cleaner


async def test_cleaner_drops_aborted_records_and_stops_at_the_lso(tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "cleanup_policy": ["compact"],
        "segment_bytes": 400,
        "min_cleanable_dirty_ratio": 0.01,
    }
    plog = open_log(tmp_path, **settings)
    produce(plog, [(b"k", b"committed")], timestamp_ms=NOW)
    produce(plog, [(b"m", b"old")], timestamp_ms=NOW)
    p = Txn(plog, 1)
    p.send(b"k", value=b"aborted")  # must not shadow k=committed
    p.end(ABORT)
    p.send(b"m", value=b"new")  # a committed transactional record compacts m=old away
    p.end(COMMIT)
    q = Txn(plog, 2)
    q.send(b"j", value=b"aborted-only")
    q.end(ABORT)
    for i in range(10):
        produce(plog, [(b"f%d" % i, b"x" * 40)], timestamp_ms=NOW)
    r = Txn(plog, 3)
    open_first = r.send(b"k", value=b"open")  # above the LSO: must not shadow either
    for i in range(10):
        produce(plog, [(b"g%d" % i, b"x" * 40)], timestamp_ms=NOW)
    plog.roll()
    await plog.settle()
    indexed = flat(entries(plog))
    assert len(indexed) == 2
    assert plog.last_stable_offset == open_first
    unstable = [
        (s.base_offset, s.read_at(0, s.size)) for s in plog.segments if s.next_offset > open_first
    ]
    result = await LogCleaner().clean(plog, now_ms=NOW)
    assert result is not None
    kept = [(r.key, r.value) for r in read_all(plog)]
    assert (b"k", b"committed") in kept
    assert (b"m", b"new") in kept
    assert (b"k", b"aborted") not in kept
    assert (b"j", b"aborted-only") not in kept
    assert (b"m", b"old") not in kept
    assert (b"k", b"open") in kept
    assert unstable == [
        (s.base_offset, s.read_at(0, s.size)) for s in plog.segments if s.next_offset > open_first
    ]
    controls = [h for s in plog.segments for _, h in s.iter_batches() if h.is_control]
    assert len(controls) == 3  # markers stay
    assert flat(entries(plog)) == indexed == flat(on_disk(plog))
    plog.close()
    again = open_log(tmp_path, **settings)
    assert flat(entries(again)) == indexed
    assert [(r.key, r.value) for r in read_all(again)] == kept
    again.close()


# --------------------------------------------------------------------------- Fetch in-process

TOPIC = "txn"
BOUND = 30.0


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = BrokerConfig.build(data_dir=str(tmp_path / "data"), listen="127.0.0.1:0")
    started = Broker(config)
    await started.start()
    try:
        assert await started.cluster.create_topic(NewTopic(TOPIC, 1))
        assert await started.await_topic(TOPIC) is not None
        for _ in range(1_000):
            part = started.replicas.partitions.get((TOPIC, 0))
            if part is not None and part.is_leader:
                break
            await asyncio.sleep(0.01)
        yield started
    finally:
        await started.stop()


def committed_fetch(broker: Broker, offset: int, wait_ms: int = 0) -> Any:
    request: Any = dataclasses.replace(
        fetch_request(TOPIC, offset, max_wait_ms=wait_ms), isolation_level=i8(1)
    )
    return fetch.handle(RequestContext(broker, fetch.API_KEY, 12, 0, "test"), request)


async def test_read_committed_fetch_waits_for_the_lso_and_lists_aborts(broker: Broker) -> None:
    part = broker.replicas.leader(TOPIC, 0)
    plog = part.plog
    produce(plog, [(b"before", b"1")], timestamp_ms=NOW)
    p = Txn(plog, 42)
    first = p.send(b"a", b"b")
    part.maybe_advance_high_watermark()
    answer = committed_fetch(broker, 0)
    assert not asyncio.iscoroutine(answer)
    got = partition_response(answer)
    assert [r.key for r in decode_records(bytes(got.records))] == [b"before"]
    assert got.last_stable_offset == first
    assert got.high_watermark == first + 2
    assert got.aborted_transactions == ()
    task = asyncio.ensure_future(committed_fetch(broker, first, wait_ms=600_000))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done()
    marker = p.end(ABORT, coordinator_epoch=1)
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done(), "the marker is not below the high watermark yet"
    part.maybe_advance_high_watermark()  # the LSO moves: the long poll answers
    got = partition_response(await asyncio.wait_for(task, BOUND))
    assert got.last_stable_offset == marker + 1 == got.high_watermark
    assert [(a.producer_id, a.first_offset) for a in got.aborted_transactions] == [(42, first)]
    served = list(iter_headers(bytes(got.records)))
    assert served[0].base_offset == first
    assert served[-1].is_control
    # read_uncommitted: no aborted list (null), the LSO still reported
    uncommitted: Any = fetch_request(TOPIC, first)
    plain = fetch.handle(RequestContext(broker, fetch.API_KEY, 12, 0, "test"), uncommitted)
    assert partition_response(plain).aborted_transactions is None


# --------------------------------------------------------------------------- a broker process


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("txnlog") / "data", {"auto.create.topics.enable": "true"}
    ).start()
    yield proc
    proc.stop()
    proc.kill()


def init_producer_id(client: BlockingConnection) -> tuple[int, int]:
    answer = client.request(
        InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=datetime.timedelta(seconds=60),  # type: ignore[arg-type]
            producer_id=-1,  # type: ignore[arg-type]
            producer_epoch=-1,  # type: ignore[arg-type]
        )
    )
    assert answer.error_code == ErrorCode.none
    return int(answer.producer_id), int(answer.producer_epoch)


def latest(client: BlockingConnection, topic: str, isolation: int) -> int:
    response = client.request(
        ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(isolation),
            topics=(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=(
                        ListOffsetsPartition(
                            partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(-1)
                        ),
                    ),
                ),
            ),
        )
    )
    part = response.topics[0].partitions[0]
    assert part.error_code == ErrorCode.none
    return int(part.offset)


def raw_fetch(client: BlockingConnection, topic: str, offset: int, isolation: int) -> Any:
    request = dataclasses.replace(fetch_request(topic, offset), isolation_level=i8(isolation))
    return partition_response(client.request(request))


def consume_until_eof(bootstrap: str, topic: str, isolation: str) -> tuple[list[bytes], int]:
    """Values read from the start until librdkafka reports the partition's end, and the
    offset it reports it at (read_committed: the LSO)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("txn-reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is None:
                values.append(msg.value() or b"")
            elif error.code() == KafkaError._PARTITION_EOF:
                return values, int(msg.offset() or 0)
            else:
                raise AssertionError(error)
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition reached; read {values}")


def test_an_open_transaction_holds_back_read_committed_readers(txn_broker: BrokerProcess) -> None:
    topic = unique("txn-open")
    with RawClient(txn_broker.bootstrap) as client:
        plain = encode_batch([(b"k", b"before")], timestamp_ms=NOW)
        assert partition_response(client.request(produce_request(topic, plain))).error_code == (
            ErrorCode.none
        )
        pid, epoch = init_producer_id(client)
        batch = txn_batch(pid, epoch, 0, (b"t1", b"t2"), value=b"in-txn")
        sent = partition_response(client.request(produce_request(topic, batch)))
        assert sent.error_code == ErrorCode.none
        first = int(sent.base_offset)
        after = encode_batch([(b"k", b"after")], timestamp_ms=NOW)
        client.request(produce_request(topic, after))
        committed = raw_fetch(client, topic, 0, isolation=1)
        assert committed.last_stable_offset == first == 1
        assert committed.high_watermark == 4
        assert [r.value for r in decode_records(bytes(committed.records))] == [b"before"]
        assert committed.aborted_transactions == ()
        at_lso = raw_fetch(client, topic, first, isolation=1)
        assert not at_lso.records
        assert at_lso.error_code == ErrorCode.none
        uncommitted = raw_fetch(client, topic, first, isolation=0)
        assert [r.value for r in decode_records(bytes(uncommitted.records))][:2] == [
            b"in-txn",
            b"in-txn",
        ]
        assert uncommitted.aborted_transactions is None
        assert uncommitted.last_stable_offset == first
        assert latest(client, topic, isolation=1) == first
        assert latest(client, topic, isolation=0) == 4
    values, eof = consume_until_eof(txn_broker.bootstrap, topic, "read_committed")
    assert values == [b"before"]
    assert eof == first
    values, eof = consume_until_eof(txn_broker.bootstrap, topic, "read_uncommitted")
    assert values == [b"before", b"in-txn", b"in-txn", b"after"]
    assert eof == 4
    # kill -9 and restart: the open transaction is rebuilt from the log
    txn_broker.kill()
    txn_broker.start()
    with RawClient(txn_broker.bootstrap) as client:
        deadline = time.monotonic() + 30
        while True:
            got = raw_fetch(client, topic, 0, isolation=1)
            if got.error_code == ErrorCode.none or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert got.error_code == ErrorCode.none
        assert got.last_stable_offset == first
        assert latest(client, topic, isolation=1) == first
