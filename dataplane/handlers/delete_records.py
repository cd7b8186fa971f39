"""DeleteRecords (21): move partitions' log start offsets forward (-1: the high watermark).

The answer's low watermark is the new log start offset; an offset below the current one
changes nothing. An offset above the high watermark, or negative other than -1, is
OFFSET_OUT_OF_RANGE; a topic without ``delete`` in cleanup.policy is POLICY_VIOLATION;
internal topics are INVALID_TOPIC_EXCEPTION (all as Kafka). A partition named twice is
answered once, for its last offset. Segments wholly below the new start are deleted at
once; consumers see the new earliest offset immediately.

With a remote tier the new log start is also committed to the metadata log (a
RemoteLogStart record, through the controller) before the answer: remote segments wholly
below it are deleted by the remote log manager, and every broker sees the same start.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.delete_records.v2 import request as req
from kio.schema.delete_records.v2 import response as resp
from kio.schema.errors import ErrorCode

from dataplane.authorizer import Operation
from dataplane.cluster import records as r
from dataplane.handlers.context import RequestContext
from dataplane.metadata import INTERNAL_TOPICS
from wire.errors import (
    BrokerError,
    InvalidTopic,
    OffsetOutOfRange,
    PolicyViolation,
    UnknownTopicOrPartition,
    error_code_for,
)

API_KEY = 21
ZERO = datetime.timedelta(0)
HIGH_WATERMARK = -1
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: req.DeleteRecordsRequest) -> Any:
    wanted: dict[str, dict[int, int]] = {}
    for topic in request.topics:
        offsets = wanted.setdefault(topic.name, {})
        for p in topic.partitions:
            offsets[p.partition_index] = p.offset
    topics = []
    for name, offsets in wanted.items():
        partitions = []
        for partition, offset in offsets.items():
            try:
                ctx.require_topic(Operation.DELETE, name)
                low = await _delete(ctx, name, partition, offset)
                code = ErrorCode.none
            except (BrokerError, OSError) as exc:
                low, code = -1, error_code_for(exc)
            partitions.append(
                ctx.make(
                    resp.DeleteRecordsPartitionResult,
                    partition_index=partition,
                    low_watermark=low,
                    error_code=code,
                )
            )
        topics.append(
            ctx.make(resp.DeleteRecordsTopicResult, name=name, partitions=tuple(partitions))
        )
    return ctx.make(resp.DeleteRecordsResponse, throttle_time=ZERO, topics=tuple(topics))


async def _delete(ctx: RequestContext, name: str, partition: int, offset: int) -> int:
    broker = ctx.broker
    if name in INTERNAL_TOPICS:
        raise InvalidTopic(f"Cannot delete records of internal topic {name}")
    if name not in broker.metadata.topics:
        raise UnknownTopicOrPartition(f"unknown topic {name!r}")
    part = broker.replicas.leader(name, partition)
    plog = part.plog
    if "delete" not in broker.logs.topic_config(name, "cleanup.policy"):
        raise PolicyViolation(
            f"Records of partition {plog.name} can not be deleted due to the configured policy"
        )
    if offset < 0 and offset != HIGH_WATERMARK:
        raise OffsetOutOfRange(f"The offset {offset} for partition {plog.name} is not valid")
    before = plog.first_offset
    if plog.tiered and part.state is not None:
        target = plog.high_watermark if offset == HIGH_WATERMARK else offset
        if target > plog.high_watermark:
            raise OffsetOutOfRange(
                f"cannot delete before {target}: high watermark is {plog.high_watermark}"
            )
        if target > before:
            topic_id = str(broker.metadata.topics[name].topic_id)
            await broker.cluster.commit_remote(
                part.state, [r.RemoteLogStart(topic_id, partition, target)]
            )
        if target > plog.log_start_offset:
            plog.delete_records_before(target)
    else:
        plog.delete_records_before(offset)
    low = plog.first_offset
    if low != before:
        log.info("%s: records before %d deleted on request", plog.name, low)
    return int(low)
