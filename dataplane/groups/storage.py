"""``__consumer_offsets``: the group coordinator's write-ahead log.

The coordinator of group G is the leader of partition ``abs(javaHash(G)) % N`` of
``__consumer_offsets`` (N = its partition count, ``offsets.topic.num.partitions`` when it
is created). Writing, placement and replay are ``dataplane.coordinator_log``'s; this
module names the topic and keeps Kafka's answer order of batched group requests.
"""

from __future__ import annotations

from dataplane.coordinator_log import (
    CoordinatorTopic,
    Record,
    java_string_hash,
    partition_for,
)

__all__ = [
    "OFFSETS_TOPIC",
    "Record",
    "java_string_hash",
    "kafka_answer_order",
    "partition_for",
]

OFFSETS_TOPIC = "__consumer_offsets"
GROUPS = CoordinatorTopic(
    OFFSETS_TOPIC,
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes",
    "group",
)


def _java_int(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _hash_map_capacity(entries: int) -> int:
    capacity = 16
    while entries > capacity * 3 // 4:
        capacity *= 2
    return capacity


def _bucket(hash_code: int, capacity: int) -> int:
    h = hash_code & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def kafka_answer_order(
    keys: list[str], partitions: int, *, hashed_within: bool = False
) -> list[int]:
    """Positions of ``keys`` in the order Kafka answers a batched group request.

    Kafka's coordinator service splits DescribeGroups and DeleteGroups by
    ``__consumer_offsets`` partition in a ``HashMap<TopicPartition, ...>`` and
    concatenates the answers in that map's iteration order: by bucket (the spread hash of
    the TopicPartition masked to the table size), ties by first use. Within a partition
    the keys keep request order, or (``hashed_within``, DeleteGroups) the iteration order
    of a ``HashSet`` of them. Both were measured against Kafka 4.3.
    """
    topic_hash = java_string_hash(OFFSETS_TOPIC)
    grouped: dict[int, list[int]] = {}
    for position, key in enumerate(keys):
        grouped.setdefault(partition_for(key, partitions), []).append(position)
    capacity = _hash_map_capacity(len(grouped))
    first_use = {p: i for i, p in enumerate(grouped)}
    ordered = sorted(
        grouped,
        key=lambda p: (_bucket(_java_int(31 * (31 + p) + topic_hash), capacity), first_use[p]),
    )
    result: list[int] = []
    for p in ordered:
        positions = grouped[p]
        if hashed_within:
            inner = _hash_map_capacity(len(positions))
            positions = sorted(positions, key=lambda i: _bucket(java_string_hash(keys[i]), inner))
        result.extend(positions)
    return result
