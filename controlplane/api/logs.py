"""The Logs service (proto/sluice/v1/logs.proto): the brokers' log files, read and followed
(``controlplane/logs.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import grpc

from controlplane import errors
from controlplane.api.common import timestamp
from controlplane.config import Settings
from controlplane.errors import ControlPlaneError, rich_status
from controlplane.logs import Cursor, Line, follow, read_history
from controlplane.store import Store
from proto.sluice.v1 import logs_pb2 as pb
from proto.sluice.v1 import logs_pb2_grpc as pb_grpc

CHUNK_LINES = 1000
"""Lines per streamed message."""


def chunk(lines: Sequence[Line], omitted: int = 0) -> pb.LogChunk:
    out = pb.LogChunk(omitted=omitted)
    for line in lines:
        item = out.lines.add(broker_id=line.broker_id, line=line.text)
        if line.time is not None:
            item.time.CopyFrom(timestamp(line.time))
    return out


class LogsService(pb_grpc.LogsServicer):
    def __init__(self, store_: Store, settings: Settings) -> None:
        self.store = store_
        self.settings = settings

    def _paths(self, request: pb.ReadLogsRequest) -> dict[int, str]:
        name = request.cluster
        errors.existing_cluster(self.store, name)
        paths = {b.broker_id: b.log_path for b in self.store.brokers(name)}
        if request.HasField("broker_id"):
            if request.broker_id not in paths:
                raise errors.BrokerNotFound(
                    f"cluster {name!r} has no broker {request.broker_id} (its brokers: "
                    f"{', '.join(map(str, sorted(paths)))})",
                    cluster=name,
                    broker=request.broker_id,
                )
            return {request.broker_id: paths[request.broker_id]}
        return paths

    async def ReadLogs(
        self, request: pb.ReadLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.LogChunk]:
        try:
            if request.tail_lines < 0:
                raise errors.BadRequest(
                    f"tail_lines must be >= 0, got {request.tail_lines}", cluster=request.cluster
                )
            paths = self._paths(request)
        except ControlPlaneError as exc:
            status = rich_status(exc)
            await context.abort(status.code, status.details, status.trailing_metadata)
            return
        since = request.since.ToMicroseconds() / 1e6 if request.HasField("since") else None
        lines, omitted, cursors = await asyncio.to_thread(
            read_history, paths, since, request.tail_lines, self.settings.logs_max_lines
        )
        yield chunk(lines[:CHUNK_LINES], omitted)
        for start in range(CHUNK_LINES, len(lines), CHUNK_LINES):
            yield chunk(lines[start : start + CHUNK_LINES])
        if not request.follow:
            return
        followed: dict[int, Cursor] = cursors
        async for new in follow(followed, self.settings.logs_follow_interval_ms / 1000):
            for start in range(0, len(new), CHUNK_LINES):
                yield chunk(new[start : start + CHUNK_LINES])
