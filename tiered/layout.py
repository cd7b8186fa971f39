"""Where a cluster's remote data lives in its bucket.

    CLUSTER_ID/TOPIC-TOPIC_ID/PARTITION/BASE_OFFSET-SEGMENT_ID.{log,index,epochs,snapshot,txnindex}

BASE_OFFSET is zero-padded to 20 digits (a partition's keys list in offset order),
SEGMENT_ID is the upload attempt's uuid4 hex (32 lowercase hex digits), PARTITION is plain
decimal. Every object Sluice writes under ``cluster_prefix`` has such a key, so the orphan
finder can tell whose each object is (``parse_key``).

``.txnindex`` (only when not empty) holds, in Kafka's TransactionIndex format
(``wire.transactions``, entries in marker order), every aborted transaction overlapping the
segment's offsets: those whose ABORT marker is in the segment (the local ``.txnindex``) and
those with records in it whose marker came later. A segment is uploaded only once it is
wholly below the last stable offset, so the list is complete then, and a reader of the
segment needs no other object to drop aborted records.

Splitting ``TOPIC-TOPIC_ID``: topic names may contain '-' (and '.', '_'), and so may topic
ids, so the directory is read from the RIGHT, by the id's fixed shape. A topic id is either

- a canonical UUID: 36 characters, ``8-4-4-4-12`` lowercase hex digits (what Sluice writes), or
- a Kafka ``Uuid`` string: 22 characters of URL-safe base64 without padding
  (``[A-Za-z0-9_-]``) encoding 16 bytes, so its last character is one of ``A``, ``Q``,
  ``g``, ``w`` (the 4 bits past the 128th are zero).

The id is the directory's last 36 (or 22) characters if they have that shape and the
character before them is '-'; the topic name is everything before that '-' (non-empty). The
two shapes never both match one directory: a canonical id ends with a hex digit, a base64
id with ``A``/``Q``/``g``/``w``. A directory that matches neither is not ours: ``parse_key``
returns None. The topic id is returned as written (no conversion between the forms).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tiered.remote_segment import RemoteSegment

LOG = ".log"
INDEX = ".index"
EPOCHS = ".epochs"
SNAPSHOT = ".snapshot"
TXN_INDEX = ".txnindex"
SUFFIXES = (LOG, INDEX, EPOCHS, SNAPSHOT)
"""The suffixes of ``SegmentKeys.all()``, in its order."""
EVERY_SUFFIX = (*SUFFIXES, TXN_INDEX)
"""The suffixes of ``SegmentKeys.every()``: every object a segment may have."""

_CANONICAL_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_BASE64_ID = r"[A-Za-z0-9_-]{21}[AQgw]"
_KEY = re.compile(
    r"(?P<cluster>[^/]+)/"
    rf"(?P<topic>[^/]+)-(?P<topic_id>{_CANONICAL_ID}|{_BASE64_ID})/"
    r"(?P<partition>0|[1-9][0-9]*)/"
    r"(?P<base>[0-9]{20})-(?P<segment>[0-9a-f]{32})"
    r"(?P<suffix>\.log|\.index|\.epochs|\.snapshot|\.txnindex)"
)
"""Greedy ``topic`` backtracks from the right: the id is the directory's fixed-shape tail."""


@dataclass(frozen=True, slots=True)
class SegmentKeys:
    """The object keys of one uploaded segment."""

    log: str
    index: str
    epochs: str
    snapshot: str
    """Present only if the broker had a producer snapshot for the segment's end."""
    txn_index: str
    """Present only if an aborted transaction overlaps the segment (``txn_index_bytes``)."""

    def all(self) -> tuple[str, str, str, str]:
        """The .log, .index, .epochs and .snapshot keys."""
        return (self.log, self.index, self.epochs, self.snapshot)

    def every(self) -> tuple[str, str, str, str, str]:
        """Every key the segment may have an object under: ``all()`` and the .txnindex
        (what deleting the segment deletes)."""
        return (*self.all(), self.txn_index)


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """The parts of a segment object's key."""

    cluster_id: str
    topic: str
    topic_id: str
    partition: int
    base_offset: int
    segment_id: str
    suffix: str
    """One of ``EVERY_SUFFIX``."""


def cluster_prefix(cluster_id: str) -> str:
    return f"{cluster_id}/"


def topic_prefix(cluster_id: str, topic: str, topic_id: str) -> str:
    return f"{cluster_id}/{topic}-{topic_id}/"


def partition_prefix(cluster_id: str, topic: str, topic_id: str, partition: int) -> str:
    return f"{topic_prefix(cluster_id, topic, topic_id)}{partition}/"


def segment_keys(cluster_id: str, segment: RemoteSegment) -> SegmentKeys:
    stem = partition_prefix(cluster_id, segment.topic, segment.topic_id, segment.partition)
    stem += f"{segment.base_offset:020d}-{segment.segment_id}"
    return SegmentKeys(stem + LOG, stem + INDEX, stem + EPOCHS, stem + SNAPSHOT, stem + TXN_INDEX)


def check_segment_keys(cluster_id: str, segment: RemoteSegment) -> SegmentKeys:
    """``segment_keys``, after checking that they parse back to ``segment``'s identity.

    Raises ValueError otherwise (a topic id of neither shape, a segment id that is not
    uuid hex, a '/' in a name...): an object under such a key would look like an orphan.
    """
    keys = segment_keys(cluster_id, segment)
    parsed = parse_key(keys.log)
    expected = (
        cluster_id,
        segment.topic,
        segment.topic_id,
        segment.partition,
        segment.base_offset,
        segment.segment_id,
    )
    if (
        parsed is None
        or (
            parsed.cluster_id,
            parsed.topic,
            parsed.topic_id,
            parsed.partition,
            parsed.base_offset,
            parsed.segment_id,
        )
        != expected
    ):
        raise ValueError(f"segment keys of {segment} would not parse back: {keys.log!r}")
    return keys


def parse_key(key: str) -> ParsedKey | None:
    """The parts of a segment object's key; None for any other key."""
    m = _KEY.fullmatch(key)
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
