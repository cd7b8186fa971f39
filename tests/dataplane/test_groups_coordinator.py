"""The group coordinator's state machine, driven directly on a real in-process broker.

No network: a Broker is started on a temporary data directory and its coordinator is
called as the handlers call it. Timeouts are small (the minimum session timeout is
lowered) so that expiry paths run in well under a second; nothing asserts on timing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from dataplane.broker import Broker
from dataplane.config import BrokerConfig
from dataplane.groups.coordinator import GroupCoordinator, OffsetCommitEntry
from dataplane.groups.group import GroupState, JoinRequest, JoinResult, SyncRequest, SyncResult
from dataplane.groups.storage import OFFSETS_TOPIC
from wire.errors import (
    FencedInstanceId,
    GroupIdNotFound,
    GroupMaxSizeReached,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidSessionTimeout,
    MemberIdRequired,
    NonEmptyGroup,
    RebalanceInProgress,
    UnknownMemberId,
)

WAIT = 10.0

BrokerFactory = Callable[..., Any]


@pytest.fixture
async def start_broker(tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    started: list[Broker] = []

    async def factory(**settings: str) -> Broker:
        overrides = {
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "10",
            "offsets.topic.num.partitions": "3",
            **settings,
        }
        config = BrokerConfig.build(
            data_dir=str(tmp_path / "data"), listen="127.0.0.1:0", overrides=overrides
        )
        broker = Broker(config)
        await broker.start()
        started.append(broker)
        assert broker.groups is not None
        await broker.groups.storage.ensure_topic()  # as the first FindCoordinator does
        await broker.await_topic("__consumer_offsets")
        return broker

    yield factory
    for broker in started:
        await broker.stop()


def coordinator(broker: Broker) -> GroupCoordinator:
    assert broker.groups is not None
    return broker.groups


def join_request(
    group: str,
    member_id: str = "",
    *,
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"meta"),),
    session_ms: int = 5000,
    rebalance_ms: int = 5000,
    version: int = 5,
    instance_id: str | None = None,
    protocol_type: str = "consumer",
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=protocol_type,
        protocols=protocols,
        client_id="client",
        client_host="/127.0.0.1",
        api_version=version,
    )


async def join(broker: Broker, request: JoinRequest) -> JoinResult:
    return await asyncio.wait_for(coordinator(broker).membership.join(request), WAIT)


async def new_member(broker: Broker, group: str, **kwargs: Any) -> str:
    """The member id a v4+ first join is given (MEMBER_ID_REQUIRED)."""
    first = await join(broker, join_request(group, **kwargs))
    assert isinstance(first.error, MemberIdRequired)
    assert first.member_id.startswith("client-")
    return first.member_id


def sync_request(
    group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None
) -> SyncRequest:
    return SyncRequest(group, generation, member_id, None, "consumer", "range", assignments or {})


async def sync(broker: Broker, request: SyncRequest) -> SyncResult:
    return await asyncio.wait_for(coordinator(broker).membership.sync(request), WAIT)


async def test_member_id_required_then_single_member_group(start_broker: BrokerFactory) -> None:
    broker = await start_broker()
    member = await new_member(broker, "g1")
    joined = await join(broker, join_request("g1", member))
    assert joined.error is None
    assert joined.generation_id == 1
    assert joined.leader == member
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [member]
    group = coordinator(broker).groups["g1"]
    assert group.state is GroupState.COMPLETING_REBALANCE

    synced = await sync(broker, sync_request("g1", 1, member, {member: b"assignment"}))
    assert synced.error is None
    assert synced.assignment == b"assignment"
    assert group.state is GroupState.STABLE
    coordinator(broker).membership.heartbeat("g1", member, None, 1)


async def test_old_versions_join_without_member_id_round(start_broker: BrokerFactory) -> None:
    broker = await start_broker()
    joined = await join(broker, join_request("old", version=3))
    assert joined.error is None
    assert joined.generation_id == 1


async def test_initial_rebalance_delay_gathers_members(start_broker: BrokerFactory) -> None:
    broker = await start_broker(**{"group.initial.rebalance.delay.ms": "200"})
    membership = coordinator(broker).membership
    a = await new_member(broker, "gather")
    a_join = membership.join(join_request("gather", a))
    b = await new_member(broker, "gather")
    b_join = membership.join(join_request("gather", b))
    a_result, b_result = await asyncio.wait_for(asyncio.gather(a_join, b_join), WAIT)
    # One rebalance for both: the empty group waited for more members to arrive.
    assert a_result.generation_id == b_result.generation_id == 1
    assert {m.member_id for m in a_result.members} == {a, b}


async def test_two_members_rebalance_and_followers_wait_for_leader(
    start_broker: BrokerFactory,
) -> None:
    broker = await start_broker()
    membership = coordinator(broker).membership
    a = await new_member(broker, "g2")
    first = await join(broker, join_request("g2", a))
    await sync(broker, sync_request("g2", first.generation_id, a, {a: b"A-all"}))

    # A second member joins: the group prepares a rebalance and waits for A to rejoin.
    b = await new_member(broker, "g2")
    b_join = membership.join(join_request("g2", b))
    assert not b_join.done()
    with pytest.raises(RebalanceInProgress):
        membership.heartbeat("g2", a, None, first.generation_id)
    a_join = membership.join(join_request("g2", a))
    a_result, b_result = await asyncio.wait_for(asyncio.gather(a_join, b_join), WAIT)
    assert a_result.generation_id == b_result.generation_id == 2
    assert a_result.leader == b_result.leader == a
    assert {m.member_id for m in a_result.members} == {a, b}
    assert b_result.members == ()  # only the leader gets the member list

    # The follower syncs first and waits for the leader's assignment.
    b_sync = membership.sync(sync_request("g2", 2, b))
    await asyncio.sleep(0)
    assert not b_sync.done()
    a_sync = await sync(broker, sync_request("g2", 2, a, {a: b"A-half", b: b"B-half"}))
    assert a_sync.assignment == b"A-half"
    assert (await asyncio.wait_for(b_sync, WAIT)).assignment == b"B-half"
    assert membership.groups["g2"].state is GroupState.STABLE

    with pytest.raises(IllegalGeneration):
        membership.heartbeat("g2", b, None, 1)
    with pytest.raises(UnknownMemberId):
        membership.heartbeat("g2", "stranger", None, 2)


async def test_session_expiry_removes_member_and_rebalances(start_broker: BrokerFactory) -> None:
    broker = await start_broker()
    membership = coordinator(broker).membership
    a = await new_member(broker, "g3", session_ms=5000)
    await join(broker, join_request("g3", a, session_ms=5000))
    await sync(broker, sync_request("g3", 1, a))
    b = await new_member(broker, "g3", session_ms=100)
    b_join = membership.join(join_request("g3", b, session_ms=100))
    a_join = membership.join(join_request("g3", a, session_ms=5000))
    await asyncio.wait_for(asyncio.gather(a_join, b_join), WAIT)
    await sync(broker, sync_request("g3", 2, a))
    await sync(broker, sync_request("g3", 2, b))

    # B stops heartbeating: its session expires and the group rebalances without it.
    group = membership.groups["g3"]
    while b in group.members:
        if group.is_in(GroupState.STABLE):
            membership.heartbeat("g3", a, None, group.generation_id)
        await asyncio.sleep(0.02)
    assert group.state is GroupState.PREPARING_REBALANCE
    rejoined = await join(broker, join_request("g3", a, session_ms=5000))
    assert rejoined.generation_id == 3
    assert [m.member_id for m in rejoined.members] == [a]


async def test_members_that_do_not_rejoin_are_dropped_after_rebalance_timeout(
    start_broker: BrokerFactory,
) -> None:
    broker = await start_broker()
    membership = coordinator(broker).membership
    a = await new_member(broker, "g4", rebalance_ms=200)
    b = await new_member(broker, "g4", rebalance_ms=200)
    a_join = membership.join(join_request("g4", a, rebalance_ms=200))
    b_join = membership.join(join_request("g4", b, rebalance_ms=200))
    await asyncio.wait_for(asyncio.gather(a_join, b_join), WAIT)
    await sync(broker, sync_request("g4", 1, a))
    await sync(broker, sync_request("g4", 1, b))

    # A rejoins (a rebalance); B never does and is removed when the join phase times out.
    result = await join(broker, join_request("g4", a, rebalance_ms=200))
    assert result.generation_id == 2
    assert [m.member_id for m in result.members] == [a]
    assert b not in membership.groups["g4"].members


async def test_protocol_selection_and_inconsistent_protocol(start_broker: BrokerFactory) -> None:
    broker = await start_broker()
    membership = coordinator(broker).membership
    a = await new_member(broker, "g5", protocols=(("range", b"a1"), ("sticky", b"a2")))
    b = await new_member(broker, "g5", protocols=(("sticky", b"b2"),))
    a_join = membership.join(join_request("g5", a, protocols=(("range", b"a1"), ("sticky", b"a2"))))
    b_join = membership.join(join_request("g5", b, protocols=(("sticky", b"b2"),)))
    a_res, b_res = await asyncio.wait_for(asyncio.gather(a_join, b_join), WAIT)
    assert a_res.protocol_name == b_res.protocol_name == "sticky"
    assert {m.member_id: m.metadata for m in a_res.members} == {a: b"a2", b: b"b2"}

    stranger = await join(broker, join_request("g5", protocols=(("roundrobin", b""),)))
    assert isinstance(stranger.error, InconsistentGroupProtocol)
    other_type = await join(broker, join_request("g5", protocol_type="connect"))
    assert isinstance(other_type.error, InconsistentGroupProtocol)


async def test_session_timeout_bounds_and_group_max_size(start_broker: BrokerFactory) -> None:
    broker = await start_broker(**{"group.max.size": "1", "group.max.session.timeout.ms": "9000"})
    too_long = await join(broker, join_request("g6", session_ms=10000))
    assert isinstance(too_long.error, InvalidSessionTimeout)
    too_short = await join(broker, join_request("g6", session_ms=5))
    assert isinstance(too_short.error, InvalidSessionTimeout)

    a = await new_member(broker, "g6")
    await join(broker, join_request("g6", a))
    full = await join(broker, join_request("g6"))
    assert isinstance(full.error, GroupMaxSizeReached)
    assert full.member_id == ""


async def test_leave_makes_group_empty_and_deletable(start_broker: BrokerFactory) -> None:
    broker = await start_broker()
    coord = coordinator(broker)
    a = await new_member(broker, "g7")
    await join(broker, join_request("g7", a))
    await sync(broker, sync_request("g7", 1, a))
    assert isinstance(coord.delete_groups(["g7"])[0][0], NonEmptyGroup)
    assert coord.membership.leave("g7", [(a, None), ("ghost", None)])[1] is not None
    group = coord.groups["g7"]
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 2
    errors, _ = coord.delete_groups(["g7", "never"])
    assert errors[0] is None
    assert isinstance(errors[1], GroupIdNotFound)
    assert "g7" not in coord.groups


async def test_static_member_rejoin_fences_old_id(start_broker: BrokerFactory) -> None:
    broker = await start_broker()
    membership = coordinator(broker).membership
    first = await join(broker, join_request("g8", instance_id="inst-1"))
    assert first.error is None
    await sync(broker, sync_request("g8", first.generation_id, first.member_id))

    again = await join(broker, join_request("g8", instance_id="inst-1"))
    assert again.error is None
    assert again.member_id != first.member_id
    assert again.generation_id == first.generation_id  # same protocol: no rebalance
    with pytest.raises(FencedInstanceId):
        membership.heartbeat("g8", first.member_id, "inst-1", first.generation_id)
    membership.heartbeat("g8", again.member_id, "inst-1", again.generation_id)


def commit(
    coord: GroupCoordinator,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    generation: int = -1,
    member: str = "",
) -> list[Any]:
    entries = [OffsetCommitEntry(t, p, o, -1, f"m{o}") for (t, p), o in offsets.items()]
    outcome = coord.commit_offsets(group, generation, member, None, entries, api_version=8)
    return outcome.errors


async def test_commit_rules_follow_group_state(start_broker: BrokerFactory) -> None:
    broker = await start_broker()
    coord = coordinator(broker)
    # Simple consumers (generation -1) may commit to an empty or unknown group.
    assert commit(coord, "simple", {("t", 0): 5}) == [None]
    assert coord.groups["simple"].state is GroupState.EMPTY
    with pytest.raises(IllegalGeneration):
        commit(coord, "unknown", {("t", 0): 1}, generation=3, member="m")
    a = await new_member(broker, "g9")
    joined = await join(broker, join_request("g9", a))
    with pytest.raises(RebalanceInProgress):
        commit(coord, "g9", {("t", 0): 1}, generation=1, member=a)
    await sync(broker, sync_request("g9", 1, a))
    with pytest.raises(UnknownMemberId):
        commit(coord, "g9", {("t", 0): 1})
    with pytest.raises(IllegalGeneration):
        commit(coord, "g9", {("t", 0): 1}, generation=7, member=a)
    assert commit(coord, "g9", {("t", 0): 10}, generation=joined.generation_id, member=a) == [None]
    fetched = coord.fetch_offsets("g9", [("t", [0, 1])])
    offsets = {p: (c.offset if c else -1) for p, c in fetched[0][1]}
    assert offsets == {0: 10, 1: -1}


async def test_offsets_and_groups_survive_restart(
    start_broker: BrokerFactory, tmp_path: Path
) -> None:
    broker = await start_broker()
    coord = coordinator(broker)
    assert commit(coord, "keep", {("t", 0): 42, ("t", 1): 7}) == [None, None]
    assert commit(coord, "keep", {("t", 0): 43}) == [None]
    assert commit(coord, "gone", {("u", 0): 1}) == [None]
    coord.delete_groups(["gone"])
    a = await new_member(broker, "live")
    joined = await join(broker, join_request("live", a))
    await sync(broker, sync_request("live", joined.generation_id, a, {a: b"assigned"}))
    await broker.stop()

    again = await start_broker()
    coord = coordinator(again)
    fetched = dict(coord.fetch_offsets("keep", None))
    assert {p: c.offset for p, c in fetched["t"]} == {0: 43, 1: 7}
    assert {p: c.metadata for p, c in fetched["t"]} == {0: "m43", 1: "m7"}
    assert coord.fetch_offsets("gone", None) == []
    assert "gone" not in coord.groups
    live = coord.groups["live"]
    assert live.state is GroupState.STABLE
    assert live.generation_id == joined.generation_id
    assert live.members[a].assignment == b"assigned"
    coord.membership.heartbeat("live", a, None, joined.generation_id)
    assert (OFFSETS_TOPIC, 0) in again.logs.logs


async def test_expired_offsets_and_empty_groups_are_tombstoned(
    start_broker: BrokerFactory,
) -> None:
    broker = await start_broker(**{"offsets.retention.minutes": "1"})
    coord = coordinator(broker)
    assert commit(coord, "old", {("t", 0): 1}) == [None]
    a = await new_member(broker, "busy")
    joined = await join(broker, join_request("busy", a))
    await sync(broker, sync_request("busy", joined.generation_id, a))
    assert commit(coord, "busy", {("t", 0): 2}, generation=1, member=a) == [None]
    now = int(time.time() * 1000)
    assert coord.expire_offsets(now) == 0
    assert coord.expire_offsets(now + 61_000) == 1  # the active group keeps its offsets
    assert "old" not in coord.groups
    assert coord.fetch_offsets("busy", None) != []
    await broker.stop()
    again = coordinator(await start_broker())
    assert "old" not in again.groups
    assert again.fetch_offsets("old", None) == []


async def test_deleting_a_topic_forgets_its_offsets(start_broker: BrokerFactory) -> None:
    broker = await start_broker()
    coord = coordinator(broker)
    assert commit(coord, "reader", {("gone", 0): 3, ("kept", 0): 4}) == [None, None]
    coord.on_topic_deleted("gone")
    assert [t for t, _ in coord.fetch_offsets("reader", None)] == ["kept"]
    await broker.stop()
    again = coordinator(await start_broker())
    assert [t for t, _ in again.fetch_offsets("reader", None)] == ["kept"]


async def test_fsync_policy_commits_wait_for_disk(start_broker: BrokerFactory) -> None:
    broker = await start_broker(**{"log.flush.policy": "fsync"})
    coord = coordinator(broker)
    outcome = coord.commit_offsets(
        "durable", -1, "", None, [OffsetCommitEntry("t", 0, 1, -1, None)], api_version=8
    )
    assert outcome.durable is not None
    await asyncio.wait_for(outcome.durable, WAIT)


async def test_stop_cancels_parked_joins_and_timers(start_broker: BrokerFactory) -> None:
    broker = await start_broker(**{"group.initial.rebalance.delay.ms": "60000"})
    membership = coordinator(broker).membership
    member = await new_member(broker, "parked")
    parked = membership.join(join_request("parked", member))
    await asyncio.sleep(0)
    assert not parked.done()
    assert len(membership.timer) > 0
    await broker.stop()
    assert parked.cancelled()
    assert len(membership.timer) == 0
