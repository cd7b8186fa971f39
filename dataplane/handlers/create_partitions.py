"""CreatePartitions (37): grow topics; partition counts only ever increase.

Checks in Kafka's order: duplicate names (INVALID_REQUEST, listed first), unknown topic
(UNKNOWN_TOPIC_OR_PARTITION), a count that is not an increase (INVALID_PARTITIONS), as
many manual assignments as new partitions, each naming only this broker
(INVALID_REPLICA_ASSIGNMENT). Sluice adds max.partitions.per.topic (INVALID_PARTITIONS)
and refuses internal topics (INVALID_TOPIC_EXCEPTION): the group coordinator maps groups
to ``__consumer_offsets`` partitions by their count. ``validate_only`` changes nothing.
New partition logs are created before the answer.
"""

from __future__ import annotations

import datetime
import logging
from collections import Counter
from typing import Any

from kio.schema.create_partitions.v3 import request as req
from kio.schema.create_partitions.v3 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster.changes import Changes
from dataplane.cluster.topics import check_assignment
from dataplane.handlers._controller import via_controller_except
from dataplane.handlers.context import RequestContext
from wire.errors import (
    BrokerError,
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidRequest,
    InvalidTopic,
    TopicAuthorizationFailed,
    UnknownTopicOrPartition,
    error_code_for,
    error_message_for,
)

API_KEY = 37
ZERO = datetime.timedelta(0)
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: req.CreatePartitionsRequest) -> Any:
    image = ctx.broker.metadata
    wanted = {t.name: t.count for t in request.topics}

    def grown(response: Any) -> bool:
        return all(
            r.name not in image.topics or image.topics[r.name].partitions >= wanted[r.name]
            for r in response.results
            if r.error_code == ErrorCode.none
        )

    def refusal(topic: Any) -> Any | None:
        """ALTER on the topic (Kafka's), checked here: the controller sees this broker."""
        if ctx.on_topic(Operation.ALTER, topic.name):
            return None
        return _result(ctx, topic.name, TopicAuthorizationFailed("Authorization failed."))

    settled = None if request.validate_only else grown
    return via_controller_except(
        ctx, request, _decide, settled, items="topics", results="results", refusal=refusal
    )


def _decide(ctx: RequestContext, request: Any, changes: Changes) -> Any:
    counts = Counter(t.name for t in request.topics)
    results: list[Any] = []
    duplicate = InvalidRequest("Duplicate topic name.")
    for name in dict.fromkeys(t.name for t in request.topics if counts[t.name] > 1):
        results.append(_result(ctx, name, duplicate))
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        try:
            _grow(ctx, topic, changes, validate_only=request.validate_only)
            results.append(_result(ctx, topic.name, None))
        except (BrokerError, OSError) as exc:
            results.append(_result(ctx, topic.name, exc))
    return ctx.make(resp.CreatePartitionsResponse, throttle_time=ZERO, results=tuple(results))


def _grow(ctx: RequestContext, topic: Any, changes: Changes, *, validate_only: bool) -> None:
    broker = ctx.broker
    info = broker.metadata.topics.get(topic.name)
    if info is None:
        raise UnknownTopicOrPartition()
    if info.internal:
        raise InvalidTopic(f"Cannot change the partition count of internal topic {info.name}")
    current, count = info.partitions, topic.count
    if count == current:
        raise InvalidPartitions(f"Topic already has {current} partition(s).")
    if count < current:
        raise InvalidPartitions(
            f"The topic {info.name} currently has {current} partition(s); {count} would not "
            "be an increase."
        )
    additional = count - current
    if topic.assignments is not None:
        if len(topic.assignments) != additional:
            raise InvalidReplicaAssignment(
                f"Attempted to add {additional} additional partition(s), but only "
                f"{len(topic.assignments)} assignment(s) were specified."
            )
        for assignment in topic.assignments:
            check_assignment(changes, list(assignment.broker_ids), info.replication_factor)
    limit = broker.config.get_int("max.partitions.per.topic")
    if count > limit:
        raise InvalidPartitions(
            f"Number of partitions {count} exceeds max.partitions.per.topic={limit}."
        )
    if not validate_only:
        assignment = (
            None
            if topic.assignments is None
            else [[int(b) for b in a.broker_ids] for a in topic.assignments]
        )
        changes.add_partitions(info.name, count, assignment)
        log.info("topic %s grown from %d to %d partitions", info.name, current, count)


def _result(ctx: RequestContext, name: str, exc: BaseException | None) -> Any:
    return ctx.make(
        resp.CreatePartitionsTopicResult,
        name=name,
        error_code=ErrorCode.none if exc is None else error_code_for(exc),
        error_message=None if exc is None else error_message_for(exc),
    )
