"""DeleteTopics (20): by name (v1+) or by topic id (v6), as Kafka's controller checks.

With ``delete.topic.enable=false`` every topic fails: INVALID_REQUEST before v3,
TOPIC_DELETION_DISABLED after. Duplicate names or ids, a name together with an id, or
neither, are INVALID_REQUEST; unknown names UNKNOWN_TOPIC_OR_PARTITION and unknown ids
UNKNOWN_TOPIC_ID. A deleted topic disappears from the metadata at once; the answer waits
until its partition directories are gone (renamed, then removed in a thread), and
fetches long-polling on it are woken.

Sluice refuses to delete its internal topics (INVALID_TOPIC_EXCEPTION, the code Kafka uses
for DeleteRecords on them): the group coordinator holds ``__consumer_offsets`` open.
Apache Kafka 4.x deletes them when asked.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.delete_topics.v6 import request as req
from kio.schema.delete_topics.v6 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster.changes import Changes
from dataplane.handlers._configs import duplicates
from dataplane.handlers._controller import via_controller_except
from dataplane.handlers.context import RequestContext
from wire.errors import (
    BrokerError,
    InvalidRequest,
    InvalidTopic,
    TopicAuthorizationFailed,
    TopicDeletionDisabled,
    UnknownTopicId,
    UnknownTopicOrPartition,
    error_code_for,
    error_message_for,
)

API_KEY = 20
ZERO = datetime.timedelta(0)
ZERO_UUID = uuid.UUID(int=0)
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
UNKNOWN_ID_MESSAGE = "This server does not host this topic ID."
log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Result:
    name: str | None
    topic_id: uuid.UUID | None
    error: BaseException | None = None


def handle(ctx: RequestContext, request: req.DeleteTopicsRequest) -> Any:
    image = ctx.broker.metadata

    def deleted(response: Any) -> bool:
        return all(
            r.name not in image.topics for r in response.responses if r.error_code == ErrorCode.none
        )

    def refusal(item: Any) -> Any | None:
        """DELETE on the topic (Kafka's), checked here: the controller sees this broker."""
        if isinstance(item, str):
            name, topic_id = item, None
        else:
            topic_id = item.topic_id if item.topic_id != ZERO_UUID else None
            info = None if topic_id is None else image.topics_by_id.get(topic_id)
            name = info.name if info is not None else item.name
        if name is None or ctx.on_topic(Operation.DELETE, name):
            return None
        denied = TopicAuthorizationFailed("Authorization failed.")
        return _entry(ctx, _Result(item.name if topic_id else name, topic_id, denied))

    items = "topic_names" if ctx.api_version < 6 else "topics"
    return via_controller_except(
        ctx, request, _decide, deleted, items=items, results="responses", refusal=refusal
    )


def _decide(ctx: RequestContext, request: Any, changes: Changes) -> Any:
    wanted = _wanted(ctx, request)
    if not ctx.broker.config.get_bool("delete.topic.enable"):
        refusal: BrokerError = (
            InvalidRequest("Topic deletion is disabled.")
            if ctx.api_version < 3
            else TopicDeletionDisabled("Topic deletion is disabled.")
        )
        return _response(ctx, [_Result(n, i, refusal) for n, i in wanted])
    return _response(ctx, _delete(ctx, wanted, changes))


def _wanted(ctx: RequestContext, request: Any) -> list[tuple[str | None, uuid.UUID | None]]:
    if ctx.api_version < 6:
        return [(name, None) for name in request.topic_names]
    return [(t.name, t.topic_id if t.topic_id != ZERO_UUID else None) for t in request.topics]


def _delete(  # noqa: PLR0912 - Kafka's DeleteTopics checks, in its order
    ctx: RequestContext, wanted: list[tuple[str | None, uuid.UUID | None]], changes: Changes
) -> list[_Result]:
    broker = ctx.broker
    topics = broker.metadata.topics
    by_id = broker.metadata.topics_by_id
    repeated_names = duplicates(n for n, i in wanted if n is not None and i is None)
    repeated_ids = duplicates(i for n, i in wanted if n is None and i is not None)
    supplied_ids = {i for n, i in wanted if n is None and i is not None}
    results: list[_Result] = []
    answered: set[tuple[str | None, uuid.UUID | None]] = set()
    for name, topic_id in wanted:
        if (name, topic_id) in answered and (name in repeated_names or topic_id in repeated_ids):
            continue  # one answer per duplicated name or id, as Kafka
        answered.add((name, topic_id))
        result = _Result(name, topic_id)
        results.append(result)
        if name is None and topic_id is None:
            result.error = InvalidRequest("Neither topic name nor id were specified.")
        elif name is not None and topic_id is not None:
            result.error = InvalidRequest("You may not specify both topic name and topic id.")
        elif name in repeated_names:
            result.error = InvalidRequest("Duplicate topic name.")
        elif topic_id in repeated_ids:
            result.error = InvalidRequest("Duplicate topic id.")
        elif topic_id is not None:
            info = by_id.get(topic_id)
            if info is None:
                result.error = UnknownTopicId(UNKNOWN_ID_MESSAGE)
            else:
                result.name = info.name
        elif name not in topics:
            result.error = UnknownTopicOrPartition(UNKNOWN_TOPIC_MESSAGE)
        else:
            result.topic_id = topics[name].topic_id
            if result.topic_id in supplied_ids:  # Kafka keeps the id, refuses the name
                result.error = InvalidRequest(
                    "The provided topic name maps to an ID that was already supplied."
                )
    for result in results:
        if result.error is not None or result.name is None:
            continue
        info = topics[result.name]
        if info.internal:
            result.error = InvalidTopic(f"Cannot delete internal topic {info.name}")
            continue
        try:
            changes.delete_topic(broker.topic_removals, info.name)
        except (BrokerError, OSError) as exc:
            result.error = exc
    return results


def _response(ctx: RequestContext, results: list[_Result]) -> Any:
    entries = tuple(_entry(ctx, r) for r in results)
    return ctx.make(resp.DeleteTopicsResponse, throttle_time=ZERO, responses=entries)


def _entry(ctx: RequestContext, r: _Result) -> Any:
    code = ErrorCode.none if r.error is None else error_code_for(r.error)
    message = None if r.error is None else error_message_for(r.error)
    return ctx.make(
        resp.DeletableTopicResult,
        name=r.name,
        topic_id=r.topic_id or ZERO_UUID,
        error_code=code,
        error_message=message,
    )
