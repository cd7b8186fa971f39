"""An idempotent producer inside the broker: transform outputs go through the normal
produce path (Produce v9, acks=all) to each output partition's leader, as any client's.

Outputs of input partition P go to partition P modulo the output topic's partition count
(as Redpanda writes them), so one input partition's outputs stay in order. Each batch
carries the producer id, epoch and the partition's next sequence, so a retry after a lost
answer or a leader change is deduplicated by the leader. A send is retried until
``transforms.produce.timeout.ms`` while the leader moves or is unknown; any other error
(or an out-of-sequence answer) is a ``ProduceFailed``: the runner then starts over from
its committed offset with a new producer id — outputs are at least once, never lost.
Sends are one at a time (the broker's log lines share one producer among all runners).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable, Sequence

from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as produce_req
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from dataplane import clock
from dataplane.cluster.image import MetadataImage
from dataplane.cluster.producer_ids import ProducerIdManager
from wire.client import Channels
from wire.errors import BrokerError
from wire.record_batch import Record, batch_of_records, encode_batch

log = logging.getLogger(__name__)

RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
    }
)
RETRY_BACKOFF_S = 0.05


class ProduceFailed(BrokerError):
    """Outputs could not be written; the runner starts over from its committed offset."""


class OutputProducer:
    def __init__(
        self,
        image: MetadataImage,
        channels: Channels,
        producer_ids: ProducerIdManager,
        *,
        timeout_s: float,
    ) -> None:
        self.image = image
        self.channels = channels
        self._producer_ids = producer_ids
        self.timeout_s = timeout_s
        self.producer_id = -1
        self.epoch = 0
        self._sequences: dict[tuple[str, int], int] = {}
        self._sending = asyncio.Lock()
        """One send at a time: a batch's sequence is the one after the last acknowledged,
        and a new producer id is never taken while a batch of the old one is in flight."""

    async def reset(self) -> None:
        """A new producer id (after a failure: sequences start over)."""
        async with self._sending:
            await self._new_id()

    async def _new_id(self) -> None:
        self.producer_id = await self._producer_ids.generate()
        self._sequences.clear()

    async def send_section(self, topic: str, partition: int, records: bytes, count: int) -> None:
        """Write an encoded records section of ``count`` records (a transform's output for
        one topic) to ``topic``-``partition``; returns once its ISR has it."""
        now = clock.now_ms()
        await self._produce(
            (topic, partition),
            count,
            lambda seq: batch_of_records(records, count, now, self.producer_id, self.epoch, seq),
        )

    async def send_records(self, topic: str, partition: int, records: Sequence[Record]) -> None:
        """Write ``records`` (offsets relative to 0) to ``topic``-``partition``."""
        now = clock.now_ms()
        await self._produce(
            (topic, partition),
            len(records),
            lambda seq: encode_batch(
                records,
                timestamp_ms=now,
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
                base_sequence=seq,
            ),
        )

    async def _produce(
        self, tp: tuple[str, int], count: int, make_batch: Callable[[int], bytes]
    ) -> None:
        async with self._sending:
            await self._produce_alone(tp, count, make_batch)

    async def _produce_alone(
        self, tp: tuple[str, int], count: int, make_batch: Callable[[int], bytes]
    ) -> None:
        if self.producer_id < 0:
            await self._new_id()
        sequence = self._sequences.get(tp, 0)
        request = produce_req.ProduceRequest(
            transactional_id=None,
            acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=self.timeout_s)),
            topic_data=(
                produce_req.TopicProduceData(
                    name=TopicName(tp[0]),
                    partition_data=(
                        produce_req.PartitionProduceData(
                            index=i32(tp[1]), records=Records(make_batch(sequence))
                        ),
                    ),
                ),
            ),
        )
        deadline = time.monotonic() + self.timeout_s
        while True:
            code, message = await self._try(tp, request, deadline)
            if code == ErrorCode.none:
                self._sequences[tp] = (sequence + count) & 0x7FFFFFFF
                return
            if code not in RETRIABLE or time.monotonic() >= deadline:
                raise ProduceFailed(
                    f"writing to {tp[0]}-{tp[1]} failed: {code.name}"
                    + (f": {message}" if message else "")
                )
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _try(
        self, tp: tuple[str, int], request: produce_req.ProduceRequest, deadline: float
    ) -> tuple[ErrorCode, str | None]:
        state = self.image.partition(*tp)
        leader = None if state is None else self.image.brokers.get(state.leader)
        if leader is None or leader.fenced:
            return ErrorCode.leader_not_available, None
        channel = self.channels.get("transform-output", leader.host, leader.port)
        try:
            response = await channel.request(request, max(0.1, deadline - time.monotonic()))
        except (OSError, TimeoutError) as exc:
            return ErrorCode.request_timed_out, str(exc)
        part = response.responses[0].partition_responses[0]
        return part.error_code, part.error_message
