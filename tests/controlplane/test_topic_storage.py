"""Per-topic storage and the orphan finder's judgement, from DescribeRemoteLog documents and
listings (no processes: the pure functions of controlplane/topics.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from controlplane.topics import (
    DELETED_TOPIC,
    UNKNOWN_SEGMENT,
    UNPARSEABLE,
    PartitionStorage,
    find_orphans,
    hot_bytes,
    tiered_storage,
)
from tiered.layout import SUFFIXES
from tiered.object_store import ObjectInfo

CLUSTER = "c0ffee"
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(hours=1)
ORDERS_ID = str(uuid.UUID(int=1))
GONE_ID = str(uuid.UUID(int=2))
DOOMED_ID = str(uuid.UUID(int=3))


def segment(
    base: int, end: int, state: str = "copy_finished", *, partition: int = 0, size: int = 1000
) -> dict[str, Any]:
    return {
        "topic": "orders",
        "topic_id": ORDERS_ID,
        "partition": partition,
        "segment_id": uuid.uuid4().hex,
        "base_offset": base,
        "end_offset": end,
        "max_timestamp": 0,
        "size_bytes": size,
        "index_bytes": 10,
        "leader_epoch": 0,
        "epochs": [[0, base]],
        "broker_id": 0,
        "created_ms": 0,
        "state": state,
    }


def document(partitions: dict[int, tuple[int, list[dict[str, Any]]]]) -> dict[str, Any]:
    return {
        "version": 1,
        "cluster_id": CLUSTER,
        "topics": {
            "orders": {
                "topic_id": ORDERS_ID,
                "partitions": {
                    str(p): {"log_start_offset": start, "segments": segs}
                    for p, (start, segs) in partitions.items()
                },
            }
        },
        "pending_topic_deletions": [{"topic": "doomed", "topic_id": DOOMED_ID}],
    }


def key_of(seg: dict[str, Any], suffix: str = ".log") -> str:
    return (
        f"{CLUSTER}/{seg['topic']}-{seg['topic_id']}/{seg['partition']}/"
        f"{seg['base_offset']:020d}-{seg['segment_id']}{suffix}"
    )


def obj(key: str, when: datetime | None = OLD, size: int = 7) -> ObjectInfo:
    return ObjectInfo(key=key, size=size, etag="e", last_modified=when)


def test_tiered_storage_counts_readable_segments_and_the_remote_log_start() -> None:
    doc = document(
        {
            0: (-1, [segment(0, 99), segment(100, 199), segment(200, 299, "copy_started")]),
            1: (150, [segment(100, 199, partition=1), segment(200, 249, partition=1)]),
            2: (-1, [segment(0, 9, "delete_started", partition=2)]),
        }
    )
    storage = tiered_storage(doc, "orders")
    assert storage[0] == PartitionStorage(0, 2000, 2)
    assert storage[1] == PartitionStorage(150, 2000, 2), "a later log start (retention) wins"
    assert storage[2] == PartitionStorage(-1, 0, 0), "only copy_finished segments are readable"
    assert tiered_storage(doc, "other") == {}


def test_hot_bytes_sums_log_files_of_every_replica(tmp_path: Path) -> None:
    brokers = [tmp_path / "broker-0", tmp_path / "broker-1", tmp_path / "broker-2"]
    for data_dir, sizes in zip(brokers[:2], ([100, 50], [100]), strict=True):
        part = data_dir / "orders-0"
        part.mkdir(parents=True)
        for i, size in enumerate(sizes):
            (part / f"{i:020d}.log").write_bytes(b"x" * size)
            (part / f"{i:020d}.index").write_bytes(b"i" * 1000)  # indexes are not counted
    (brokers[0] / "orders-1").mkdir()
    (brokers[0] / "orders-1" / f"{0:020d}.log").write_bytes(b"x" * 7)
    (brokers[0] / "orders-eu-0").mkdir()  # another topic whose name starts alike
    (brokers[0] / "orders-eu-0" / f"{0:020d}.log").write_bytes(b"x" * 1000)
    # broker-2 has no data directory at all (it never started)
    assert hot_bytes(brokers, {"orders": 2, "orders-eu": 1, "empty": 3}) == {
        "orders": 257,
        "orders-eu": 1000,
        "empty": 0,
    }


def test_every_object_a_record_names_is_kept_whatever_the_state() -> None:
    segs = [segment(0, 99), segment(100, 199, "copy_started"), segment(200, 299, "delete_started")]
    doc = document({0: (-1, segs)})
    listed = [obj(key_of(s, suffix)) for s in segs for suffix in SUFFIXES]
    report = find_orphans(listed, doc, NOW)
    assert report.orphans == []
    assert report.scanned == 12
    assert report.too_young == 0


def test_orphans_and_their_reasons() -> None:
    kept = segment(0, 99)
    doc = document({0: (-1, [kept])})
    stray = dict(kept, segment_id=uuid.uuid4().hex)  # a dead leader's upload
    elsewhere = dict(kept, partition=1)  # a known segment id under another partition
    gone = dict(kept, topic="gone", topic_id=GONE_ID)  # a topic deleted and cleaned up
    doomed = dict(kept, topic="doomed", topic_id=DOOMED_ID)  # its cleanup is under way
    listed = [
        obj(key_of(kept)),
        obj(key_of(stray), size=11),
        obj(key_of(stray, ".index"), size=3),
        obj(key_of(elsewhere)),
        obj(key_of(gone)),
        obj(key_of(doomed)),
        obj(f"{CLUSTER}/notes.txt", size=1),
        obj(key_of(kept) + ".tmp", size=2),
        obj(f"{CLUSTER}/x", when=None),  # a store that gives no time: judged
    ]
    report = find_orphans(listed, doc, NOW)
    assert [(o.key, o.reason) for o in report.orphans] == [
        (key_of(stray), UNKNOWN_SEGMENT),
        (key_of(stray, ".index"), UNKNOWN_SEGMENT),
        (key_of(elsewhere), UNKNOWN_SEGMENT),
        (key_of(gone), DELETED_TOPIC),
        (f"{CLUSTER}/notes.txt", UNPARSEABLE),
        (key_of(kept) + ".tmp", UNPARSEABLE),
        (f"{CLUSTER}/x", UNPARSEABLE),
    ]
    assert report.total_bytes == 11 + 3 + 7 + 7 + 1 + 2 + 7
    assert report.orphans[0].last_modified == OLD


def test_objects_younger_than_the_cutoff_are_left_out_and_counted() -> None:
    doc = document({0: (-1, [])})
    stray = segment(0, 99)
    listed = [
        obj(key_of(stray), when=NOW + timedelta(seconds=1)),
        obj(f"{CLUSTER}/notes.txt", when=NOW + timedelta(seconds=1)),
        obj(f"{CLUSTER}/old.txt", when=NOW),
    ]
    report = find_orphans(listed, doc, NOW)
    assert [o.key for o in report.orphans] == [f"{CLUSTER}/old.txt"]
    assert report.too_young == 2
