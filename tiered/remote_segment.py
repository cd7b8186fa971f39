"""What the remote tier knows of one uploaded segment (a record of the metadata log).

States: ``copy_started`` (recorded before the first byte is uploaded, so a leader that dies
mid-upload leaves a record its successor cleans up instead of orphaned objects),
``copy_finished`` (readable), ``delete_started`` (objects being deleted). A segment whose
objects are gone leaves the metadata.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

COPY_STARTED = "copy_started"
COPY_FINISHED = "copy_finished"
DELETE_STARTED = "delete_started"
STATES = (COPY_STARTED, COPY_FINISHED, DELETE_STARTED)


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    topic: str
    topic_id: str
    partition: int
    segment_id: str
    """uuid4 hex, new for every upload attempt (keys never collide across attempts)."""
    base_offset: int
    end_offset: int
    """The last offset in the segment (inclusive)."""
    max_timestamp: int
    size_bytes: int
    """Bytes of the .log object."""
    index_bytes: int
    leader_epoch: int
    """Epoch of the leader that uploaded it."""
    epochs: tuple[tuple[int, int], ...]
    """Leader epoch -> first offset entries covering the segment."""
    broker_id: int
    created_ms: int
    state: str = COPY_STARTED

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"unknown remote segment state {self.state!r}")
        if self.end_offset < self.base_offset:
            raise ValueError(f"end offset {self.end_offset} below base {self.base_offset}")

    def with_state(self, state: str) -> RemoteSegment:
        return dataclasses.replace(self, state=state)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["epochs"] = [list(e) for e in self.epochs]
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RemoteSegment:
        """From ``to_dict`` output; unknown keys (a newer broker's) are ignored."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in raw.items() if k in known}
        values["epochs"] = tuple((int(e), int(o)) for e, o in values.get("epochs", ()))
        return cls(**values)
