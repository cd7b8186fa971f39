"""The transaction coordinator: what the transaction handlers call.

The coordinator of transactional id T is the leader of T's partition of
``__transaction_state`` (created on the first FindCoordinator for a transaction, with
``transaction.state.log.num.partitions`` partitions, replicated like any topic). Becoming
leader of a partition replays it into ``TxnMetadata`` per id and resumes the transactions
it finds in PREPARE_COMMIT / PREPARE_ABORT (their markers may be missing anywhere), with
the partition's leader epoch as the coordinator epoch that fences the old coordinator's
markers. Losing leadership drops them; clients find the new coordinator.

Every state change is written to ``__transaction_state`` and acknowledged by its ISR
before it is applied here or answered, so a kill -9 of the coordinator's leader leaves
the last acknowledged state in the log: the new leader completes a PREPARE state (commit
or abort everywhere) and an ONGOING transaction ends by timeout (abort everywhere).
Requests for an id whose write is in flight, or whose markers are being written, get
CONCURRENT_TRANSACTIONS, which clients retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from dataplane import clock
from dataplane.cluster.image import Delta
from dataplane.coordinator_log import CoordinatorLog, CoordinatorTopic, write_error
from dataplane.groups.storage import OFFSETS_TOPIC
from dataplane.groups.storage import partition_for as group_partition
from dataplane.transactions.markers import MarkerJob, MarkerSender
from dataplane.transactions.records import (
    TxnValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from dataplane.transactions.state import MAX_EPOCH, TxnMetadata, TxnState
from wire.errors import (
    BrokerError,
    ConcurrentTransactions,
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    CorruptRecord,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    NotCoordinator,
    ProducerFenced,
    TransactionalIdNotFound,
)
from wire.transactions import ControlType

if TYPE_CHECKING:
    from dataplane.cluster.producer_ids import ProducerIdManager

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTIONS = CoordinatorTopic(
    TRANSACTION_STATE_TOPIC,
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.segment.bytes",
    "transaction",
)


def _now_ms() -> int:
    return clock.now_ms()


class TransactionCoordinator:
    def __init__(
        self, storage: CoordinatorLog, producer_ids: ProducerIdManager, markers: MarkerSender
    ) -> None:
        self.storage = storage
        self.config = storage.config
        self.producer_ids = producer_ids
        self.markers = markers
        self.txns: dict[str, TxnMetadata] = {}
        self.coordinator_epochs: dict[int, int] = {}
        """Per loaded partition: its leader epoch when it was loaded."""
        self.completing: dict[str, asyncio.Task[None]] = {}
        self.active = False
        self._timeouts: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.active = True
        self.on_metadata(Delta(restored=True))
        self._timeouts = asyncio.get_running_loop().create_task(self._abort_timed_out_loop())

    async def stop(self) -> None:
        self.active = False
        tasks = [t for t in (self._timeouts, *self.completing.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.completing.clear()

    def on_metadata(self, delta: Delta) -> None:
        if not self.active:
            return
        touched = any(t == TRANSACTION_STATE_TOPIC for t, _ in delta.partitions) or any(
            info.name == TRANSACTION_STATE_TOPIC for info in delta.removed
        )
        if not delta.restored and not touched:
            return
        storage = self.storage
        led = storage.led_partitions()
        for partition in sorted((storage.loaded | storage.loading) - led):
            self._unload(partition)
        for partition in sorted(led - storage.loaded - storage.loading):
            self._load(partition)

    def _load(self, partition: int) -> None:
        storage = self.storage
        part = storage.replicas.partitions.get((TRANSACTION_STATE_TOPIC, partition))
        if part is None or not part.is_leader:
            return
        loaded: dict[str, TxnMetadata] = {}
        for key, value in storage.replay(part.plog):
            try:
                tid = decode_key(key)
                if value is None:
                    loaded.pop(tid, None)
                    continue
                v = decode_value(value)
            except CorruptRecord as exc:
                log.error("skipping unreadable %s record: %s", TRANSACTION_STATE_TOPIC, exc)
                continue
            old = loaded.get(tid)
            loaded[tid] = TxnMetadata(
                tid,
                v.producer_id,
                v.producer_epoch,
                v.timeout_ms,
                v.state,
                set(v.partitions),
                v.start_ms,
                v.last_update_ms,
                last_epoch=old.producer_epoch if old is not None else -1,
            )
        self.coordinator_epochs[partition] = part.leader_epoch
        self.txns.update(loaded)

        def ready() -> None:
            for meta in loaded.values():
                if meta.state.preparing:
                    self._complete(meta)

        storage.mark_loaded(partition, ready)
        log.info(
            "transaction coordinator loaded %s-%d: %d transactional ids",
            TRANSACTION_STATE_TOPIC,
            partition,
            len(loaded),
        )

    def _unload(self, partition: int) -> None:
        self.storage.unload(partition)
        self.coordinator_epochs.pop(partition, None)
        for tid in [t for t in self.txns if self.storage.partition_for(t) == partition]:
            del self.txns[tid]
            task = self.completing.pop(tid, None)
            if task is not None:
                task.cancel()
        log.info("transaction coordinator unloaded %s-%d", TRANSACTION_STATE_TOPIC, partition)

    # ------------------------------------------------------------------ lookups

    def find_coordinator(self, transactional_id: str) -> tuple[int, str, int]:
        if not self.active:
            raise CoordinatorNotAvailable()
        return self.storage.leader_of(transactional_id)

    def _owned(self, transactional_id: str) -> None:
        """Raise unless this broker coordinates the id now."""
        partition = self.storage.partition_for(transactional_id)
        if partition not in self.storage.loaded:
            if partition in self.storage.led_partitions():
                raise CoordinatorLoadInProgress()
            raise NotCoordinator(f"this broker does not coordinate {transactional_id!r}")

    def _producer(self, transactional_id: str, producer_id: int, epoch: int) -> TxnMetadata:
        """The id's metadata, if this broker coordinates it and the producer is its current
        one (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED otherwise)."""
        self._owned(transactional_id)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMapping(
                f"producer id {producer_id} is not the current one of {transactional_id!r}"
            )
        if epoch != meta.producer_epoch:
            raise ProducerFenced(
                f"epoch {epoch} of {transactional_id!r} is fenced by epoch {meta.producer_epoch}"
            )
        return meta

    def _get(self, transactional_id: str, producer_id: int, epoch: int) -> TxnMetadata:
        """The id's metadata after the checks every request of an open producer gets."""
        meta = self._producer(transactional_id, producer_id, epoch)
        if meta.pending or meta.state.preparing:
            raise ConcurrentTransactions()
        return meta

    # ------------------------------------------------------------------ requests

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer; the previous producer of the
        id is fenced, and an open transaction of it is aborted first (the caller retries
        on CONCURRENT_TRANSACTIONS until it has ended)."""
        maximum = self.config.get_int("transaction.max.timeout.ms")
        if not 0 < timeout_ms <= maximum:
            raise InvalidTransactionTimeout(
                f"transaction.timeout.ms={timeout_ms} must be in 1..{maximum} "
                "(transaction.max.timeout.ms)"
            )
        self._owned(transactional_id)
        meta = self.txns.get(transactional_id)
        if meta is None:
            pid = await self.producer_ids.generate()
            meta = self.txns.setdefault(
                transactional_id, TxnMetadata(transactional_id, pid, -1, timeout_ms)
            )
        if meta.pending or meta.state.preparing:
            raise ConcurrentTransactions()
        if producer_id >= 0:  # KIP-360: the producer says which epoch it had
            if producer_id != meta.producer_id:
                raise ProducerFenced(f"producer id {producer_id} of {transactional_id!r} is stale")
            if producer_epoch == meta.last_epoch and meta.state.completed:
                return meta.producer_id, meta.producer_epoch  # a retry of the last bump
            if producer_epoch != meta.producer_epoch:
                raise ProducerFenced(
                    f"epoch {producer_epoch} of {transactional_id!r} is fenced by epoch "
                    f"{meta.producer_epoch}"
                )
        if meta.state is TxnState.ONGOING:
            await self._abort(meta, fence=True)
            raise ConcurrentTransactions()
        pid, epoch = meta.producer_id, meta.producer_epoch + 1
        if epoch > MAX_EPOCH:
            pid, epoch = await self.producer_ids.generate(), 0
        now = _now_ms()
        await self._write(
            meta, TxnValue(pid, epoch, timeout_ms, TxnState.EMPTY, frozenset(), now, -1)
        )
        return pid, epoch

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> None:
        meta = self._get(transactional_id, producer_id, epoch)
        wanted = set(partitions)
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            return
        now = _now_ms()
        start = meta.start_ms if meta.state is TxnState.ONGOING else now
        await self._write(
            meta,
            TxnValue(
                meta.producer_id,
                meta.producer_epoch,
                meta.timeout_ms,
                TxnState.ONGOING,
                frozenset(meta.partitions | wanted),
                now,
                start,
            ),
        )

    def missing_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> set[tuple[str, int]]:
        """AddPartitionsToTxn's verify_only: the partitions not in the open transaction."""
        meta = self._producer(transactional_id, producer_id, epoch)
        if meta.state is not TxnState.ONGOING:
            return set(partitions)
        return set(partitions) - meta.partitions

    async def add_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> None:
        offsets = self.storage.image.topics.get(OFFSETS_TOPIC)
        count = (
            offsets.partitions
            if offsets is not None
            else self.config.get_int("offsets.topic.num.partitions")
        )
        partition = group_partition(group_id, count)
        await self.add_partitions(
            transactional_id, producer_id, epoch, [(OFFSETS_TOPIC, partition)]
        )

    async def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> None:
        meta = self._producer(transactional_id, producer_id, epoch)
        if meta.pending:
            raise ConcurrentTransactions()
        state = meta.state
        wanted_done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        wanted_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state is wanted_done:
            return  # a retry of an EndTxn that was answered
        if state is wanted_prepare:
            raise ConcurrentTransactions()
        if state is not TxnState.ONGOING:
            why = (
                f"cannot {'commit' if commit else 'abort'} {transactional_id!r} in state "
                f"{state.label} (producer {producer_id}, epoch {epoch})"
            )
            log.info("EndTxn refused: %s", why)
            raise InvalidTxnState(why)
        if commit:
            await self._prepare(meta, TxnState.PREPARE_COMMIT, meta.producer_epoch)
        else:
            await self._abort(meta, fence=False)

    # ------------------------------------------------------------------ completion

    async def _abort(self, meta: TxnMetadata, *, fence: bool) -> None:
        """PREPARE_ABORT (with the epoch bumped when the producer is being fenced), then
        the markers in the background."""
        epoch = meta.producer_epoch + 1 if fence else meta.producer_epoch
        if fence and epoch > MAX_EPOCH:
            epoch = meta.producer_epoch  # Kafka too aborts at the last epoch unfenced
        await self._prepare(meta, TxnState.PREPARE_ABORT, epoch)

    async def _prepare(self, meta: TxnMetadata, state: TxnState, epoch: int) -> None:
        await self._write(
            meta,
            TxnValue(
                meta.producer_id,
                epoch,
                meta.timeout_ms,
                state,
                frozenset(meta.partitions),
                _now_ms(),
                meta.start_ms,
            ),
        )
        self._complete(meta)

    def _complete(self, meta: TxnMetadata) -> None:
        """Write the markers of a PREPARE state, then its COMPLETE state (a task)."""
        tid = meta.transactional_id
        if tid in self.completing:
            return
        task = asyncio.get_running_loop().create_task(self._markers_then_complete(meta))
        self.completing[tid] = task
        task.add_done_callback(lambda _: self._completed(tid, task))

    def _completed(self, tid: str, task: asyncio.Task[None]) -> None:
        if self.completing.get(tid) is task:
            del self.completing[tid]
        if not task.cancelled() and task.exception() is not None:
            log.error("completing transaction %r failed: %s", tid, task.exception())

    async def _markers_then_complete(self, meta: TxnMetadata) -> None:
        tid = meta.transactional_id
        partition = self.storage.partition_for(tid)
        commit = meta.state is TxnState.PREPARE_COMMIT
        job = MarkerJob(
            meta.producer_id,
            meta.producer_epoch,
            ControlType.COMMIT if commit else ControlType.ABORT,
            self.coordinator_epochs.get(partition, 0),
        )
        backoff = self.config.get_int("transaction.marker.retry.backoff.ms") / 1000
        if not await self.markers.send(
            job, set(meta.partitions), lambda: partition in self.storage.loaded
        ):
            return  # the partition moved: its new coordinator completes the transaction
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        while True:
            try:
                await self._write(
                    meta,
                    TxnValue(
                        meta.producer_id,
                        meta.producer_epoch,
                        meta.timeout_ms,
                        done,
                        frozenset(),
                        _now_ms(),
                        meta.start_ms,
                    ),
                    completing=True,
                )
                return
            except (BrokerError, OSError, TimeoutError) as exc:
                if partition not in self.storage.loaded:
                    return
                log.info("writing %s of %r failed, retrying: %s", done.label, tid, exc)
                await asyncio.sleep(backoff)

    async def _abort_timed_out_loop(self) -> None:
        while True:
            interval = self.config.get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"
            )
            await asyncio.sleep(interval / 1000)
            now = _now_ms()
            for meta in list(self.txns.values()):
                if (
                    meta.state is TxnState.ONGOING
                    and not meta.pending
                    and now - meta.start_ms > meta.timeout_ms
                ):
                    log.info(
                        "aborting transaction %r of producer %d: open for %d ms, over its "
                        "transaction.timeout.ms=%d",
                        meta.transactional_id,
                        meta.producer_id,
                        now - meta.start_ms,
                        meta.timeout_ms,
                    )
                    try:
                        await self._abort(meta, fence=True)
                    except (BrokerError, OSError, TimeoutError) as exc:
                        log.warning("aborting %r failed: %s", meta.transactional_id, exc)

    # ------------------------------------------------------------------ the log

    async def _write(self, meta: TxnMetadata, value: TxnValue, *, completing: bool = False) -> None:
        """Write the id's new state, wait for the ISR, then apply it."""
        if meta.pending and not completing:
            raise ConcurrentTransactions()
        meta.pending = True
        try:
            durable = self.storage.append(
                meta.transactional_id, [(encode_key(meta.transactional_id), encode_value(value))]
            )
            if durable is not None:
                await durable
        except (BrokerError, OSError) as exc:
            # a client retries COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR with the same
            # request; NOT_ENOUGH_REPLICAS or KAFKA_STORAGE_ERROR on EndTxn would make
            # librdkafka abort a commit whose PREPARE_COMMIT may be in the log
            raise write_error(exc, timeout_means_unavailable=True) from exc
        finally:
            meta.pending = False
        if value.producer_epoch != meta.producer_epoch or value.producer_id != meta.producer_id:
            meta.last_epoch = meta.producer_epoch if value.producer_id == meta.producer_id else -1
        meta.producer_id = value.producer_id
        meta.producer_epoch = value.producer_epoch
        meta.timeout_ms = value.timeout_ms
        meta.state = value.state
        meta.partitions = set(value.partitions)
        meta.last_update_ms = value.last_update_ms
        meta.start_ms = value.start_ms

    # ------------------------------------------------------------------ describe

    def describe(self, transactional_id: str) -> TxnMetadata:
        self._owned(transactional_id)
        meta = self.txns.get(transactional_id)
        if meta is None:
            raise TransactionalIdNotFound(f"no transactional id {transactional_id!r}")
        return meta

    def listed(self) -> list[TxnMetadata]:
        return [m for m in self.txns.values() if self.storage.owns(m.transactional_id)]
