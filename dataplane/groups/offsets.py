"""Committed offsets in memory: group -> topic -> partition -> CommittedOffset.

This is the materialized view of the offset records in ``__consumer_offsets``; the
coordinator writes a record first and then updates this table, and rebuilds the table by
replaying the topic on start-up. Expiry follows Kafka's rules (``offsets.retention.minutes``):
an offset with an explicit expire timestamp (OffsetCommit v2-v4 retention time) expires
then; otherwise offsets of an Empty consumer group expire a retention period after the
group became empty, and offsets of a simple group (no protocol type) a retention period
after their commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1

    def expired(self, now_ms: int, base_ms: int, retention_ms: int) -> bool:
        if self.expire_timestamp >= 0:
            return now_ms >= self.expire_timestamp
        return now_ms - base_ms >= retention_ms


class OffsetStore:
    def __init__(self) -> None:
        self._groups: dict[str, dict[str, dict[int, CommittedOffset]]] = {}

    def get(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._groups.get(group, {}).get(topic, {}).get(partition)

    def put(self, group: str, topic: str, partition: int, value: CommittedOffset) -> None:
        self._groups.setdefault(group, {}).setdefault(topic, {})[partition] = value

    def delete(self, group: str, topic: str, partition: int) -> None:
        topics = self._groups.get(group)
        if topics is None:
            return
        partitions = topics.get(topic)
        if partitions is None:
            return
        partitions.pop(partition, None)
        if not partitions:
            del topics[topic]
        if not topics:
            del self._groups[group]

    def has_offsets(self, group: str) -> bool:
        return group in self._groups

    def topics(self, group: str) -> dict[str, dict[int, CommittedOffset]]:
        return self._groups.get(group, {})

    def entries(self, group: str) -> Iterator[tuple[str, int, CommittedOffset]]:
        for topic, partitions in self._groups.get(group, {}).items():
            for partition, value in partitions.items():
                yield topic, partition, value

    def remove_group(self, group: str) -> list[tuple[str, int]]:
        """Forget every offset of ``group``; returns the (topic, partition) pairs removed."""
        topics = self._groups.pop(group, {})
        return [(t, p) for t, partitions in topics.items() for p in partitions]

    def groups(self) -> list[str]:
        return list(self._groups)
