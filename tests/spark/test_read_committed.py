"""format("sluice") and transactions, with real local Spark against a broker with tiered
storage: a partition holding committed, aborted and open transactions and plain records,
most of it only in the object store. With ``kafka.isolation.level=read_committed`` Spark
returns exactly the committed and plain records below the last stable offset (tiered
splits drop aborted records with their segment's ``.txnindex`` object, the hot split's
consumer reads committed); by default (read_uncommitted, as Spark's Kafka source) every
data record up to the high watermark. A control batch is never a row."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from spark.options import OptionError, read_options
from spark.planning import HotSplit, TieredSplit, plan
from spark.records import AbortedRanges, Columns, decode_into
from spark.remote_log import describe_remote_log
from tests.conftest import unique
from tests.spark.conftest import create_topic, s3_options
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tests.support.txn_workload import (
    History,
    expected_committed,
    last_stable_offset,
    read_partition,
    write_history,
)
from tiered.embedded_s3 import EmbeddedS3
from wire.record_batch import TRANSACTIONAL_BIT, encode_batch
from wire.transactions import AbortedTxn, ControlType, encode_marker


@dataclass(frozen=True)
class Written:
    topic: str
    history: History
    uncommitted: list[tuple[int, bytes]]
    high_watermark: int
    lso: int


@pytest.fixture(scope="module")
def written(broker: BrokerProcess) -> Iterator[Written]:
    topic = unique("spark-txn")
    create_topic(broker, topic, partitions=1)
    history, opener = write_history(broker.bootstrap, topic)
    try:
        uncommitted, high = read_partition(broker.bootstrap, topic, "read_uncommitted")
        lso = last_stable_offset(uncommitted, history)

        def tiered() -> bool:
            part = describe_remote_log(broker.bootstrap, [topic]).of(topic, 0)
            logs = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
            first_local = int(logs[0].name.split(".")[0]) if logs else 0
            return part is not None and bool(part.segments) and first_local > lso // 2

        wait_for(tiered, 120, "most of the history tiered", interval=0.3)
        yield Written(topic, history, uncommitted, high, lso)
    finally:
        with contextlib.suppress(Exception):
            opener.abort_transaction(10)


def options(broker: BrokerProcess, s3: EmbeddedS3, topic: str, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": topic,
        **s3_options(s3),
        **extra,
    }


def rows(session: Any, opts: dict[str, str]) -> list[tuple[int, bytes]]:
    df = session.read.format("sluice").options(**opts).load()
    return sorted((r["offset"], bytes(r["value"])) for r in df.select("offset", "value").collect())


def test_read_committed_plans_to_the_lso_from_the_object_store(
    broker: BrokerProcess, s3: EmbeddedS3, written: Written
) -> None:
    committed = read_options(
        options(broker, s3, written.topic, **{"kafka.isolation.level": "read_committed"}),
        streaming=False,
    )
    assert committed.read_committed
    splits = plan(committed).splits
    tiered = [s for s in splits if isinstance(s, TieredSplit)]
    hot = [s for s in splits if isinstance(s, HotSplit)]
    assert sum(s.end - s.start for s in tiered) > written.lso // 2
    assert any(s.txn_index_bytes > 0 and s.txn_index_key.endswith(".txnindex") for s in tiered)
    assert max(s.end for s in splits) == written.lso, "latest is the last stable offset"
    assert hot
    assert hot[-1].end == written.lso

    default = read_options(options(broker, s3, written.topic), streaming=False)
    assert not default.read_committed, "read_uncommitted by default, as Spark's"
    assert max(s.end for s in plan(default).splits) == written.high_watermark
    with pytest.raises(OptionError, match="read_committed"):
        read_options(
            options(broker, s3, written.topic, **{"kafka.isolation.level": "committed"}),
            streaming=False,
        )


def test_read_committed_rows_are_exactly_the_committed_records(
    session: Any, broker: BrokerProcess, s3: EmbeddedS3, written: Written
) -> None:
    expected = expected_committed(written.uncommitted, written.history)
    assert len(expected) == len(written.history.plain) + len(written.history.committed)
    got = rows(
        session,
        options(broker, s3, written.topic, **{"kafka.isolation.level": "read_committed"}),
    )
    assert got == expected


def test_read_uncommitted_rows_are_every_data_record_and_no_control_batch(
    session: Any, broker: BrokerProcess, s3: EmbeddedS3, written: Written
) -> None:
    got = rows(session, options(broker, s3, written.topic))
    assert got == written.uncommitted
    assert {v for _, v in got} == written.history.all()
    # offsets without a data record are the transaction markers' (nothing is compacted)
    markers = set(range(written.high_watermark)) - {o for o, _ in written.uncommitted}
    assert len(markers) >= 2 * 8, "a COMMIT and an ABORT marker per round"
    assert not markers & {o for o, _ in got}


def test_aborted_ranges_drop_aborted_batches_and_markers_wherever_a_read_starts() -> None:
    # producer 7 aborts [0, 4) (marker at 4) and commits [5, 6) (marker at 6); producer 9's
    # batch at 2 is plain; producer 8's transaction at 3 commits later (no entry)
    batches = {
        0: encode_batch(
            [(None, b"a0"), (None, b"a1")], producer_id=7, attributes=TRANSACTIONAL_BIT
        ),
        2: encode_batch([(None, b"p2")], base_offset=2, producer_id=9),
        3: encode_batch(
            [(None, b"c3")], base_offset=3, producer_id=8, attributes=TRANSACTIONAL_BIT
        ),
        4: encode_marker(7, 0, ControlType.ABORT, 0, timestamp_ms=0, base_offset=4),
        5: encode_batch(
            [(None, b"c5")], base_offset=5, producer_id=7, attributes=TRANSACTIONAL_BIT
        ),
        6: encode_marker(7, 0, ControlType.COMMIT, 0, timestamp_ms=0, base_offset=6),
    }
    aborted = AbortedRanges([AbortedTxn(7, 0, 4, 5)])
    assert len(aborted) == 1
    for start in range(7):
        committed = Columns("t", 0, False)
        everything = Columns("t", 0, False)
        for batch in batches.values():  # decode_into skips records below ``start``
            decode_into(committed, batch, start, 7, aborted=aborted)
            decode_into(everything, batch, start, 7)
        assert offsets(committed) == [o for o in (2, 3, 5) if o >= start], start
        assert offsets(everything) == [o for o in (0, 1, 2, 3, 5) if o >= start], start


def offsets(columns: Columns) -> list[int]:
    return columns.flush().column("offset").to_pylist()
