"""Scale-in planning: new replica lists that move partitions off the brokers that go."""

from __future__ import annotations

from controlplane.kafka import PartitionInfo, TopicMetadata
from controlplane.topics import plan_reassignment


def topic(name: str, *replicas: tuple[int, ...], internal: bool = False) -> TopicMetadata:
    return TopicMetadata(
        name=name,
        topic_id="",
        internal=internal,
        partitions=tuple(
            PartitionInfo(partition=i, leader=r[0], replicas=r, isr=r)
            for i, r in enumerate(replicas)
        ),
    )


def test_removed_brokers_are_replaced_in_place_by_the_least_loaded() -> None:
    topics = [
        topic("a", (3, 0, 1), (0, 3, 2), (1, 2, 0)),
        topic("b", (2, 1), (3,)),
    ]
    moves, problem = plan_reassignment(topics, {3}, [0, 1, 2])
    assert problem is None
    # loads before: 0 -> 3, 1 -> 3, 2 -> 3; each choice raises the chosen broker's load
    assert moves == {
        ("a", 0): [2, 0, 1],  # only 2 does not hold it
        ("a", 1): [0, 1, 2],  # only 1 does not hold it; order kept otherwise
        ("b", 1): [0],  # 0 is the least loaded now (ties go to the lowest id)
    }


def test_partitions_not_on_removed_brokers_stay() -> None:
    moves, problem = plan_reassignment([topic("a", (0, 1, 2))], {3, 4}, [0, 1, 2])
    assert (moves, problem) == ({}, None)


def test_two_removed_replicas_get_two_different_brokers() -> None:
    moves, problem = plan_reassignment([topic("a", (3, 4, 0))], {3, 4}, [0, 1, 2])
    assert problem is None
    assert moves == {("a", 0): [1, 2, 0]}


def test_more_replicas_than_remaining_brokers_is_a_reason_not_a_plan() -> None:
    moves, problem = plan_reassignment([topic("a", (0, 1))], {1}, [0])
    assert moves == {}
    assert problem == "partition a-0 has 2 replicas but only 1 broker(s) would remain"


def test_every_stuck_partition_is_named_the_users_topics_first() -> None:
    """Metadata lists topics in no fixed order: the reason must not depend on it."""
    topics = [
        topic("__a_users_topic", (0, 1)),
        topic("b", (1, 0), (0,)),
        topic("a", (0, 1)),
    ]
    for order in (topics, topics[::-1]):
        moves, problem = plan_reassignment(order, {1}, [0])
        assert moves == {}
        assert problem == (
            "partition a-0 has 2 replicas but only 1 broker(s) would remain "
            "(and 2 more: b-0, __a_users_topic-0)"
        )


def test_an_internal_topic_shrinks_to_the_brokers_that_remain() -> None:
    """The service made its own topics with min(3, brokers) replicas: a usage topic created
    while the cluster had two brokers must not stop a scale-in to one."""
    topics = [
        topic("__sluice_usage", (1, 0), internal=True),
        topic("__consumer_offsets", (0, 1), (1, 0), internal=True),
        topic("a", (0,), (0,)),
    ]
    moves, problem = plan_reassignment(topics, {1}, [0])
    assert problem is None
    assert moves == {
        ("__sluice_usage", 0): [0],
        ("__consumer_offsets", 0): [0],
        ("__consumer_offsets", 1): [0],
    }


def test_an_internal_topic_keeps_as_many_replicas_as_brokers_remain() -> None:
    # 5 brokers to 2: three replicas become two, the kept one first, one added in place
    moves, problem = plan_reassignment(
        [topic("__transaction_state", (4, 0, 3), internal=True)], {2, 3, 4}, [0, 1]
    )
    assert problem is None
    assert moves == {("__transaction_state", 0): [1, 0]}
    # an internal topic with no more replicas than remain is moved like any other
    moves, problem = plan_reassignment(
        [topic("__consumer_offsets", (2, 0), internal=True)], {2}, [0, 1]
    )
    assert (moves, problem) == ({("__consumer_offsets", 0): [1, 0]}, None)


def test_a_users_topic_named_like_an_internal_one_is_not_shrunk() -> None:
    moves, problem = plan_reassignment([topic("__sluice_usage", (0, 1))], {1}, [0])
    assert moves == {}
    assert problem == "partition __sluice_usage-0 has 2 replicas but only 1 broker(s) would remain"
