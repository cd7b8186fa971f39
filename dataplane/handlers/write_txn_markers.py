"""WriteTxnMarkers (27): a transaction coordinator asks this broker, the leader of some of
a transaction's partitions, to write the COMMIT or ABORT marker there.

Broker to broker: CLUSTER_ACTION on the cluster is needed. Each partition is answered once
its marker is acknowledged by the ISR, or with the partition's error
(NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ...) for
the coordinator to retry or give up on.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v2 import request as req
from kio.schema.write_txn_markers.v2 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from dataplane.transactions.markers import MarkerJob, marker_error
from wire.transactions import ControlType

API_KEY = 27


def handle(ctx: RequestContext, request: req.WriteTxnMarkersRequest) -> Any:
    return _handle(ctx, request)


async def _handle(ctx: RequestContext, request: req.WriteTxnMarkersRequest) -> Any:
    allowed = ctx.on_cluster(Operation.CLUSTER_ACTION)
    writer = ctx.broker.marker_writer
    results = []
    for marker in request.markers:
        job = MarkerJob(
            int(marker.producer_id),
            int(marker.producer_epoch),
            ControlType.COMMIT if marker.transaction_result else ControlType.ABORT,
            int(marker.coordinator_epoch),
        )
        topics = []
        for topic in marker.topics:
            names = [int(p) for p in topic.partition_indexes]
            if allowed:
                outcomes = await asyncio.gather(
                    *(writer.write(str(topic.name), p, job) for p in names),
                    return_exceptions=True,
                )
                codes = [ErrorCode.none if o is None else marker_error(o) for o in outcomes]
            else:
                codes = [ErrorCode.cluster_authorization_failed] * len(names)
            topics.append(
                ctx.make(
                    resp.WritableTxnMarkerTopicResult,
                    name=topic.name,
                    partitions=tuple(
                        ctx.make(
                            resp.WritableTxnMarkerPartitionResult,
                            partition_index=p,
                            error_code=code,
                        )
                        for p, code in zip(names, codes, strict=True)
                    ),
                )
            )
        results.append(
            ctx.make(
                resp.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(topics)
            )
        )
    return ctx.make(resp.WriteTxnMarkersResponse, markers=tuple(results))
