"""DescribeRemoteLog (32001, Sluice's own; ``wire.internal``): what the remote tier
holds, from this broker's metadata image. Any broker answers."""

from __future__ import annotations

import datetime
import json
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from wire.internal import (
    DESCRIBE_REMOTE_LOG_KEY,
    PAYLOAD_VERSION,
    DescribeRemoteLogResponse,
)

API_KEY = DESCRIBE_REMOTE_LOG_KEY
ZERO = i32Timedelta.parse(datetime.timedelta(0))


def handle(ctx: RequestContext, request: Any) -> Any:
    try:
        asked = json.loads(request.payload or b"{}").get("topics")
        if asked is not None and not all(isinstance(t, str) for t in asked):
            raise ValueError("topics must be a list of names or null")
    except (ValueError, AttributeError) as exc:
        return DescribeRemoteLogResponse(
            throttle_time=ZERO,
            error_code=ErrorCode.invalid_request,
            error_message=f"unreadable DescribeRemoteLog request: {exc}",
            payload=b"",
        )
    image = ctx.broker.metadata
    names = sorted(image.topics) if asked is None else [t for t in asked if t in image.topics]
    # the remote tier's segments are the topic's data: only topics the caller may READ
    names = [n for n in names if ctx.on_topic(Operation.READ, n)]
    topics: dict[str, Any] = {}
    for name in names:
        info = image.topics[name]
        partitions = {}
        for p in range(info.partitions):
            remote = image.remote_log(name, p)
            if remote is None:
                continue
            partitions[str(p)] = {
                "log_start_offset": remote.log_start_offset,
                "segments": [
                    s.to_dict()
                    for s in sorted(remote.segments.values(), key=lambda s: s.base_offset)
                ],
            }
        topics[name] = {"topic_id": str(info.topic_id), "partitions": partitions}
    doc = {
        "version": PAYLOAD_VERSION,
        "cluster_id": image.cluster_id,
        "topics": topics,
        "pending_topic_deletions": [
            {"topic": name, "topic_id": topic_id} for topic_id, name in image.remote_cleanup.items()
        ],
    }
    return DescribeRemoteLogResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        error_message=None,
        payload=json.dumps(doc, separators=(",", ":")).encode(),
    )
