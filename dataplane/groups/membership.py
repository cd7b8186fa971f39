"""Rebalances of classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and expiry.

This is Apache Kafka's classic-group protocol as its group coordinator runs it
(``GroupMetadataManager``), step by step, so that clients see the same answers:

- **Join.** A new member without id on JoinGroup v4+ is parked as *pending* and told
  MEMBER_ID_REQUIRED with its new id (v0-v3 members are added at once). Adding a member
  or a known member rejoining with changed metadata (or the leader rejoining) starts a
  rebalance: Stable/CompletingRebalance -> PreparingRebalance. The join phase completes
  when every member has rejoined, else when the rebalance timeout (the largest of the
  members') passes, and then members that did not rejoin are dropped. The first rebalance
  of an Empty group waits ``group.initial.rebalance.delay.ms`` and extends the wait while
  new members keep arriving, up to the rebalance timeout.
- **Completing the join** bumps the generation, picks the protocol every member supports
  that most members prefer, keeps or re-elects the leader, and answers every parked
  JoinGroup (the leader's answer lists every member's metadata). Members must then send
  SyncGroup within the rebalance timeout or are removed (another rebalance).
- **Sync.** The leader's SyncGroup carries the assignment: it is written to
  ``__consumer_offsets`` (group metadata record) and then handed to every parked
  SyncGroup; the group is Stable.
- **Heartbeats** keep a member's session: each member has one timer of
  ``session.timeout.ms``, restarted by heartbeats (and offset commits); when it fires the
  member is removed and the group rebalances. Members parked in JoinGroup/SyncGroup are
  spared, except brand-new members, whose join expires after five minutes.
- **Static members** (``group.instance.id``) keep their place across restarts: a rejoin
  with a known instance id replaces the old member id and fences the old one.

Every timer is a ``Timer`` key (heartbeat per member, join and sync per group); nothing
polls. State changes are synchronous on the event loop; parked requests are futures.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from dataplane import clock
from dataplane.groups.group import (
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    GroupState,
    JoinRequest,
    JoinResult,
    Member,
    SyncRequest,
    SyncResult,
)
from dataplane.groups.timer import Timer
from wire.errors import (
    BrokerError,
    CoordinatorNotAvailable,
    GroupMaxSizeReached,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidGroupId,
    InvalidSessionTimeout,
    MemberIdRequired,
    NotCoordinator,
    RebalanceInProgress,
    UnknownMemberId,
)

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.coordinator_log import CoordinatorLog

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""Kafka's classicGroupNewMemberJoinTimeoutMs: a parked first join expires after this."""

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


def _heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def _join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def _now_ms() -> int:
    return clock.now_ms()


class Membership:
    """The groups of this coordinator and their rebalance state machines."""

    def __init__(self, config: BrokerConfig, storage: CoordinatorLog) -> None:
        self.config = config
        self.storage = storage
        self.groups: dict[str, ClassicGroup] = {}
        self.timer = Timer()
        self.active = False

    def _setting(self, key: str) -> int:
        return self.config.get_int(key)

    # ------------------------------------------------------------------ lifecycle

    def on_loaded(self, groups: list[ClassicGroup]) -> None:
        """After replay: restart member sessions; shrink groups now over group.max.size."""
        max_size = self._setting("group.max.size")
        for group in groups:
            for member in group.members.values():
                self.reschedule_heartbeat(group, member)
            if len(group.members) > max_size:
                self._prepare_rebalance(group, f"loaded group is over group.max.size={max_size}")

    def shutdown(self) -> None:
        self.active = False
        self.timer.cancel_all()
        for group in self.groups.values():
            for member in group.members.values():
                for future in (member.join_future, member.sync_future):
                    if future is not None and not future.done():
                        future.cancel()

    def get_or_create(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id)
            self.groups[group_id] = group
        return group

    def forget(self, group: ClassicGroup) -> None:
        """Drop a deleted group: Dead state, timers cancelled."""
        group.transition_to(DEAD)
        self.groups.pop(group.group_id, None)
        self.timer.cancel(_join_key(group.group_id))
        self.timer.cancel(_sync_key(group.group_id))
        for member_id in [*group.members, *group.pending_join_members]:
            self.timer.cancel(_heartbeat_key(group.group_id, member_id))

    # ------------------------------------------------------------------ persistence

    def _store_group(
        self, group: ClassicGroup, assignment: dict[str, bytes]
    ) -> asyncio.Future[None] | None:
        return self.storage.append(group.group_id, [group.metadata_record(assignment)])

    def _store_quietly(self, group: ClassicGroup) -> None:
        """Write the group's metadata where a failure only costs a rebalance after restart."""
        record = group.metadata_record(group.assignments())
        self.storage.append_detached(group.group_id, [record], "metadata")

    # ------------------------------------------------------------------ join

    def join(self, req: JoinRequest) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

        def answer(error: BrokerError, member_id: str) -> asyncio.Future[JoinResult]:
            future.set_result(JoinResult(error, member_id))
            return future

        if not self.active:
            return answer(CoordinatorNotAvailable(), req.member_id)
        if req.group_id and not self.storage.owns(req.group_id):
            return answer(NotCoordinator(), req.member_id)
        if not req.group_id:
            return answer(InvalidGroupId("group id is empty"), req.member_id)
        low = self._setting("group.min.session.timeout.ms")
        high = self._setting("group.max.session.timeout.ms")
        if not low <= req.session_timeout_ms <= high:
            return answer(
                InvalidSessionTimeout(
                    f"session timeout {req.session_timeout_ms} ms is outside "
                    f"[{low}, {high}] (group.min/max.session.timeout.ms)"
                ),
                req.member_id,
            )
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(req.group_id)
        is_new = group is None
        if group is None:
            if not unknown:
                return answer(UnknownMemberId(f"group {req.group_id} not found"), req.member_id)
            group = self.get_or_create(req.group_id)
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            answer(
                GroupMaxSizeReached(
                    f"group {req.group_id} is at group.max.size={self._setting('group.max.size')}"
                ),
                UNKNOWN_MEMBER_ID,
            )
        elif unknown:
            self._join_new_member(group, req, future)
        else:
            self._join_existing_member(group, req, future)
        if is_new:
            self._store_quietly(group)
        return future

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self._setting("group.max.size")
        if group.is_in(EMPTY, DEAD):
            return True
        if group.is_in(PREPARING):
            known = group.has_member(member_id) and group.member(member_id).awaiting_join
            return known or group.num_awaiting_join < max_size
        return group.has_member(member_id) or len(group.members) < max_size

    def _join_new_member(
        self, group: ClassicGroup, req: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        if group.is_in(DEAD):
            future.set_result(JoinResult(CoordinatorNotAvailable(), UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            future.set_result(
                JoinResult(
                    InconsistentGroupProtocol("no protocol in common with the group"),
                    UNKNOWN_MEMBER_ID,
                )
            )
            return
        new_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            self._join_new_static_member(group, req, new_id, future)
        elif req.api_version >= 4:
            group.pending_join_members.add(new_id)
            gid = group.group_id
            self.timer.schedule(
                _heartbeat_key(gid, new_id),
                req.session_timeout_ms,
                lambda: self._expire_heartbeat(gid, new_id),
            )
            future.set_result(
                JoinResult(MemberIdRequired("rejoin with the given member id"), new_id)
            )
        else:
            self._add_member_then_rebalance(group, req, new_id, future)

    def _join_new_static_member(
        self,
        group: ClassicGroup,
        req: JoinRequest,
        new_id: str,
        future: asyncio.Future[JoinResult],
    ) -> None:
        assert req.group_instance_id is not None
        old_id = group.static_member_id(req.group_instance_id)
        if old_id is None:
            self._add_member_then_rebalance(group, req, new_id, future)
            return
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self.timer.cancel(_heartbeat_key(group.group_id, old_id))
        self.reschedule_heartbeat(group, member)
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future
        )
        if group.is_in(STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {new_id} rejoined with another protocol"
                )
                return
            try:
                durable = self._store_group(group, group.assignments())
            except BrokerError as exc:
                group.complete_join(member, JoinResult(exc, UNKNOWN_MEMBER_ID))
                return

            def done(error: BrokerError | None) -> None:
                if error is not None:
                    group.complete_join(member, JoinResult(error, UNKNOWN_MEMBER_ID))
                elif req.api_version >= 9:
                    leader = group.is_leader(new_id)
                    group.complete_join(
                        member, group.join_result(new_id, leader_view=leader, skip=leader)
                    )
                else:
                    result = group.join_result(new_id, leader_view=False)
                    group.complete_join(
                        member,
                        JoinResult(
                            None,
                            new_id,
                            result.generation_id,
                            result.protocol_type,
                            result.protocol_name,
                            previous_leader,
                        ),
                    )

            _when_durable(durable, done)
        elif group.is_in(COMPLETING):
            self._prepare_rebalance(group, f"static member {new_id} rejoined during sync")
        else:
            self._maybe_complete_join_phase(group)

    def _join_existing_member(  # noqa: PLR0912 - Kafka's classic-group join rules, step by step
        self, group: ClassicGroup, req: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        member_id = req.member_id
        if group.is_in(DEAD):
            future.set_result(JoinResult(CoordinatorNotAvailable(), member_id))
            return
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            future.set_result(
                JoinResult(InconsistentGroupProtocol("no protocol in common"), member_id)
            )
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                future.set_result(
                    JoinResult(UnknownMemberId("a pending member cannot be static"), member_id)
                )
                return
            self._add_member_then_rebalance(group, req, member_id, future)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except BrokerError as exc:
            future.set_result(JoinResult(exc, member_id))
            return
        member = group.member(member_id)
        if group.is_in(PREPARING):
            self._update_member_then_rebalance(group, member, req, future, "joining")
        elif group.is_in(COMPLETING):
            if member.matches(req.protocols):
                # A repeated join (the first answer was lost): answer for this generation.
                future.set_result(
                    group.join_result(member_id, leader_view=group.is_leader(member_id))
                )
            else:
                self._update_member_then_rebalance(group, member, req, future, "new metadata")
        elif group.is_in(STABLE):
            if group.is_leader(member_id):
                self._update_member_then_rebalance(group, member, req, future, "leader rejoins")
            elif not member.matches(req.protocols):
                self._update_member_then_rebalance(group, member, req, future, "new metadata")
            else:
                future.set_result(group.join_result(member_id, leader_view=False))
        else:
            future.set_result(
                JoinResult(UnknownMemberId(f"group {group.group_id} is empty"), member_id)
            )

    def _add_member_then_rebalance(
        self,
        group: ClassicGroup,
        req: JoinRequest,
        member_id: str,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        member.is_new = True
        if group.is_in(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True
        group.add(member, future)
        # A parked first join cannot heartbeat; expire it if the client has gone away.
        self.reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member_id} joins")

    def _update_member_then_rebalance(
        self,
        group: ClassicGroup,
        member: Member,
        req: JoinRequest,
        future: asyncio.Future[JoinResult],
        reason: str,
    ) -> None:
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, future
        )
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"member {member.member_id}: {reason}"
        )

    # ------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(COMPLETING):
            self._propagate_error(group, RebalanceInProgress("the group is rebalancing"))
        self.timer.cancel(_sync_key(group.group_id))
        initial = group.is_in(EMPTY)
        if initial:
            delay = self._setting("group.initial.rebalance.delay.ms")
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            gid = group.group_id
            self.timer.schedule(
                _join_key(gid),
                delay,
                lambda: self._try_complete_initial_rebalance(gid, delay, remaining),
            )
        group.transition_to(PREPARING)
        log.info(
            "preparing to rebalance group %s with old generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.is_in(PREPARING) and group.has_all_members_joined():
            self._complete_join(group)
        else:
            gid = group.group_id
            self.timer.schedule(
                _join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_of(gid)
            )

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self._setting("group.initial.rebalance.delay.ms"), remaining)
            new_remaining = max(remaining - delay, 0)
            self.timer.schedule(
                _join_key(group_id),
                new_delay,
                lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining),
            )
        else:
            self._complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (
            group.is_in(PREPARING)
            and group.has_all_members_joined()
            and group.previous_state is not EMPTY
        ):
            self._complete_join(group)

    def _complete_join_of(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.cancel(_join_key(gid))
        if not group.is_in(PREPARING):
            return
        gone = [m.member_id for m in group.not_yet_rejoined() if not m.is_static]
        for member_id in gone:
            group.remove(member_id)
            self.timer.cancel(_heartbeat_key(gid, member_id))
        if gone:
            log.info("group %s removed members that did not rejoin: %s", gid, gone)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another round for session expiry to clear them out.
            self.timer.schedule(
                _join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_of(gid)
            )
            return
        group.init_next_generation()
        if group.is_in(EMPTY):
            log.info("group %s with generation %d is now empty", gid, group.generation_id)
            self._store_quietly(group)
            return
        log.info(
            "stabilized group %s generation %d with %d members",
            gid,
            group.generation_id,
            len(group.members),
        )
        for member in list(group.members.values()):
            result = group.join_result(
                member.member_id, leader_view=group.is_leader(member.member_id)
            )
            group.complete_join(member, result)
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.timer.schedule(
            _sync_key(gid),
            group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(gid, generation),
        )

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation != group.generation_id:
            return
        if group.is_in(COMPLETING, STABLE) and group.pending_sync_members:
            late = sorted(group.pending_sync_members)
            for member_id in late:
                group.remove(member_id)
                self.timer.cancel(_heartbeat_key(group_id, member_id))
            self._prepare_rebalance(group, f"members {late} did not sync in time")

    # ------------------------------------------------------------------ sync

    def sync(self, req: SyncRequest) -> asyncio.Future[SyncResult]:
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        error = self._sync_error(req)
        if error is not None:
            future.set_result(SyncResult(error))
            return future
        assert req.group_id is not None
        group = self.groups[req.group_id]
        member_id = req.member_id
        if group.is_in(PREPARING):
            future.set_result(SyncResult(RebalanceInProgress("the group is rebalancing")))
        elif group.is_in(COMPLETING):
            group.member(member_id).sync_future = future
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_assignment(group, req)
        elif group.is_in(STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.member(member_id)
            future.set_result(
                SyncResult(None, group.protocol_type, group.protocol_name, member.assignment)
            )
        return future

    def _sync_error(self, req: SyncRequest) -> BrokerError | None:  # noqa: PLR0911 - Kafka's SyncGroup checks, in its order
        if not self.active:
            return CoordinatorNotAvailable()
        if req.group_id and not self.storage.owns(req.group_id):
            return NotCoordinator()
        if not req.group_id:
            return InvalidGroupId("group id is empty")
        group = self.groups.get(req.group_id)
        if group is None:
            return UnknownMemberId(f"group {req.group_id} not found")
        if group.is_in(DEAD):
            return CoordinatorNotAvailable()
        try:
            group.validate_member(req.member_id, req.group_instance_id)
        except BrokerError as exc:
            return exc
        if req.generation_id != group.generation_id:
            return IllegalGeneration(
                f"generation {req.generation_id} is not the group's {group.generation_id}"
            )
        for asked, actual in (
            (req.protocol_type, group.protocol_type),
            (req.protocol_name, group.protocol_name),
        ):
            if asked is not None and actual is not None and asked != actual:
                return InconsistentGroupProtocol(f"group uses {actual!r}, not {asked!r}")
        return None

    def _store_assignment(self, group: ClassicGroup, req: SyncRequest) -> None:
        assignment = {m: req.assignments.get(m, b"") for m in group.members}
        generation = req.generation_id
        try:
            durable = self._store_group(group, assignment)
        except BrokerError as exc:
            durable = _failed(exc)

        def done(error: BrokerError | None) -> None:
            # Another member may have joined meanwhile: only act on this generation.
            if (
                self.groups.get(group.group_id) is not group
                or not group.is_in(COMPLETING)
                or group.generation_id != generation
            ):
                return
            if error is not None:
                self._propagate_error(group, error)
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"storing the assignment failed: {error}"
                )
                return
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, b"")
            self._propagate(group, None)
            group.transition_to(STABLE)

        _when_durable(durable, done)

    def _propagate_error(self, group: ClassicGroup, error: BrokerError) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate(group, error)

    def _propagate(self, group: ClassicGroup, error: BrokerError | None) -> None:
        ptype = group.protocol_type if error is None else None
        pname = group.protocol_name if error is None else None
        for member in group.members.values():
            if group.complete_sync(member, SyncResult(error, ptype, pname, member.assignment)):
                self.reschedule_heartbeat(group, member)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(COMPLETING, STABLE) or not group.pending_sync_members:
            self.timer.cancel(_sync_key(group.group_id))

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(
        self, group_id: str | None, member_id: str, instance_id: str | None, generation: int
    ) -> None:
        """Raises the error to answer; returns on success."""
        if not self.active:
            raise CoordinatorNotAvailable()
        if group_id and not self.storage.owns(group_id):
            raise NotCoordinator()
        if not group_id:
            raise InvalidGroupId("group id is empty")
        group = self.groups.get(group_id)
        if group is None:
            raise UnknownMemberId(f"group {group_id} not found")
        if group.is_in(DEAD):
            raise CoordinatorNotAvailable()
        group.validate_member(member_id, instance_id)
        if generation != group.generation_id:
            raise IllegalGeneration(
                f"generation {generation} is not the group's {group.generation_id}"
            )
        if group.is_in(EMPTY):
            raise UnknownMemberId(f"group {group_id} is empty")
        self.reschedule_heartbeat(group, group.member(member_id))
        if group.is_in(PREPARING):
            raise RebalanceInProgress("the group is rebalancing; rejoin")

    def reschedule_heartbeat(
        self, group: ClassicGroup, member: Member, timeout_ms: int | None = None
    ) -> None:
        gid, mid = group.group_id, member.member_id
        delay = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timer.schedule(
            _heartbeat_key(gid, mid), delay, lambda: self._expire_heartbeat(gid, mid)
        )

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s expired", member_id, group_id)
            group.remove(member_id)
            if group.is_in(PREPARING) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s: session expired", member_id, group_id)
        self._remove_member_and_update(group, member, "session expired")

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.complete_join(member, JoinResult(UnknownMemberId(reason), UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(
                group, f"removing member {member.member_id}: {reason}"
            )
        elif group.is_in(PREPARING) and group.has_all_members_joined():
            self._complete_join(group)

    # ------------------------------------------------------------------ leave

    def leave(  # noqa: PLR0912 - Kafka's LeaveGroup rules, member by member
        self, group_id: str | None, members: list[tuple[str, str | None]]
    ) -> list[BrokerError | None]:
        """Per-member errors; raises for errors of the whole request."""
        if not self.active:
            raise CoordinatorNotAvailable()
        if group_id and not self.storage.owns(group_id):
            raise NotCoordinator()
        if not group_id:
            raise InvalidGroupId("group id is empty")
        group = self.groups.get(group_id)
        if group is None:
            return [UnknownMemberId(f"group {group_id} not found") for _ in members]
        if group.is_in(DEAD):
            raise CoordinatorNotAvailable()
        results: list[BrokerError | None] = []
        left: list[str] = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                static_id = group.static_member_id(instance_id) if instance_id else None
                if static_id is None:
                    results.append(UnknownMemberId(f"unknown instance {instance_id}"))
                    continue
                self._remove_current_member(group, static_id)
                left.append(static_id)
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(_heartbeat_key(group_id, member_id))
                left.append(member_id)
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except BrokerError as exc:
                    results.append(exc)
                    continue
                self._remove_current_member(group, member_id)
                left.append(member_id)
            results.append(None)
        if left:
            log.info("members %s left group %s", left, group_id)
            if group.is_in(STABLE, COMPLETING):
                self._maybe_prepare_rebalance_or_complete_join(group, f"{left} left the group")
            elif group.is_in(PREPARING):
                self._maybe_complete_join_phase(group)
        return results

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.member(member_id)
        self.timer.cancel(_heartbeat_key(group.group_id, member_id))
        group.complete_join(member, JoinResult(UnknownMemberId("member left"), UNKNOWN_MEMBER_ID))
        group.remove(member_id)


def _failed(error: BrokerError) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    return future


def _when_durable(
    durable: asyncio.Future[None] | None, then: Callable[[BrokerError | None], None]
) -> None:
    """Run ``then`` once a write is durable: now, or when its fsync finishes."""
    if durable is None:
        then(None)
        return

    def done(future: asyncio.Future[None]) -> None:
        if future.cancelled():
            then(NotCoordinator("the write was cancelled"))
            return
        exc = future.exception()
        if exc is None:
            then(None)
        elif isinstance(exc, BrokerError):
            then(exc)
        else:
            then(NotCoordinator(f"the write failed: {exc}"))

    if durable.done():
        done(durable)
    else:
        durable.add_done_callback(done)
