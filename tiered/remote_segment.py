"""What the remote tier knows of one uploaded segment (a record of the metadata log).

States: ``copy_started`` (recorded before the first byte is uploaded, so a leader that dies
mid-upload leaves a record its successor cleans up instead of orphaned objects),
``copy_finished`` (readable), ``delete_started`` (objects being deleted). A segment whose
objects are gone leaves the metadata.

``to_dict`` gives a JSON-safe dict with the field names below as keys; those names are a
wire format (they are stored in the metadata log) and never change. ``from_dict`` ignores
keys it does not know, so an older broker reads a newer broker's records.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

COPY_STARTED = "copy_started"
COPY_FINISHED = "copy_finished"
DELETE_STARTED = "delete_started"
STATES = (COPY_STARTED, COPY_FINISHED, DELETE_STARTED)

NO_TIMESTAMP = -1
"""``max_timestamp`` of a segment whose batches carry no timestamps."""


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    """One uploaded segment of one partition."""

    topic: str
    """Topic name (it is part of the object keys)."""
    topic_id: str
    """The topic's id as a string (canonical UUID; see ``tiered.layout`` for the forms)."""
    partition: int
    segment_id: str
    """uuid4 hex, new for every upload attempt (keys never collide across attempts)."""
    base_offset: int
    """The first offset in the segment."""
    end_offset: int
    """The last offset in the segment (inclusive)."""
    max_timestamp: int
    """Largest batch timestamp in the segment; ``NO_TIMESTAMP`` (-1) if none."""
    size_bytes: int
    """Bytes of the .log object (readers take it as the object's size)."""
    index_bytes: int
    """Bytes of the .index object."""
    leader_epoch: int
    """Epoch of the leader that uploaded it."""
    epochs: tuple[tuple[int, int], ...]
    """(leader epoch, first offset) entries covering the segment, in offset order."""
    broker_id: int
    """The uploading broker."""
    created_ms: int
    """Wall-clock time of the upload's start (ms since the epoch)."""
    state: str = COPY_STARTED
    """``COPY_STARTED``, ``COPY_FINISHED`` or ``DELETE_STARTED``."""
    txn_index_bytes: int = 0
    """Bytes of the .txnindex object: the aborted transactions overlapping the segment's
    offsets (``tiered.layout``); 0: there is none and no object (no aborted transaction
    overlaps the segment, or it was uploaded before Sluice uploaded transaction indexes)."""

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"unknown remote segment state {self.state!r}")
        if self.end_offset < self.base_offset:
            raise ValueError(f"end offset {self.end_offset} below base {self.base_offset}")
        if self.txn_index_bytes < 0:
            raise ValueError(f"negative transaction index size {self.txn_index_bytes}")

    def with_state(self, state: str) -> RemoteSegment:
        """The same segment in ``state``."""
        return dataclasses.replace(self, state=state)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: strings, ints, and ``epochs`` as a list of ``[epoch, offset]`` pairs."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["epochs"] = [[epoch, offset] for epoch, offset in self.epochs]
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RemoteSegment:
        """From ``to_dict`` output (or its JSON round trip); unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in raw.items() if k in known}
        values["epochs"] = tuple((int(e), int(o)) for e, o in values.get("epochs", ()))
        return cls(**values)
