"""Typed errors of the Raft library."""

from __future__ import annotations


class RaftError(Exception):
    """Base class."""

    retriable = False


class NotLeader(RaftError):
    """This node cannot take proposals now; ``leader_id`` is its best guess of who can."""

    retriable = True

    def __init__(self, leader_id: int | None, reason: str = "not the leader") -> None:
        super().__init__(f"{reason} (leader hint: {leader_id})")
        self.leader_id = leader_id


class ProposalDropped(RaftError):
    """The proposal was appended but another leader's entry took its index: not committed."""

    retriable = True


class CommitUnknown(RaftError):
    """The outcome of the proposal cannot be known here (it may or may not have committed)."""

    retriable = True


class RaftClosed(RaftError):
    """The server stopped (closed, or its storage failed) before the proposal resolved."""


class StorageCorrupt(RaftError):
    """A Raft file is damaged beyond the torn tail that recovery repairs."""
