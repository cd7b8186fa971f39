"""The remote log manager: offloads closed segments of the partitions this broker leads,
expires remote data, and serves reads below the local log start.

Every ``remote.log.manager.task.interval.ms``, for each partition this broker leads whose
topic has ``remote.storage.enable``:

1. leftovers: segments whose copy started but is not running here (an upload that failed,
   or one a previous leader began) and deletions that did not finish are deleted from the
   object store and from the metadata (delete_started, objects deleted, then deleted);
2. remote retention: finished segments that are wholly expired (``retention.ms``), over
   ``retention.bytes`` (local and remote together), or below the log start offset that
   DeleteRecords set, go the same way; the new log start is recorded first;
3. copy: the oldest closed segment holding offsets not yet remote, and wholly below the
   last stable offset (so below the high watermark, and every transaction with records in
   it has ended), is uploaded: copy_started is committed to the metadata log, the .log,
   its index, its leader epochs, the producer snapshot at its end and the aborted
   transactions overlapping it (``.txnindex``, when there are any) are put, and
   copy_finished is committed. Only then may local retention delete the local copy.

Every metadata change goes through the controller, which refuses a broker that no longer
leads the partition at the epoch it names: a deposed leader cannot record anything, and
the new leader cleans up what it left. A failing object store only delays (per-partition
exponential backoff from ``remote.log.manager.task.retry.backoff.ms`` up to
``…backoff.max.ms``); produce is not affected and local retention waits for the uploads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dataplane import clock
from dataplane.cluster import records as r
from dataplane.log.segment import segment_name
from dataplane.log.transactions import collect_aborted
from dataplane.remote.reader import RemoteReader
from dataplane.remote.tier import PartitionTier
from tiered.chunk_cache import ChunkCache
from tiered.config import ObjectStoreSettings
from tiered.errors import ObjectNotFound, ObjectStoreError
from tiered.layout import segment_keys, topic_prefix
from tiered.object_store import S3ObjectStore
from tiered.remote_segment import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_STARTED,
    RemoteSegment,
)
from tiered.segment_upload import SegmentFiles, delete_prefix, delete_segment, upload_segment
from wire.errors import (
    BrokerError,
    FencedLeaderEpoch,
    NotController,
    OffsetOutOfRange,
    RemoteStorageError,
)
from wire.transactions import encode_txn_index

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage, RemoteLog
    from dataplane.cluster.member import ClusterMember
    from dataplane.config import BrokerConfig
    from dataplane.log.partition_log import PartitionLog
    from dataplane.log.segment import Segment
    from dataplane.replication.manager import ReplicaManager
    from dataplane.replication.partition import Partition

log = logging.getLogger(__name__)

CACHE_DIR = ".remote-cache"
SNAPSHOT_SUFFIX = ".snapshot"


@dataclass(slots=True)
class _Backoff:
    failures: int = 0
    next_attempt: float = 0.0


class RemoteLogManager:
    def __init__(
        self,
        config: BrokerConfig,
        image: MetadataImage,
        cluster: ClusterMember,
        replicas: ReplicaManager,
    ) -> None:
        self.config = config
        self.image = image
        self.cluster = cluster
        self.replicas = replicas
        keys = ObjectStoreSettings.keys()
        raw = {k: config.get_str(k) for k in keys if config.get_str(k) != ""}
        self.settings = ObjectStoreSettings.from_properties(raw)
        self.store = S3ObjectStore(self.settings)
        self.cluster_id = image.cluster_id
        self.cache = ChunkCache(
            Path(config.data_dir) / CACHE_DIR,
            config.get_int("remote.fetch.cache.bytes"),
            config.get_int("remote.fetch.chunk.bytes"),
            config.get_int("remote.fetch.readahead.chunks"),
            memory_bytes=config.get_int("remote.fetch.memory.bytes"),
            admit_fetches=config.get_int("remote.fetch.cache.admit.fetches"),
        )
        self.reader = RemoteReader(self.store, self.cache, self.cluster_id)
        self.copier_threads = config.get_int("remote.log.manager.copier.thread.pool.size")
        self.copiers = ThreadPoolExecutor(self.copier_threads, "remote-copy")
        self.readers = ThreadPoolExecutor(
            config.get_int("remote.log.reader.threads"), "remote-read"
        )
        self._backoff: dict[tuple[str, int], _Backoff] = {}
        self._copying: set[str] = set()
        """Segment ids whose upload runs on this broker now."""
        self._task: asyncio.Task[None] | None = None
        self._bucket_ready = False

    # ------------------------------------------------------------------ lifecycle

    def tier_for(self, topic: str, partition: int) -> PartitionTier:
        return PartitionTier(self.image, topic, partition)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.copiers.shutdown(wait=False, cancel_futures=True)
        self.readers.shutdown(wait=False, cancel_futures=True)
        self.cache.close()

    async def _run(self) -> None:
        interval = self.config.get_seconds("remote.log.manager.task.interval.ms")
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote log manager pass failed")

    async def run_once(self) -> None:
        """One pass over the partitions this broker leads."""
        if not self._bucket_ready:
            try:
                await self._in(self.copiers, self.store.ensure_bucket)
                self._bucket_ready = True
            except ObjectStoreError as exc:
                log.warning("object store not ready (%s); retrying", exc)
                return
        due = []
        now = time.monotonic()
        for part in list(self.replicas.partitions.values()):
            if not part.is_leader or part.state is None or not part.plog.tiered:
                continue
            backoff = self._backoff.get((part.topic, part.index))
            if backoff is None or now >= backoff.next_attempt:
                due.append(part)
        # partitions in parallel, as many as there are copier threads; each one in order
        slots = asyncio.Semaphore(self.copier_threads)
        await asyncio.gather(*(self._maintain_one(part, slots) for part in due))

    async def _maintain_one(self, part: Partition, slots: asyncio.Semaphore) -> None:
        key = (part.topic, part.index)
        async with slots:
            try:
                await self._maintain(part)
                self._backoff.pop(key, None)
            except (FencedLeaderEpoch, NotController) as exc:
                log.info("%s: remote tier work stopped: %s", part.plog.name, exc)
            except (ObjectStoreError, RemoteStorageError, BrokerError, OSError) as exc:
                self._fail(key, part.plog.name, exc)

    def _fail(self, key: tuple[str, int], name: str, exc: Exception) -> None:
        config = self.config
        first = config.get_seconds("remote.log.manager.task.retry.backoff.ms")
        most = config.get_seconds("remote.log.manager.task.retry.backoff.max.ms")
        backoff = self._backoff.setdefault(key, _Backoff())
        backoff.failures += 1
        wait = min(most, first * 2 ** (backoff.failures - 1))
        backoff.next_attempt = time.monotonic() + wait
        log.warning(
            "%s: remote tier: %s (attempt %d; next in %.1f s; local data is kept)",
            name,
            exc,
            backoff.failures,
            wait,
        )

    async def _in(self, pool: ThreadPoolExecutor, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    # ------------------------------------------------------------------ one partition

    async def _maintain(self, part: Partition) -> None:
        await self._clean_leftovers(part)
        await self._expire(part)
        if not part.plog.config.get_bool("remote.log.copy.disable"):
            while await self._copy_next(part):
                pass

    def _remote(self, part: Partition) -> RemoteLog | None:
        return self.image.remote_log(part.topic, part.index)

    def _topic_id(self, part: Partition) -> str:
        return str(self.image.topics[part.topic].topic_id)

    async def _commit(self, part: Partition, records: list[r.Record]) -> None:
        state = part.state
        if state is None or not part.is_leader:
            raise FencedLeaderEpoch(f"no longer the leader of {part.plog.name}")
        await self.cluster.commit_remote(state, records)

    async def _delete(self, part: Partition, segments: list[RemoteSegment], start: int) -> None:
        """Delete ``segments``: record the deletion (and the new log start), delete the
        objects, then forget them."""
        if not segments:
            return
        started: list[r.Record] = [
            r.RemoteSegment(s.with_state(DELETE_STARTED).to_dict())
            for s in segments
            if s.state != DELETE_STARTED
        ]
        if start >= 0:
            started.append(r.RemoteLogStart(self._topic_id(part), part.index, start))
        if started:
            await self._commit(part, started)
        for segment in segments:
            await self._in(self.copiers, delete_segment, self.store, self.cluster_id, segment)
            for key in segment_keys(self.cluster_id, segment).every():
                self.cache.invalidate(key)
        await self._commit(
            part,
            [r.RemoteSegmentDeleted(s.topic_id, s.partition, s.segment_id) for s in segments],
        )
        log.info(
            "%s: deleted %d remote segment(s) up to offset %d",
            part.plog.name,
            len(segments),
            max(s.end_offset for s in segments),
        )

    async def _clean_leftovers(self, part: Partition) -> None:
        remote = self._remote(part)
        if remote is None:
            return
        stale = [
            s
            for s in remote.segments.values()
            if (s.state == COPY_STARTED and s.segment_id not in self._copying)
            or s.state == DELETE_STARTED
        ]
        await self._delete(part, stale, -1)

    async def _expire(self, part: Partition) -> None:
        remote = self._remote(part)
        if remote is None:
            return
        finished = remote.finished()
        if not finished:
            return
        plog = part.plog
        now_ms = clock.now_ms()
        retention_ms = plog.config.get_int("retention.ms")
        retention_bytes = plog.config.get_int("retention.bytes")
        # the log's size: what is remote, plus local segments holding offsets that are not
        remote_end = remote.end_offset()
        local_only = sum(s.size for s in plog.segments if s.next_offset > remote_end)
        excess = remote.size_bytes() + local_only - retention_bytes if retention_bytes >= 0 else -1
        doomed: list[RemoteSegment] = []
        for segment in finished:
            below_start = segment.end_offset < remote.log_start_offset
            newest = segment.max_timestamp if segment.max_timestamp >= 0 else segment.created_ms
            expired = retention_ms >= 0 and now_ms - newest > retention_ms
            oversize = retention_bytes >= 0 and excess - segment.size_bytes >= 0
            if not (below_start or expired or oversize):
                break
            doomed.append(segment)
            if oversize:
                excess -= segment.size_bytes
        if doomed:
            new_start = doomed[-1].end_offset + 1
            await self._delete(part, doomed, max(new_start, remote.log_start_offset))

    async def _copy_next(self, part: Partition) -> bool:
        """Upload the next segment; False when there is none to upload now."""
        plog = part.plog
        remote = self._remote(part)
        uploaded = 0 if remote is None else remote.end_offset()
        segment = _next_to_copy(plog, uploaded)
        if segment is None:
            return False
        snapshot = _snapshot_at(plog, segment.next_offset)
        if snapshot is None and not _rolled_long_ago(plog, segment):
            return False  # its producer snapshot is written as it is sealed: wait for it
        state = part.state
        assert state is not None
        meta = RemoteSegment(
            topic=part.topic,
            topic_id=self._topic_id(part),
            partition=part.index,
            segment_id=uuid.uuid4().hex,
            base_offset=segment.base_offset,
            end_offset=segment.next_offset - 1,
            max_timestamp=segment.max_timestamp,
            size_bytes=segment.size,
            index_bytes=0,
            leader_epoch=state.leader_epoch,
            epochs=_epochs_of(plog, segment),
            broker_id=self.image.node_id,
            created_ms=clock.now_ms(),
            state=COPY_STARTED,
        )
        index = segment.index_bytes()
        txn_index = _txn_index_of(plog, segment)
        meta = dataclasses.replace(meta, index_bytes=len(index), txn_index_bytes=len(txn_index))
        files = SegmentFiles(
            log=segment.path,
            index=index,
            epochs=_epochs_text(meta.epochs),
            snapshot=snapshot,
            txn_index=txn_index,
        )
        self._copying.add(meta.segment_id)
        try:
            await self._commit(part, [r.RemoteSegment(meta.to_dict())])
            started = time.monotonic()
            await self._in(self.copiers, upload_segment, self.store, self.cluster_id, meta, files)
            try:
                await self._commit(
                    part, [r.RemoteSegment(meta.with_state(COPY_FINISHED).to_dict())]
                )
            except FencedLeaderEpoch:
                # deposed while uploading: the new leader deletes what the metadata names;
                # these objects are ours to remove
                await self._in(self.copiers, delete_segment, self.store, self.cluster_id, meta)
                raise
        finally:
            self._copying.discard(meta.segment_id)
        log.info(
            "%s: uploaded segment %d-%d (%d bytes) in %.2f s",
            plog.name,
            meta.base_offset,
            meta.end_offset,
            meta.size_bytes,
            time.monotonic() - started,
        )
        return True

    # ------------------------------------------------------------------ topic deletion

    async def delete_topic_objects(self, topic_id: str, name: str) -> None:
        """Every object of a deleted topic (the controller calls this, then records it)."""
        prefix = topic_prefix(self.cluster_id, name, topic_id)
        count = await self._in(self.copiers, delete_prefix, self.store, prefix)
        log.info("deleted %d remote object(s) of topic %s", count, name)

    # ------------------------------------------------------------------ reads

    def _segments_at(
        self, plog: PartitionLog, offset: int
    ) -> tuple[RemoteSegment | None, RemoteSegment | None]:
        """The remote segment holding ``offset`` (the last uploaded, when several do) and
        the one after it (read ahead into when a read nears the first one's end)."""
        remote = self.image.remote_log(plog.topic, plog.partition)
        if remote is None:
            return None, None
        found = following = None
        for segment in remote.finished():
            if segment.base_offset <= offset <= segment.end_offset:
                found, following = segment, None
            elif found is not None and following is None and segment.base_offset > found.end_offset:
                following = segment
        return found, following

    async def read(self, plog: PartitionLog, offset: int, max_bytes: int) -> bytes | memoryview:
        """Batches from the remote tier starting at the one holding ``offset``."""
        if offset < plog.first_offset:
            raise OffsetOutOfRange(
                f"offset {offset} is below the log start {plog.first_offset} of {plog.name}"
            )
        segment, following = self._segments_at(plog, offset)
        if segment is None:
            raise OffsetOutOfRange(f"offset {offset} of {plog.name} is in neither tier")
        resident = self.reader.read_resident(segment, offset, max_bytes, following)
        if resident is not None:  # in memory: answered here, without a thread
            return resident
        timeout = self.config.get_seconds("remote.fetch.max.wait.ms")
        try:
            data: bytes | memoryview = await asyncio.wait_for(
                self._in(self.readers, self.reader.read, segment, offset, max_bytes, following),
                timeout,
            )
        except TimeoutError:
            log.warning("%s: remote read at %d timed out", plog.name, offset)
            raise RemoteStorageError(
                f"the remote tier did not answer within {timeout * 1000:.0f} ms; retry"
            ) from None
        except RemoteStorageError as exc:
            log.warning("%s: remote read at %d failed: %s", plog.name, offset, exc)
            raise
        return data

    async def aborted_transactions(
        self, plog: PartitionLog, offset: int, upper: int
    ) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping
        [``offset``, ``upper``) -- a read_committed fetch's answer for batches ``read``
        returned from one remote segment. The ``.txnindex`` object of a segment holding the
        whole range lists every aborted transaction overlapping it (read once through the
        chunk cache); RemoteStorageError (retriable) when there is no such segment any more
        or the object cannot be read."""
        remote = self.image.remote_log(plog.topic, plog.partition)
        holding = [
            s
            for s in ([] if remote is None else remote.finished())
            if s.base_offset <= offset and upper - 1 <= s.end_offset
        ]
        if not holding:
            raise RemoteStorageError(
                f"offsets {offset}..{upper - 1} of {plog.name} left the remote tier; retry"
            )
        segment = holding[-1]
        if segment.txn_index_bytes == 0:
            return []
        timeout = self.config.get_seconds("remote.fetch.max.wait.ms")
        try:
            entries = await asyncio.wait_for(
                self._in(self.readers, self.reader.aborted, segment), timeout
            )
        except TimeoutError:
            raise RemoteStorageError(
                f"the remote tier did not answer within {timeout * 1000:.0f} ms; retry"
            ) from None
        return [
            (e.producer_id, e.first_offset)
            for e in entries
            if e.last_offset >= offset and e.first_offset < upper
        ]

    async def producer_snapshot_at(self, plog: PartitionLog, offset: int) -> bytes | None:
        """The producer snapshot uploaded with the remote segment that ends just before
        ``offset``; None when there is none."""
        remote = self.image.remote_log(plog.topic, plog.partition)
        if remote is None:
            return None
        for segment in remote.finished():
            if segment.end_offset + 1 == offset:
                key = segment_keys(self.cluster_id, segment).snapshot
                try:
                    data: bytes = await self._in(self.readers, self.store.get, key)
                except ObjectNotFound:
                    return None
                except ObjectStoreError as exc:
                    raise RemoteStorageError(f"reading {key}: {exc}") from exc
                return data
        return None

    async def offset_for_timestamp(
        self, plog: PartitionLog, timestamp: int
    ) -> tuple[int, int] | None:
        """The first record at or after ``timestamp`` in the remote part of the log (below
        the local log start); None when the remote tier holds no such record."""
        remote = self.image.remote_log(plog.topic, plog.partition)
        if remote is None:
            return None
        start = plog.first_offset
        for segment in remote.finished():
            if segment.max_timestamp < timestamp or segment.end_offset < start:
                continue
            if segment.base_offset >= plog.log_start_offset:
                return None  # the local log answers from here on
            found = await self._in(
                self.readers, self.reader.offset_for_timestamp, segment, timestamp, start
            )
            if found is not None:
                return found
        return None


def _next_to_copy(plog: PartitionLog, uploaded: int) -> Segment | None:
    """The oldest closed segment holding offsets at or after ``uploaded``, wholly below the
    last stable offset: so below the high watermark (an uploaded segment never holds an
    offset a failover could truncate), and every transaction with records in it has its
    marker written below the high watermark (its aborted transactions are all known)."""
    active = plog.active
    stable = plog.last_stable_offset  # <= the high watermark
    for segment in plog.segments:
        if segment is active:
            return None
        if segment.next_offset <= uploaded or segment.size == 0:
            continue
        if segment.next_offset > stable:
            return None
        return segment
    return None


def _txn_index_of(plog: PartitionLog, segment: Segment) -> bytes:
    """The ``.txnindex`` object of ``segment``: every aborted transaction overlapping its
    offsets, in marker order -- the entries of its own transaction index and those of
    later segments' for transactions with records in it. Complete once the segment is
    wholly below the last stable offset (every marker ending a transaction with records in
    it is then written, in this segment or a later one, none of which local retention has
    deleted: it deletes only uploaded segments, oldest first)."""
    later = [s for s in plog.segments if s.next_offset > segment.base_offset]
    return encode_txn_index(collect_aborted(later, segment.base_offset, segment.next_offset))


SNAPSHOT_WAIT_MS = 5000
"""How long after its roll a segment waits for its producer snapshot before it is uploaded
without one (a snapshot pruned earlier never comes)."""


def _rolled_long_ago(plog: PartitionLog, segment: Segment) -> bool:
    later = [s for s in plog.segments if s.base_offset > segment.base_offset]
    rolled_ms = later[0].created_ms if later else clock.now_ms()
    return clock.now_ms() - rolled_ms > SNAPSHOT_WAIT_MS


def _epochs_of(plog: PartitionLog, segment: Segment) -> tuple[tuple[int, int], ...]:
    entries = plog.epochs.entries
    out: list[tuple[int, int]] = []
    for entry in entries:
        if entry.start_offset >= segment.next_offset:
            break
        if entry.start_offset <= segment.base_offset:
            out = [(entry.epoch, segment.base_offset)]
        else:
            out.append((entry.epoch, entry.start_offset))
    return tuple(out)


def _epochs_text(epochs: tuple[tuple[int, int], ...]) -> bytes:
    """Kafka's leader-epoch-checkpoint format: version, count, then "epoch offset" lines."""
    lines = ["0", str(len(epochs)), *(f"{e} {o}" for e, o in epochs)]
    return ("\n".join(lines) + "\n").encode()


def _snapshot_at(plog: PartitionLog, offset: int) -> bytes | None:
    path = plog.directory / segment_name(offset, SNAPSHOT_SUFFIX)
    try:
        return path.read_bytes()
    except OSError:
        return None
