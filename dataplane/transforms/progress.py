"""Where each input partition of a transform has got to: its committed offset, kept as a
consumer group's offsets (group ``__sluice_transform.<name>``) in ``__consumer_offsets``.

So progress is replicated like any group's, survives restarts, failover and redeploys
(the group id depends on the name only), and shows in `kafka-consumer-groups` and
`cloudctl list-groups` like a consumer's, lag included. The runner commits after the
outputs of the records up to that offset are acknowledged: at least once.

Commits and fetches go to the group's coordinator over the Kafka protocol (FindCoordinator,
then OffsetCommit / OffsetFetch as a simple consumer with generation -1), through this
broker's own client channels — the coordinator may be any broker, this one included.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as find_req
from kio.schema.offset_commit.v8 import request as commit_req
from kio.schema.offset_fetch.v8 import request as fetch_req
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from dataplane.cluster.image import MetadataImage
from wire.client import Channel, Channels
from wire.errors import BrokerError

GROUP_PREFIX = "__sluice_transform."
RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
    }
)


class ProgressUnavailable(BrokerError):
    """The committed offsets cannot be read or written now; the runner retries."""


def group_of(transform: str) -> str:
    return GROUP_PREFIX + transform


class Progress:
    def __init__(self, image: MetadataImage, channels: Channels, timeout_s: float) -> None:
        self.image = image
        self.channels = channels
        self.timeout_s = timeout_s

    async def committed(self, transform: str, topic: str, partition: int) -> int:
        """The committed offset of ``topic``-``partition`` (-1: none yet)."""
        group = group_of(transform)
        request = fetch_req.OffsetFetchRequest(
            groups=(
                fetch_req.OffsetFetchRequestGroup(
                    group_id=GroupId(group),
                    topics=(
                        fetch_req.OffsetFetchRequestTopics(
                            name=TopicName(topic), partition_indexes=(i32(partition),)
                        ),
                    ),
                ),
            ),
            require_stable=False,
        )
        response = await self._to_coordinator(group, request)
        (answer,) = response.groups
        if answer.error_code != ErrorCode.none:
            raise ProgressUnavailable(f"OffsetFetch of {group}: {answer.error_code.name}")
        for t in answer.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise ProgressUnavailable(f"OffsetFetch of {group}: {p.error_code.name}")
                return int(p.committed_offset)
        return -1

    async def commit(self, transform: str, topic: str, partition: int, offset: int) -> None:
        group = group_of(transform)
        request = commit_req.OffsetCommitRequest(
            group_id=GroupId(group),
            generation_id_or_member_epoch=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(
                commit_req.OffsetCommitRequestTopic(
                    name=TopicName(topic),
                    partitions=(
                        commit_req.OffsetCommitRequestPartition(
                            partition_index=i32(partition),
                            committed_offset=i64(offset),
                            committed_leader_epoch=i32(-1),
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        )
        response = await self._to_coordinator(group, request)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise ProgressUnavailable(f"OffsetCommit of {group}: {p.error_code.name}")

    async def _to_coordinator(self, group: str, request: Any) -> Any:
        deadline = time.monotonic() + self.timeout_s
        while True:
            channel = await self._coordinator(group, deadline)
            try:
                response = await channel.request(request, max(0.1, deadline - time.monotonic()))
            except (OSError, TimeoutError) as exc:
                if time.monotonic() >= deadline:
                    raise ProgressUnavailable(f"{group}: {exc}") from exc
            else:
                code = _first_error(response)
                if code not in RETRIABLE:
                    return response
                if time.monotonic() >= deadline:
                    raise ProgressUnavailable(f"{group}: {code.name}")
            await asyncio.sleep(0.05)

    async def _coordinator(self, group: str, deadline: float) -> Channel:
        while True:
            live = self.image.live_brokers()
            if live:
                any_broker = self.channels.get("transform-progress", live[0].host, live[0].port)
                response = await any_broker.request(
                    find_req.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)),
                    max(0.1, deadline - time.monotonic()),
                )
                (found,) = response.coordinators
                if found.error_code == ErrorCode.none:
                    return self.channels.get("transform-progress", found.host, int(found.port))
            if time.monotonic() >= deadline:
                raise ProgressUnavailable(f"no coordinator for {group}")
            await asyncio.sleep(0.05)


def _first_error(response: Any) -> ErrorCode:
    """The first error code of an OffsetFetch / OffsetCommit answer (NONE if none)."""
    for group in getattr(response, "groups", ()):
        if group.error_code != ErrorCode.none:
            return ErrorCode(group.error_code)
    for topic in getattr(response, "topics", ()):
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                return ErrorCode(p.error_code)
    return ErrorCode.none
