"""Retention decisions (Kafka's ``UnifiedLog.deleteOldSegments``), as pure functions.

Deletion always takes a prefix of the segment list, oldest first, and stops at the first
segment that must stay:

- ``retention.ms``: a segment goes when ``now - largest timestamp > retention.ms``; the
  largest timestamp is the largest record timestamp in it (the file's mtime if none).
- ``retention.bytes``: with ``excess = log size - retention.bytes``, a segment goes while
  ``excess - segment size >= 0`` (and the excess shrinks by its size).
- A segment is only deletable when everything in it is below the high watermark, when the
  log cleaner is not rewriting it, and (for the active segment) when it is not empty.

If every segment including the active one is deletable the log rolls first, so the active
segment can go too and an empty one takes its place (as Kafka). The log start offset then
moves to the base offset of the first remaining segment. -1 disables either limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dataplane.log.segment import Segment


def deletable_prefix(
    segments: Sequence[Segment],
    log_end_offset: int,
    high_watermark: int,
    predicate: Callable[[Segment], bool],
) -> int:
    """How many segments from the oldest may go: each must pass ``predicate`` in order."""
    count = 0
    last = len(segments) - 1
    for i, segment in enumerate(segments):
        upper = log_end_offset if i == last else segments[i + 1].base_offset
        if segment.cleaning or upper > high_watermark:
            break
        if i == last and segment.size == 0:
            break
        if not predicate(segment):
            break
        count += 1
    return count


def by_time(now_ms: int, retention_ms: int) -> Callable[[Segment], bool]:
    def expired(segment: Segment) -> bool:
        return now_ms - segment.largest_timestamp() > retention_ms

    return expired


def by_size(total_bytes: int, retention_bytes: int) -> Callable[[Segment], bool]:
    excess = total_bytes - retention_bytes

    def over(segment: Segment) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False

    return over
