"""The guests' log lines of a transform (Transforms.TransformLogs), read from the logs topic
the brokers write, ``_sluice.transform_logs``: one partition; each record's key is the
transform's name, its value ``{"transform", "partition", "stream", "text"}`` (JSON) and its
timestamp when the broker wrote it.

Read with Fetch at the partition's leader, from the first record at or after ``since_ms``
(ListOffsets by timestamp) or the log start, up to the end offset at the start; with
``follow``, then long-polled until the caller stops. A topic that does not exist yet (no
transform has logged anything) means no lines; followed, it is looked for again until it
appears. A followed log rides out a leader that moves or a broker that restarts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from controlplane import errors
from controlplane.kafka import Admin, KafkaResponseError
from controlplane.kafka_groups import EARLIEST, LATEST, list_partition_offsets
from controlplane.kafka_transforms import Fetched, fetch_partition
from controlplane.topics import map_kafka_error
from controlplane.transforms import TransformOps
from wire.record_batch import Record

LOGS_TOPIC = "_sluice.transform_logs"
"""Where brokers write the guests' log lines (dataplane/transforms/manager.py)."""
FOLLOW_WAIT_MS = 1000
"""Fetch long-poll of a followed log (the broker answers as soon as a line arrives)."""
RETRY_S = 1.0
"""A followed log whose topic does not exist yet, or whose leader moved, is looked at again
after this long."""
RETRIABLE = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
}
TRANSPORT = (TimeoutError, OSError, asyncio.IncompleteReadError)


@dataclass(frozen=True)
class LogLine:
    timestamp_ms: int
    partition: int
    """The input partition whose runner wrote it."""
    stream: str
    """``stdout`` or ``stderr``."""
    text: str


def log_line(timestamp: int, value: bytes | None) -> LogLine | None:
    """The line a logs-topic record holds (None when it is not one)."""
    try:
        doc = json.loads(value or b"")
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    return LogLine(
        timestamp_ms=timestamp,
        partition=int(doc.get("partition", -1)),
        stream=str(doc.get("stream", "")),
        text=str(doc.get("text", "")),
    )


@dataclass
class _Cursor:
    leader: Admin | None = None
    """The partition's leader (looked up again after an error)."""
    offset: int | None = None
    """The next offset to read; None: not chosen yet (or out of range)."""
    end: int | None = None
    """Where to stop (the end offset at the start); None: following."""


class TransformLogs:
    def __init__(self, ops: TransformOps) -> None:
        self.ops = ops

    async def lines(
        self, cluster: str, name: str, since_ms: int, follow: bool
    ) -> AsyncGenerator[LogLine, None]:
        """The transform's lines, oldest first, at or after ``since_ms``; with ``follow``,
        then every new one until the caller stops iterating."""
        self.ops.brokers(cluster)  # CLUSTER_NOT_FOUND before anything else
        key = name.encode()
        cursor = _Cursor()
        while True:
            records = await self._step(cluster, name, since_ms, follow, cursor)
            if records is None:
                return
            for record in records:
                if record.key == key and record.timestamp >= since_ms:
                    line = log_line(record.timestamp, record.value)
                    if line is not None:
                        yield line

    async def _step(
        self, cluster: str, name: str, since_ms: int, follow: bool, cursor: _Cursor
    ) -> list[Record] | None:
        """The next records of the logs topic (maybe none, after a wait); None when there
        is nothing more to read (without ``follow``)."""
        if cursor.leader is None:
            cursor.leader = await self._leader(cluster, name, follow)
            if cursor.leader is None:
                if not follow:
                    return None
                await asyncio.sleep(RETRY_S)
                return []
        try:
            if cursor.offset is None:
                cursor.offset, cursor.end = await self._start(cursor.leader, since_ms, follow)
            if cursor.end is not None and cursor.offset >= cursor.end:
                return None
            wait = FOLLOW_WAIT_MS if follow else 0
            fetched = await fetch_partition(cursor.leader, LOGS_TOPIC, 0, cursor.offset, wait)
        except TRANSPORT as exc:
            if not follow:
                raise self._unavailable(cluster, name, exc) from None
            cursor.leader = None  # it may have moved, or its broker restarts
            await asyncio.sleep(RETRY_S)
            return []
        except KafkaResponseError as exc:  # ListOffsets
            fetched = Fetched(exc.code)
        return await self._advance(cluster, follow, cursor, fetched)

    @staticmethod
    async def _advance(
        cluster: str, follow: bool, cursor: _Cursor, fetched: Fetched
    ) -> list[Record] | None:
        """The records of a Fetch, the cursor moved past them (None: the end is reached)."""
        if fetched.error == ErrorCode.offset_out_of_range:
            cursor.offset = None  # retention removed them: start again from the log start
            return []
        if fetched.error != ErrorCode.none:
            if fetched.error not in RETRIABLE:
                failed = KafkaResponseError(fetched.error, None, f"read {LOGS_TOPIC}")
                raise map_kafka_error(failed, cluster, LOGS_TOPIC)
            cursor.leader = None
            await asyncio.sleep(RETRY_S)
            return []
        if fetched.next_offset == cursor.offset and not follow:
            return None  # nothing more below the end offset it knew
        cursor.offset = fetched.next_offset
        return fetched.records

    @staticmethod
    def _unavailable(cluster: str, name: str, exc: BaseException) -> Exception:
        return errors.BrokerUnavailable(
            f"the leader of {LOGS_TOPIC} in cluster {cluster!r} did not answer: "
            f"{exc or type(exc).__name__}",
            cluster=cluster,
            transform=name,
        )

    async def _leader(self, cluster: str, name: str, follow: bool) -> Admin | None:
        """The leader of the logs topic's partition; None when the topic does not exist (or,
        following, when it has no leader now or no broker answers)."""
        try:
            (meta,) = await self.ops.on_any(
                cluster, name, "metadata", lambda a: a.metadata([LOGS_TOPIC]), read_only=True
            )
        except KafkaResponseError as exc:
            if exc.code in (ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available):
                return None
            raise map_kafka_error(exc, cluster, LOGS_TOPIC) from None
        except errors.BrokerUnavailable:
            if follow:
                return None
            raise
        by_id = {b.broker_id: b for b in self.ops.brokers(cluster)}
        leader = by_id.get(meta.partitions[0].leader) if meta.partitions else None
        if leader is None:
            if follow:
                return None
            raise errors.BrokerUnavailable(
                f"{LOGS_TOPIC} of cluster {cluster!r} has no leader now; retry in a few seconds",
                cluster=cluster,
                transform=name,
            )
        return Admin.to(leader, self.ops.timeout)

    @staticmethod
    async def _start(leader: Admin, since_ms: int, follow: bool) -> tuple[int, int | None]:
        """Where to start reading (the first record at or after ``since_ms``, else the log
        start) and, without ``follow``, where to stop (the end offset now). Errors as
        ``list_partition_offsets``."""
        partition = (LOGS_TOPIC, 0)
        end = (await list_partition_offsets(leader, [partition], LATEST))[partition]
        at = since_ms if since_ms > 0 else EARLIEST
        first = (await list_partition_offsets(leader, [partition], at))[partition]
        return (end if first < 0 else first), (None if follow else end)
