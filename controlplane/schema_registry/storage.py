"""A cluster's ``_schemas`` topic, through the control plane's own Kafka client
(``controlplane.kafka``): one partition, compacted, replicated as the cluster allows (up to 3),
created at the first write. Reads Fetch from the partition's leader; a write is one record
produced with acks=all, so it is on every in-sync replica before the registry answers. On a
secured cluster every connection logs in as the cluster's internal user (the broker
addresses carry its credentials), which may write the topic whatever the ACLs say.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from kio.schema.errors import ErrorCode

from controlplane.kafka import Admin, KafkaResponseError, on_any
from controlplane.kafka_groups import EARLIEST, LATEST, list_partition_offsets
from controlplane.kafka_transforms import Fetched, fetch_partition
from controlplane.schema_registry import errors
from controlplane.store import BrokerRecord
from wire.record_batch import Record, encode_batch

log = logging.getLogger("sluice.controlplane.schema_registry")

TOPIC = "_schemas"
"""Confluent's ``kafkastore.topic`` default."""
TOPIC_CONFIGS = {"cleanup.policy": "compact"}
MAX_REPLICAS = 3
RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    }
)
TOO_LARGE = frozenset({ErrorCode.message_too_large, ErrorCode.record_list_too_large})
TRANSPORT = (OSError, asyncio.IncompleteReadError, TimeoutError)
RETRY_S = 0.2
T = TypeVar("T")


class TopicMissing(Exception):
    """The cluster has no ``_schemas`` topic yet (nothing was ever registered)."""


class SchemasTopic:
    def __init__(
        self, cluster: str, brokers: Callable[[], Sequence[BrokerRecord]], timeout: float
    ) -> None:
        self.cluster = cluster
        self.brokers = brokers
        self.timeout = timeout
        self._leader: BrokerRecord | None = None

    def _store_error(self, what: str, exc: BaseException) -> errors.RegistryError:
        return errors.store_error(
            f"Error while {what} the {TOPIC} topic of cluster {self.cluster!r}: "
            f"{exc or type(exc).__name__} (its brokers may be starting or down; retry)"
        )

    async def _find_leader(self, create: bool) -> BrokerRecord:
        brokers = list(self.brokers())
        describe = _describe
        try:
            leader = await on_any(brokers, describe, self.timeout, read_only=True)
        except KafkaResponseError as exc:
            if exc.code != ErrorCode.unknown_topic_or_partition:
                raise
            if not create:
                raise TopicMissing(TOPIC) from None
            replicas = max(1, min(MAX_REPLICAS, len(brokers)))
            make = functools.partial(_create, replicas=replicas)
            try:
                await on_any(brokers, make, self.timeout)
                log.info("cluster %s: created %s (replicas %d)", self.cluster, TOPIC, replicas)
            except KafkaResponseError as refused:
                if refused.code != ErrorCode.topic_already_exists:
                    raise
            leader = await on_any(brokers, describe, self.timeout, read_only=True)
        for broker in brokers:
            if broker.broker_id == leader:
                return broker
        raise KafkaResponseError(ErrorCode.leader_not_available, None, f"{TOPIC}-0")

    async def _with_leader(
        self, what: str, create: bool, call: Callable[[Admin], Awaitable[T]]
    ) -> T:
        """``call`` at the partition's leader, looked up again after a leader change or a
        broker that does not answer, for up to the request timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if self._leader is None:
                    self._leader = await self._find_leader(create)
                return await call(Admin.to(self._leader, self.timeout))
            except TopicMissing:
                raise
            except KafkaResponseError as exc:
                if exc.code in TOO_LARGE:
                    raise errors.schema_too_large(
                        "Register operation failed because schema is too large"
                    ) from None
                if exc.code not in RETRIABLE or time.monotonic() > deadline:
                    raise self._store_error(what, exc) from None
            except TRANSPORT as exc:
                if time.monotonic() > deadline:
                    raise self._store_error(what, exc) from None
            self._leader = None
            await asyncio.sleep(RETRY_S)

    async def bounds(self) -> tuple[int, int]:
        """(log start, end offset) of the partition; TopicMissing if there is none."""
        partition = (TOPIC, 0)

        async def offsets(admin: Admin) -> tuple[int, int]:
            start = await list_partition_offsets(admin, [partition], EARLIEST)
            end = await list_partition_offsets(admin, [partition], LATEST)
            return start[partition], end[partition]

        return await self._with_leader("reading", False, offsets)

    async def read(self, start: int, end: int) -> list[Record]:
        """Every record at offsets in [start, end), in order."""
        out: list[Record] = []
        offset = start
        while offset < end:
            at = offset

            async def fetch(admin: Admin, at: int = at) -> Fetched:
                fetched = await fetch_partition(admin, TOPIC, 0, at, 0)
                if fetched.error in RETRIABLE:  # the leader moved: found again, and retried
                    raise KafkaResponseError(fetched.error, None, f"fetch {TOPIC}-0")
                return fetched

            fetched = await self._with_leader("reading", False, fetch)
            error = fetched.error
            if error == ErrorCode.offset_out_of_range:
                offset = max(offset, (await self.bounds())[0])
                continue
            if error != ErrorCode.none:
                raise self._store_error("reading", KafkaResponseError(error, None, TOPIC))
            next_offset = fetched.next_offset
            out += [r for r in fetched.records if r.offset < end]
            if next_offset <= offset:
                raise self._store_error(
                    "reading", OSError(f"no progress at offset {offset} below the end {end}")
                )
            offset = next_offset
        return out

    async def write(self, key: bytes, value: bytes | None) -> int:
        """Produce one record (acks=all); its offset. Creates the topic when missing."""
        batch = encode_batch([(key, value)], timestamp_ms=int(time.time() * 1000))

        async def produce(admin: Admin) -> int:
            return await admin.produce(TOPIC, 0, batch)

        return await self._with_leader("writing", True, produce)


async def _describe(admin: Admin) -> int:
    (topic,) = await admin.metadata([TOPIC])
    return topic.partitions[0].leader if topic.partitions else -1


async def _create(admin: Admin, replicas: int) -> None:
    await admin.create_topic(TOPIC, 1, replicas, dict(TOPIC_CONFIGS))
