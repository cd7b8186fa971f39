"""RemoteLogMetadata (32000, Sluice's own): a partition leader asks the controller to commit
remote-tier records (see ``wire.internal``). Only the active controller
answers; it refuses a sender that does not lead the partition at the epoch it names."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64

from dataplane.authorizer import Operation
from dataplane.cluster import records as r
from dataplane.handlers.context import RequestContext
from wire.errors import BrokerError, CorruptRecord, error_code_for, error_message_for
from wire.internal import REMOTE_LOG_METADATA_KEY, RemoteLogMetadataResponse

API_KEY = REMOTE_LOG_METADATA_KEY
ZERO = i32Timedelta.parse(datetime.timedelta(0))


def handle(ctx: RequestContext, request: Any) -> Any:
    return _commit(ctx, request)


async def _commit(ctx: RequestContext, request: Any) -> Any:
    controller = ctx.broker.cluster.local_controller()
    if not ctx.on_cluster(Operation.CLUSTER_ACTION):  # brokers only
        return _answer(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    if controller is None:
        return _answer(ErrorCode.not_controller, None)
    try:
        records = r.decode(request.records)
        index = await controller.commit_remote(
            int(request.broker_id),
            str(request.topic),
            int(request.partition),
            int(request.leader_epoch),
            records,
        )
    except CorruptRecord as exc:
        return _answer(ErrorCode.invalid_request, str(exc))
    except BrokerError as exc:
        return _answer(error_code_for(exc), error_message_for(exc))
    return _answer(ErrorCode.none, None, index)


def _answer(code: ErrorCode, message: str | None, index: int = -1) -> RemoteLogMetadataResponse:
    return RemoteLogMetadataResponse(
        throttle_time=ZERO, error_code=code, error_message=message, metadata_offset=i64(index)
    )
