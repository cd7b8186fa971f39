"""Transactions on tiered storage, all real processes (a broker over the embedded S3
server, confluent-kafka transactional producers and consumers, kcat): a segment is
uploaded only once wholly below the last stable offset, with a ``.txnindex`` object listing
every aborted transaction overlapping it; a read_committed consumer reading from offset 0,
most of it only in the object store, sees exactly the committed and plain records below
the LSO (read_uncommitted: every data record), before and after a broker restart; deleting
the topic deletes the objects."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from controlplane.kafka import Admin
from tests.conftest import unique
from tests.support.broker import BrokerProcess
from tests.support.cluster_workload import wait_for
from tests.support.tiering import TOPIC_CONFIG, broker_settings
from tests.support.txn_workload import (
    ABORT,
    History,
    expected_committed,
    last_stable_offset,
    read_partition,
    write_history,
)
from tiered.config import ObjectStoreSettings
from tiered.embedded_s3 import EmbeddedS3
from tiered.layout import TXN_INDEX, parse_key, segment_keys
from tiered.object_store import S3ObjectStore
from tiered.remote_segment import RemoteSegment
from tiered.segment_upload import SegmentFiles, delete_segment, upload_segment
from wire.transactions import AbortedTxn, encode_txn_index, parse_txn_index

BUCKET = "tiered-txn"


@pytest.fixture(scope="module")
def broker(s3: EmbeddedS3, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("tiered-txn") / "data", broker_settings(s3.endpoint, BUCKET)
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        proc.kill()


def bucket(s3: EmbeddedS3) -> S3ObjectStore:
    return S3ObjectStore(
        ObjectStoreSettings(
            endpoint=s3.endpoint, bucket=BUCKET, access_key_id="test", secret_access_key="test"
        )
    )


def describe_remote(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    host, port = broker.bootstrap.split(":")
    return asyncio.run(Admin(host, int(port), 10).describe_remote_log([topic]))


def remote_segments(broker: BrokerProcess, topic: str) -> tuple[str, list[RemoteSegment]]:
    """The cluster id and the partition's readable segments, by base offset."""
    doc = describe_remote(broker, topic)
    part = doc["topics"].get(topic, {}).get("partitions", {}).get("0", {})
    segments = [
        RemoteSegment.from_dict(s)
        for s in part.get("segments", [])
        if s["state"] == "copy_finished"
    ]
    return doc["cluster_id"], sorted(segments, key=lambda s: s.base_offset)


def local_bases(broker: BrokerProcess, topic: str) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (broker.data_dir / f"{topic}-0").glob("*.log"))


@dataclass
class Written:
    topic: str
    history: History
    opener: Producer
    uncommitted: list[tuple[int, bytes]]
    """Every record at its offset (read_uncommitted, read once the history was written)."""
    lso: int


@pytest.fixture(scope="module")
def written(broker: BrokerProcess) -> Iterator[Written]:
    topic = unique("tiered-txn")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIG)])[topic].result(30)
    history, opener = write_history(broker.bootstrap, topic)
    try:
        uncommitted, _ = read_partition(broker.bootstrap, topic, "read_uncommitted")
        lso = last_stable_offset(uncommitted, history)

        def settled() -> bool:
            # every segment wholly below the LSO uploaded and deleted locally: the first
            # local segment is the one holding the LSO, and the remote tier ends at it (or
            # an upload went past the LSO: the first test says so)
            bases = local_bases(broker, topic)
            _, segments = remote_segments(broker, topic)
            return bool(segments) and (
                segments[-1].end_offset >= lso
                or (
                    len([b for b in bases if b <= lso]) == 1
                    and segments[-1].end_offset + 1 == bases[0]
                )
            )

        wait_for(settled, 120, "the history below the LSO tiered", interval=0.3)
        yield Written(topic, history, opener, uncommitted, lso)
    finally:
        with contextlib.suppress(Exception):
            opener.abort_transaction(10)


def test_segments_below_the_lso_carry_every_aborted_transaction_overlapping_them(
    broker: BrokerProcess, s3: EmbeddedS3, written: Written
) -> None:
    cluster_id, segments = remote_segments(broker, written.topic)
    lso = written.lso
    assert segments[-1].end_offset < lso, "nothing at or above the LSO is uploaded"
    assert local_bases(broker, written.topic)[0] > lso // 2, "most of it is only remote"

    store = bucket(s3)
    aborted_offsets = [o for o, v in written.uncommitted if v.startswith(ABORT)]
    later_markers = 0
    with_index = 0
    producers: set[int] = set()
    for segment in segments:
        key = segment_keys(cluster_id, segment).txn_index
        if segment.txn_index_bytes == 0:
            assert not store.exists(key)
            entries: list[AbortedTxn] = []
        else:
            with_index += 1
            raw = store.get(key)
            assert len(raw) == segment.txn_index_bytes
            entries = parse_txn_index(raw)
        assert all(
            e.last_offset >= segment.base_offset and e.first_offset <= segment.end_offset
            for e in entries
        ), "only transactions overlapping the segment"
        later_markers += sum(e.last_offset > segment.end_offset for e in entries)
        producers |= {e.producer_id for e in entries}

        def covered(offset: int, entries: list[AbortedTxn] = entries) -> bool:
            return any(e.first_offset <= offset < e.last_offset for e in entries)

        inside = range(segment.base_offset, segment.end_offset + 1)
        missing = [o for o in aborted_offsets if o in inside and not covered(o)]
        assert not missing, f"aborted records of {segment.base_offset} not in its .txnindex"
    assert len(producers) == 1, "only the aborting producer's transactions"
    assert with_index >= 4
    assert later_markers > 0, "some aborted transaction's marker is in a later segment"


def test_read_committed_from_offset_zero_sees_exactly_the_committed_records(
    broker: BrokerProcess, written: Written
) -> None:
    assert_reads(broker, written)


def assert_reads(broker: BrokerProcess, written: Written) -> None:
    expected = expected_committed(written.uncommitted, written.history)
    assert len(expected) == len(written.history.plain) + len(written.history.committed)
    committed, end = read_partition(broker.bootstrap, written.topic, "read_committed")
    assert end == written.lso
    assert committed == expected

    uncommitted, end = read_partition(broker.bootstrap, written.topic, "read_uncommitted")
    assert uncommitted == written.uncommitted
    assert {v for _, v in uncommitted} == written.history.all()
    assert len(uncommitted) == len(written.history.all())

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("lso"),
            "isolation.level": "read_committed",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(written.topic, 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (0, written.lso), "ListOffsets latest with read_committed: the LSO"


def test_kcat_read_committed(broker: BrokerProcess, written: Written) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (tools/ensure-system-deps.sh installs it)")
    out = subprocess.run(
        [
            kcat,
            "-b",
            broker.bootstrap,
            "-C",
            "-t",
            written.topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-X",
            "isolation.level=read_committed",
            "-f",
            "%o\n",
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    offsets = [int(x) for x in out.stdout.decode().split()]
    assert offsets == [o for o, _ in expected_committed(written.uncommitted, written.history)]


def test_a_broker_restart_keeps_it(broker: BrokerProcess, written: Written) -> None:
    broker.restart()
    assert_reads(broker, written)


def test_deleting_the_topic_deletes_the_transaction_indexes(
    broker: BrokerProcess, s3: EmbeddedS3, written: Written
) -> None:
    store = bucket(s3)
    topic_id = describe_remote(broker, written.topic)["topics"][written.topic]["topic_id"]

    def objects() -> list[str]:
        return [i.key for i in store.list("") if f"{written.topic}-{topic_id}/" in i.key]

    assert [k for k in objects() if k.endswith(TXN_INDEX)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([written.topic])[written.topic].result(30)
    wait_for(lambda: not objects(), 60, "the topic's objects deleted")


def test_upload_and_delete_carry_the_transaction_index(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    log = tmp_path / "seg.log"
    log.write_bytes(os.urandom(3000))
    entries = [AbortedTxn(7, 90, 130, 131), AbortedTxn(8, 110, 150, 151)]
    txn_index = encode_txn_index(entries)
    segment = RemoteSegment(
        topic="t",
        topic_id="0b6cf6d4-5b8e-4a34-9d6b-5f1a3e0c2d11",
        partition=0,
        segment_id=os.urandom(16).hex(),
        base_offset=100,
        end_offset=140,
        max_timestamp=-1,
        size_bytes=3000,
        index_bytes=1,
        leader_epoch=0,
        epochs=((0, 100),),
        broker_id=1,
        created_ms=1,
        txn_index_bytes=len(txn_index),
    )
    assert RemoteSegment.from_dict(segment.to_dict()) == segment
    older = {k: v for k, v in segment.to_dict().items() if k != "txn_index_bytes"}
    assert RemoteSegment.from_dict(older).txn_index_bytes == 0, "a record from before: none"
    files = SegmentFiles(log, b"i", b"0\n0\n", None, txn_index)
    with pytest.raises(ValueError, match="transaction index bytes"):
        upload_segment(store, "c", dataclasses.replace(segment, txn_index_bytes=0), files)
    assert not list(store.list("c/")), "a refused record puts nothing"
    upload_segment(store, "c", segment, files)
    keys = segment_keys("c", segment)
    assert parse_txn_index(store.get(keys.txn_index)) == entries
    parsed = parse_key(keys.txn_index)
    assert parsed is not None
    assert parsed.suffix == TXN_INDEX
    assert sorted(i.key for i in store.list("c/")) == sorted(
        [keys.log, keys.index, keys.epochs, keys.txn_index]
    )
    delete_segment(store, "c", segment)
    assert not list(store.list("c/"))
