"""A broker's partition logs are opened (and recovered) in threads while it registers.

A broker killed mid-write scans and checks the active segment of every partition it holds
when it opens them again. The soak's restarted brokers did that one partition at a time on
the event loop, after their registration: a median 0.2-0.7 s of their start. As Kafka's
LogManager, ``LogManager.load`` opens them in ``num.recovery.threads.per.data.dir``
threads, and the broker calls it before it registers, so the two overlap.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from dataplane.cluster import records
from dataplane.cluster.image import MetadataImage
from dataplane.config import BrokerConfig
from dataplane.log.manager import LogManager
from dataplane.log.segment import segment_name
from tests.dataplane.test_log_partition import fill, read_all

TOPICS = ("a", "b")


def image(*topics: str) -> MetadataImage:
    metadata = MetadataImage(node_id=1, cluster_id="loading-test")
    entries: list[object] = []
    for name in topics:
        topic_id = records.new_topic_id()
        entries.append(records.Topic(name, topic_id, {"segment.bytes": "2000"}))
        entries += [records.Partition(topic_id, p, [1], [1], 1, 0, 0) for p in range(2)]
    metadata.apply(1, records.encode(entries))
    return metadata


def manager(tmp_path: Path, metadata: MetadataImage, threads: int = 2) -> LogManager:
    config = BrokerConfig.build(
        data_dir=str(tmp_path),
        listen="127.0.0.1:0",
        overrides={"num.recovery.threads.per.data.dir": str(threads)},
    )
    return LogManager(config, metadata)


async def written_then_killed(
    tmp_path: Path, metadata: MetadataImage
) -> dict[tuple[str, int], int]:
    """Fill every partition, then leave its logs as a kill -9 would (never closed, so no
    clean-shutdown index), with a torn batch at the end of each active segment."""
    before = manager(tmp_path, metadata)
    ends = {}
    for topic in TOPICS:
        for partition in range(2):
            plog = before.open_partition(topic, partition)
            fill(plog, 50 + partition)
            await plog.settle()  # the rolled segments' seals, in their threads
            active = plog.segments[-1]
            ends[(topic, partition)] = plog.log_end_offset
            torn = active.path.read_bytes() + b"\x00" * 7 + b"\x07\x00\x00\x01\x00half a batch"
            active.path.write_bytes(torn)
    return ends


async def test_the_logs_load_in_threads_and_recover_as_when_opened_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metadata = image(*TOPICS)
    ends = await written_then_killed(tmp_path, metadata)
    threads: set[str] = set()
    load = LogManager._load

    def watched(self: LogManager, topic: str, partition: int) -> object:
        threads.add(threading.current_thread().name)
        return load(self, topic, partition)

    monkeypatch.setattr(LogManager, "_load", watched)
    after = manager(tmp_path, metadata)
    keys = [*ends, ("a", 7)]  # a partition without a directory here is skipped
    await after.load(keys)
    assert set(after.logs) == set(ends)
    assert threads
    assert all(name.startswith("log-recovery") for name in threads)
    for key, end in ends.items():
        plog = after.open_partition(*key)  # the loaded log, not a second one
        assert plog is after.logs[key]
        assert plog.log_end_offset == end  # the torn batch was cut off
        assert [r.offset for r in read_all(plog)] == list(range(end))
    after.close()


async def test_a_log_being_loaded_is_not_opened_twice(tmp_path: Path) -> None:
    metadata = image(*TOPICS)
    await written_then_killed(tmp_path, metadata)
    after = manager(tmp_path, metadata, threads=1)
    loading = asyncio.ensure_future(after.load([("a", 0), ("a", 1)]))
    await asyncio.sleep(0)  # the load has begun: both are in its hands
    with pytest.raises(RuntimeError, match="being loaded"):
        after.open_partition("a", 1)
    await loading
    assert after.open_partition("a", 1) is after.logs[("a", 1)]
    after.close()


async def test_a_log_that_cannot_load_is_left_to_open_partition(tmp_path: Path) -> None:
    """A load that fails is logged and leaves the partition unopened: ``open_partition``
    then raises the same error where the replica role is taken (logged, retried). A
    topic deleted while its logs loaded is closed, not kept."""
    metadata = image(*TOPICS)
    await written_then_killed(tmp_path, metadata)
    broken = tmp_path / "a-0" / segment_name(0, ".log")
    broken.unlink()
    broken.mkdir()  # a segment file that cannot be read
    after = manager(tmp_path, metadata)
    await after.load([("a", 0), ("b", 0)])
    assert ("a", 0) not in after.logs
    assert ("b", 0) in after.logs
    with pytest.raises(OSError):
        after.open_partition("a", 0)
    after.close()

    gone = manager(tmp_path, image("a"))  # topic b deleted while the broker was down
    await gone.load([("a", 1), ("b", 1)])
    assert set(gone.logs) == {("a", 1)}
    gone.close()
