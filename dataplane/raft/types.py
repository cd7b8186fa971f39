"""Values shared by the Raft core, its storage, its codec and its driver.

Every message carries ``src``, ``dst`` and ``term``. Node ids are small non-negative
integers (u32 on the wire); "no node" is ``None`` in memory and ``-1`` on disk.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class EntryKind(enum.IntEnum):
    """What a log entry holds."""

    DATA = 0
    """An application payload, handed to the state machine."""
    NOOP = 1
    """Appended by every new leader to commit the entries of earlier terms; never applied."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry."""

    term: int
    """Term of the leader that created it."""
    index: int
    """Position in the log, from 1."""
    payload: bytes = b""
    """Opaque application bytes (empty for NOOP)."""
    kind: EntryKind = EntryKind.DATA


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be durable before a node votes or acknowledges: its term and its vote."""

    term: int = 0
    vote: int | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Application state covering every entry up to and including ``index``."""

    index: int = 0
    """Last included index (0: no snapshot)."""
    term: int = 0
    """Term of the entry at ``index``."""
    data: bytes = field(default=b"", repr=False)
    """Opaque bytes from ``StateMachine.snapshot``."""


# --- messages -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """RequestVote, or PreVote (thesis §9.6) when ``pre_vote``: then ``term`` is the term the
    sender would campaign in, and neither side changes its term or vote."""

    src: int
    dst: int
    term: int
    last_index: int
    last_term: int
    pre_vote: bool = False
    transfer: bool = False
    """Sent after TimeoutNow: voters grant it even while they hear from a leader."""


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: int
    dst: int
    term: int
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """AppendEntries; a heartbeat is one with no entries."""

    src: int
    dst: int
    term: int
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    commit: int


@dataclass(frozen=True, slots=True)
class AppendResponse:
    """Success: the follower's log matches the leader's up to ``match_index``.

    Rejection: nothing matched at ``reject_index`` (the request's prev_index); the leader
    resumes at or below ``hint_index``, the last follower index whose term is at most the
    request's prev_term (``hint_term`` is its term), skipping a whole conflicting term at once.
    """

    src: int
    dst: int
    term: int
    success: bool
    match_index: int = 0
    reject_index: int = 0
    hint_index: int = 0
    hint_term: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """InstallSnapshot, whole (metadata snapshots are small)."""

    src: int
    dst: int
    term: int
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """Leader transfer: the receiver campaigns at once, without pre-vote."""

    src: int
    dst: int
    term: int


Message = VoteRequest | VoteResponse | AppendRequest | AppendResponse | SnapshotRequest | TimeoutNow
