"""One classic consumer group: its members and its state machine (no I/O, no timers).

States and the transitions the coordinator drives (Kafka's ``ClassicGroupState``)::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
      ^                 ^      |                                     |
      |                 |      +--(no members left)--> Empty         | leader's SyncGroup
      |                 |                                            v
      |                 +-------- join, leave, expiry ------------ Stable
      +------------------------------------------------------------ (delete) --> Dead

- **Empty**: no members; committed offsets may exist. The first JoinGroup starts the
  initial rebalance (delayed by ``group.initial.rebalance.delay.ms``).
- **PreparingRebalance**: members are (re)joining; their JoinGroup responses are parked
  until every known member has rejoined or the rebalance timeout passes; members that did
  not rejoin are then removed.
- **CompletingRebalance**: the generation is bumped, a protocol is chosen, JoinGroup
  responses are out (the leader's carries every member's metadata); members wait in
  SyncGroup for the leader's assignment.
- **Stable**: assignments are out; members heartbeat. A join by the leader or with new
  metadata, a leave, or a session expiry starts the next rebalance.
- **Dead**: the group was deleted; late requests get COORDINATOR_NOT_AVAILABLE.

Parked JoinGroup and SyncGroup requests are futures on the members; the coordinator
completes them. Errors are typed (``wire.errors``) and mapped to Kafka codes by the
handlers.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from dataplane import clock
from dataplane.groups.records import (
    GroupValue,
    MemberValue,
    encode_group_key,
    encode_group_value,
    subscribed_topics,
)
from wire.errors import BrokerError, CorruptRecord, FencedInstanceId, UnknownMemberId

UNKNOWN_MEMBER_ID = ""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}

CONSUMER_PROTOCOL_TYPE = "consumer"

Protocols = tuple[tuple[str, bytes], ...]
"""(name, metadata) pairs in the member's order of preference."""


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One entry of the member list the leader receives."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    """The answer to one JoinGroup (``error`` None on success)."""

    error: BrokerError | None
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The answer to one SyncGroup (``error`` None on success)."""

    error: BrokerError | None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str | None
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    client_id: str
    client_host: str
    api_version: int
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str | None
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(eq=False, slots=True)
class Member:
    """A member of a classic group, with its parked JoinGroup/SyncGroup futures."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False
    """Joined in the current join phase; its parked join may expire (five minutes)."""

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a session expiry should spare this member (it is parked in a rebalance)."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class ClassicGroup:
    def __init__(
        self,
        group_id: str,
        *,
        state: GroupState = GroupState.EMPTY,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
        state_timestamp_ms: int | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = GroupState.DEAD
        self.state_timestamp_ms = (
            clock.now_ms() if state_timestamp_ms is None else state_timestamp_ms
        )
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        """group.instance.id -> member id."""
        self.pending_join_members: set[str] = set()
        """Members told MEMBER_ID_REQUIRED that have not joined with their id yet."""
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self._supported: Counter[str] = Counter()

    # ------------------------------------------------------------------ state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise AssertionError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}"
            )
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = clock.now_ms()

    def subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members of a "consumer" group subscribe to; None when the group
        has another protocol type, no selected protocol, or a subscription that does not
        parse (Kafka's ClassicGroup.subscribedTopics)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscribed_topics(member.metadata(self.protocol_name))
        except (CorruptRecord, ValueError):
            return None
        return frozenset(topics)

    def metadata_record(self, assignment: dict[str, bytes]) -> tuple[bytes, bytes]:
        """This group's metadata record for ``__consumer_offsets``, with ``assignment``."""
        protocol = self.protocol_name
        members: tuple[MemberValue, ...] = ()
        if protocol is not None:
            members = tuple(
                MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol),
                    assignment.get(m.member_id, b""),
                )
                for m in self.members.values()
            )
        value = GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id if protocol is not None else None,
            current_state_timestamp=self.state_timestamp_ms,
            members=members,
        )
        return encode_group_key(self.group_id), encode_group_value(value)

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ------------------------------------------------------------------ membership

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    @staticmethod
    def generate_member_id(client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: Member, future: asyncio.Future[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self._supported.update(name for name, _ in member.protocols)
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_future = future
        if future is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported.subtract(name for name, _ in member.protocols)
            if member.awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        future: asyncio.Future[JoinResult] | None,
    ) -> None:
        self._supported.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self._supported.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif future is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        member.join_future = future

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id, fencing whoever holds the old one."""
        old = self.members.pop(old_id)
        fenced = FencedInstanceId(f"instance {instance_id} was replaced by a newer member")
        self.complete_join(old, JoinResult(fenced, old_id))
        self.complete_sync(old, SyncResult(fenced))
        new = Member(
            new_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return new

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """Raise UnknownMemberId / FencedInstanceId unless the caller is a current member."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise UnknownMemberId(f"unknown group instance id {instance_id}")
            if existing != member_id:
                raise FencedInstanceId(
                    f"instance {instance_id} belongs to member {existing}, not {member_id}"
                )
        elif member_id not in self.members:
            raise UnknownMemberId(f"member {member_id!r} is not in group {self.group_id}")

    # ------------------------------------------------------------------ parked requests

    def complete_join(self, member: Member, result: JoinResult) -> bool:
        future = member.join_future
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        member.join_future = None
        self.num_awaiting_join -= 1
        return True

    def complete_sync(self, member: Member, result: SyncResult) -> bool:
        future = member.sync_future
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        member.sync_future = None
        return True

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # ------------------------------------------------------------------ protocols

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        wanted = set(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(wanted)
        count = len(self.members)
        return self.protocol_type == protocol_type and any(
            self._supported[name] == count for name in wanted
        )

    def candidate_protocols(self) -> set[str]:
        count = len(self.members)
        return {name for name, n in self._supported.items() if n == count and count > 0}

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def members_for_leader(self) -> tuple[JoinedMember, ...]:
        protocol = self.protocol_name or ""
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    def join_result(self, member_id: str, *, leader_view: bool, skip: bool = False) -> JoinResult:
        """A successful JoinGroup answer for the current generation."""
        return JoinResult(
            None,
            member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            skip,
            self.members_for_leader() if leader_view else (),
        )

    def assignments(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}
