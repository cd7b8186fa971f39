"""Where a cluster's remote data lives in its bucket.

    CLUSTER_ID/TOPIC-TOPIC_ID/PARTITION/BASE_OFFSET-SEGMENT_ID.{log,index,epochs,snapshot}

BASE_OFFSET is zero-padded to 20 digits (keys list in offset order), SEGMENT_ID is the
upload attempt's uuid4 hex. Topic names may contain '-', so a topic directory is split at
its LAST '-': Kafka topic ids (canonical UUIDs here) contain '-' too, so the id is the last
five '-'-separated groups (8-4-4-4-12 hex digits) and the name is what precedes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tiered.remote_segment import RemoteSegment

SUFFIXES = (".log", ".index", ".epochs", ".snapshot")
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_KEY = re.compile(
    r"^(?P<cluster>[^/]+)/(?P<topic>[^/]+)-(?P<topic_id>" + _UUID + r")/(?P<partition>\d+)/"
    r"(?P<base>\d{20})-(?P<segment>[0-9a-f]{32})(?P<suffix>\.log|\.index|\.epochs|\.snapshot)$"
)


@dataclass(frozen=True, slots=True)
class SegmentKeys:
    log: str
    index: str
    epochs: str
    snapshot: str

    def all(self) -> tuple[str, str, str, str]:
        return (self.log, self.index, self.epochs, self.snapshot)


@dataclass(frozen=True, slots=True)
class ParsedKey:
    cluster_id: str
    topic: str
    topic_id: str
    partition: int
    base_offset: int
    segment_id: str
    suffix: str


def cluster_prefix(cluster_id: str) -> str:
    return f"{cluster_id}/"


def topic_prefix(cluster_id: str, topic: str, topic_id: str) -> str:
    return f"{cluster_id}/{topic}-{topic_id}/"


def partition_prefix(cluster_id: str, topic: str, topic_id: str, partition: int) -> str:
    return f"{topic_prefix(cluster_id, topic, topic_id)}{partition}/"


def segment_keys(cluster_id: str, segment: RemoteSegment) -> SegmentKeys:
    stem = partition_prefix(cluster_id, segment.topic, segment.topic_id, segment.partition)
    stem += f"{segment.base_offset:020d}-{segment.segment_id}"
    return SegmentKeys(*(stem + suffix for suffix in SUFFIXES))


def parse_key(key: str) -> ParsedKey | None:
    """The parts of a segment object's key; None for any other key."""
    m = _KEY.match(key)
    if m is None:
        return None
    return ParsedKey(
        m["cluster"],
        m["topic"],
        m["topic_id"],
        int(m["partition"]),
        int(m["base"]),
        m["segment"],
        m["suffix"],
    )
