"""TxnOffsetCommit (28): a transactional producer commits a group's offsets inside its
transaction (consume-transform-produce). The offsets go to the group's
``__consumer_offsets`` partition as a transactional batch and become visible to
OffsetFetch only when the transaction's COMMIT marker reaches that partition
(``dataplane/groups/txn_offsets.py``). WRITE on the transactional id, READ on the group
and on each topic are needed. The consumer's generation, member id and instance id (v3+)
are checked against the group as Kafka does (KIP-447): an old generation is
ILLEGAL_GENERATION, a member no longer in the group UNKNOWN_MEMBER_ID, so a zombie's
offsets never commit. v5 (transaction protocol version 2) is not served.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit.v4 import request as req
from kio.schema.txn_offset_commit.v4 import response as resp

from dataplane.authorizer import Operation
from dataplane.groups.coordinator import OffsetCommitEntry
from dataplane.handlers._groups import ZERO, coordinator_of
from dataplane.handlers._txn import require_transactional_id
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, NotCoordinator, error_code_for

API_KEY = 28
log = logging.getLogger(__name__)

Answer = tuple[str, int, ErrorCode]


def handle(ctx: RequestContext, request: req.TxnOffsetCommitRequest) -> Any:
    return _handle(ctx, request)


async def _handle(ctx: RequestContext, request: req.TxnOffsetCommitRequest) -> Any:
    wanted = [(str(t.name), p) for t in request.topics for p in t.partitions]
    answers: list[Answer] = []
    accepted: list[OffsetCommitEntry] = []
    try:
        require_transactional_id(ctx, Operation.WRITE, str(request.transactional_id))
        ctx.require_group(Operation.READ, str(request.group_id))
    except BrokerError as exc:
        return _response(ctx, [(t, p.partition_index, error_code_for(exc)) for t, p in wanted])
    topics = ctx.broker.metadata.topics
    for name, p in wanted:
        info = topics.get(name)
        if not ctx.on_topic(Operation.READ, name):
            answers.append((name, p.partition_index, ErrorCode.topic_authorization_failed))
        elif info is None or not 0 <= p.partition_index < info.partitions:
            answers.append((name, p.partition_index, ErrorCode.unknown_topic_or_partition))
        else:
            accepted.append(
                OffsetCommitEntry(
                    name,
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
            )
    if accepted:
        answers += await _commit(ctx, request, accepted)
    return _response(ctx, answers)


async def _commit(
    ctx: RequestContext, request: req.TxnOffsetCommitRequest, entries: list[OffsetCommitEntry]
) -> list[Answer]:
    try:
        member = (  # v3+; older versions carry no member
            int(getattr(request, "generation_id", -1)),
            str(getattr(request, "member_id", "")),
            getattr(request, "group_instance_id", None),
        )
        outcome = coordinator_of(ctx).commit_transactional_offsets(
            str(request.group_id),
            (int(request.producer_id), int(request.producer_epoch)),
            entries,
            member,
        )
        if outcome.durable is not None:
            await outcome.durable
    except (BrokerError, OSError, TimeoutError) as exc:
        if not isinstance(exc, BrokerError):
            log.error("writing transactional offsets failed: %s", exc)
            exc = NotCoordinator(f"write failed: {exc}")
        return [(e.topic, e.partition, error_code_for(exc)) for e in entries]
    return [
        (e.topic, e.partition, ErrorCode.none if err is None else error_code_for(err))
        for e, err in zip(entries, outcome.errors, strict=True)
    ]


def _response(ctx: RequestContext, answers: list[Answer]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, code in answers:
        by_topic.setdefault(topic, []).append(
            ctx.make(
                resp.TxnOffsetCommitResponsePartition, partition_index=partition, error_code=code
            )
        )
    return ctx.make(
        resp.TxnOffsetCommitResponse,
        throttle_time=ZERO,
        topics=tuple(
            ctx.make(resp.TxnOffsetCommitResponseTopic, name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )
