"""Writing transaction markers: the local write (WriteTxnMarkers' work on a partition
leader) and the coordinator's sender that gets a transaction's markers onto every
partition of it, whichever broker leads each.

A marker is appended by the partition's leader (``PartitionLog.append_marker``) and is
done once the ISR has it (acks=all, as Kafka's WriteTxnMarkers). On a partition of
``__consumer_offsets`` the group coordinator then applies or drops the transaction's
pending offsets. The sender groups partitions by leader, writes the local ones directly
and sends WriteTxnMarkers to the others, and retries what failed (leader moved, broker
down, ISR too small) every ``transaction.marker.retry.backoff.ms`` until every partition
has its marker or the task is cancelled (the coordinator lost its partition: the new
coordinator finishes the job after it loads the PREPARE state).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1 import request as req

from dataplane.groups.storage import OFFSETS_TOPIC
from wire.errors import BrokerError, error_code_for
from wire.transactions import ControlType

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage
    from dataplane.config import BrokerConfig
    from dataplane.groups.coordinator import GroupCoordinator
    from dataplane.log.manager import LogManager
    from dataplane.replication.manager import ReplicaManager
    from wire.client import Channels

log = logging.getLogger(__name__)

MARKER_TIMEOUT_S = 5.0
"""How long one marker write waits for the ISR before the sender retries it."""


@dataclass(frozen=True, slots=True)
class MarkerJob:
    producer_id: int
    producer_epoch: int
    control: ControlType
    coordinator_epoch: int


class MarkerWriter:
    """The partition leader's side."""

    def __init__(
        self, replicas: ReplicaManager, logs: LogManager, groups: GroupCoordinator
    ) -> None:
        self.replicas = replicas
        self.logs = logs
        self.groups = groups

    async def write(self, topic: str, partition: int, job: MarkerJob) -> None:
        """Append the marker on this broker (its leader) and wait for the ISR; raises the
        partition's error (NotLeaderOrFollower, InvalidProducerEpoch, ...)."""
        part = self.replicas.leader(topic, partition)
        result = part.plog.append_marker(
            job.producer_id, job.producer_epoch, job.control, job.coordinator_epoch
        )
        if topic == OFFSETS_TOPIC:
            self.groups.complete_transaction(
                partition, job.producer_id, job.control is ControlType.COMMIT
            )
        waits: list[asyncio.Future[None]] = []
        if self.logs.fsync_on_append:
            waits.append(self.logs.sync(part.plog))
        part.maybe_advance_high_watermark()
        if part.plog.high_watermark <= result.last_offset:
            waits.append(part.wait_replicated(result.last_offset + 1, MARKER_TIMEOUT_S, 1))
        if waits:
            await asyncio.gather(*waits)


class MarkerSender:
    """The coordinator's side: every partition of a transaction gets its marker."""

    def __init__(
        self,
        config: BrokerConfig,
        image: MetadataImage,
        writer: MarkerWriter,
        channels: Channels,
    ) -> None:
        self.config = config
        self.image = image
        self.writer = writer
        self.channels = channels

    async def send(
        self,
        job: MarkerJob,
        partitions: set[tuple[str, int]],
        still_coordinator: Callable[[], bool],
    ) -> bool:
        """True once every partition (of a topic that still exists) has the marker; False
        as soon as ``still_coordinator`` says this broker no longer coordinates the id."""
        left = set(partitions)
        backoff = self.config.get_int("transaction.marker.retry.backoff.ms") / 1000
        attempt = 0
        while left:
            if not still_coordinator():
                return False
            left = {tp for tp in left if self.image.partition(*tp) is not None}
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for tp in sorted(left):
                state = self.image.partition(*tp)
                if state is not None:
                    by_leader.setdefault(state.leader, []).append(tp)
            results = await asyncio.gather(
                *(self._to_leader(leader, tps, job) for leader, tps in by_leader.items())
            )
            for done in results:
                left -= done
            if left:
                attempt += 1
                if attempt % 50 == 1:
                    log.warning(
                        "transaction markers of producer %d still missing on %s; retrying",
                        job.producer_id,
                        ", ".join(f"{t}-{p}" for t, p in sorted(left)[:5]),
                    )
                await asyncio.sleep(backoff)
        return True

    async def _to_leader(
        self, leader: int, partitions: list[tuple[str, int]], job: MarkerJob
    ) -> set[tuple[str, int]]:
        """The partitions that got their marker."""
        if leader == self.image.node_id:
            done = set()
            for topic, partition in partitions:
                try:
                    await self.writer.write(topic, partition, job)
                    done.add((topic, partition))
                except (BrokerError, OSError, TimeoutError) as exc:
                    log.info("marker on %s-%d not written yet: %s", topic, partition, exc)
            return done
        info = self.image.brokers.get(leader)
        if info is None or info.fenced:
            return set()
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = req.WriteTxnMarkersRequest(
            markers=(
                req.WritableTxnMarker(
                    producer_id=job.producer_id,  # type: ignore[arg-type]
                    producer_epoch=job.producer_epoch,  # type: ignore[arg-type]
                    transaction_result=job.control is ControlType.COMMIT,
                    topics=tuple(
                        req.WritableTxnMarkerTopic(
                            name=topic,  # type: ignore[arg-type]
                            partition_indexes=tuple(ps),  # type: ignore[arg-type]
                        )
                        for topic, ps in by_topic.items()
                    ),
                    coordinator_epoch=job.coordinator_epoch,  # type: ignore[arg-type]
                ),
            )
        )
        channel = self.channels.get(f"txn-markers-{leader}", info.host, info.port)
        try:
            response = await channel.request(request, MARKER_TIMEOUT_S + 5)
        except (OSError, TimeoutError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return set()
        done = set()
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if p.error_code == ErrorCode.none:
                        done.add((str(topic.name), int(p.partition_index)))
        return done


def marker_error(exc: BaseException) -> ErrorCode:
    """The WriteTxnMarkers error code of a failed local write."""
    if isinstance(exc, BrokerError):
        return error_code_for(exc)
    if isinstance(exc, TimeoutError):
        return ErrorCode.request_timed_out
    return ErrorCode.kafka_storage_error
