"""Fetch (1): serve stored batches from a fetch offset, long-polling for min_bytes.

Only a partition's leader answers (NOT_LEADER_OR_FOLLOWER elsewhere; FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH for a client whose leader epoch is older / newer). Consumers read up
to the high watermark -- with ``isolation_level`` 1 (read_committed, v4+) up to the last
stable offset, and the answer lists the aborted transactions overlapping the range served
(``aborted_transactions``; null for read_uncommitted, as Kafka); every answer carries the
LSO in ``last_stable_offset``. A follower (``replica_id`` >= 0) reads up to the log end, and
its fetch offset tells the leader how far it has replicated. The handler reads once; if fewer
than ``min_bytes`` are ready it waits, up to ``max_wait``, on the requested partitions'
``Partition`` waiters (woken by an append, a high-watermark advance, a truncation or the
log closing; a marker moving the LSO is an append, a marker passing the high watermark an
advance) and reads again. It runs as its own task, so a waiting fetch never holds back
other requests on the connection. Fetch sessions (KIP-227) are not kept: the answer's
session id is 0, which tells clients to send full fetch requests.

With a remote tier, a consumer's fetch below the local log start is read from the object
store (``RemoteLogManager.read``, off the event loop, bounded by remote.fetch.max.wait.ms;
a failure answers KAFKA_STORAGE_ERROR, which clients retry). Remote segments are wholly
below the LSO; a read_committed answer lists the aborted transactions overlapping what was
served, from the segment's uploaded ``.txnindex``
(``RemoteLogManager.aborted_transactions``), and a failure to read that fails the
partition as a failed read does. A follower's fetch there gets
OFFSET_MOVED_TO_TIERED_STORAGE: it starts its log at the leader's local log start, which
the answer's log_start_offset carries for followers.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v18 import request as req
from kio.schema.fetch.v18 import response as resp

from dataplane.authorizer import Operation
from dataplane.handlers.context import RequestContext
from dataplane.handlers.leader_hints import FETCH_HINT_VERSION, FETCH_HINTED, LeaderHints
from dataplane.log.partition_log import PartitionLog
from dataplane.log.region import FileRegion
from dataplane.replication.partition import Partition
from wire.errors import BrokerError, error_code_for
from wire.fetch_response import PartitionAnswer, encode_fetch
from wire.framing import EncodedResponse
from wire.record_batch import iter_headers

API_KEY = 1
ZERO = datetime.timedelta(0)
REMOTE = b"<remote>"
"""Placeholder result of a partition to read from the remote tier."""
ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1
Records = bytes | memoryview | FileRegion
"""A partition's answer: batches read, or a region of a file the connection sends."""


@dataclass(slots=True)
class _Wanted:
    topic: Any
    partition: int
    offset: int
    max_bytes: int
    plog: PartitionLog | None
    error: ErrorCode
    replica: bool = False
    """A follower's fetch: reads up to the log end, not the high watermark."""
    part: Partition | None = None
    """The replica resolved (set with ``plog``): a long poll waits on it."""
    committed: bool = False
    """read_committed: reads up to the last stable offset."""


def handle(ctx: RequestContext, request: req.FetchRequest) -> Any:
    wanted = _resolve(ctx, request)
    region_min = ctx.broker.config.get_int("socket.sendfile.min.bytes")
    results, total = _read_all(wanted, request.max_bytes, region_min)
    if any(data is REMOTE for _, data in results):
        return _read_remote(ctx, request, wanted, results, total)
    wait_ms = request.max_wait.total_seconds() * 1000
    if (
        total >= request.min_bytes
        or wait_ms <= 0
        or any(w.error is not ErrorCode.none for w in wanted)
    ):
        return _response(ctx, request, wanted, results)
    return _long_poll(ctx, request, wanted, wait_ms / 1000, region_min)


async def _long_poll(
    ctx: RequestContext, request: Any, wanted: list[_Wanted], wait_s: float, region_min: int
) -> Any:
    deadline = time.monotonic() + wait_s
    while True:
        # Read first: requests behind this one on the connection may have appended
        # between the handler's first read and this task's start.
        results, total = _read_all(wanted, request.max_bytes, region_min)
        remaining = deadline - time.monotonic()
        failed = any(code is not ErrorCode.none for code, _ in results)
        if total >= request.min_bytes or remaining <= 0 or failed:
            return _response(ctx, request, wanted, results)
        futures = [w.part.new_data_future() for w in wanted if w.part is not None]
        if not futures:
            return _response(ctx, request, wanted, results)
        _, not_done = await asyncio.wait(
            futures, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
        )
        for future in not_done:
            future.cancel()


async def _read_remote(
    ctx: RequestContext,
    request: Any,
    wanted: list[_Wanted],
    results: list[tuple[ErrorCode, Records]],
    total: int,
) -> Any:
    remote = ctx.broker.remote
    out = list(results)
    aborted: dict[int, list[tuple[int, int]]] = {}
    budget = max(request.max_bytes - total, 1)
    for i, (w, (_, data)) in enumerate(zip(wanted, results, strict=True)):
        if data is not REMOTE:
            continue
        if remote is None or w.plog is None:
            out[i] = (ErrorCode.offset_out_of_range, b"")
            continue
        try:
            got = await remote.read(w.plog, w.offset, max(min(w.max_bytes, budget), 1))
            if w.committed and got:
                end = _served_end(got, w.offset)
                aborted[i] = await remote.aborted_transactions(w.plog, w.offset, end)
        except BrokerError as exc:
            out[i] = (error_code_for(exc), b"")
            continue
        budget = max(budget - len(got), 0)
        out[i] = (ErrorCode.none, got)
        ctx.broker.usage.meter.tiered_retrieval(w.plog.topic, len(got))
    return _response(ctx, request, wanted, out, aborted)


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


def _resolve(ctx: RequestContext, request: Any) -> list[_Wanted]:
    broker = ctx.broker
    replica_id = _replica_id(request)
    committed = replica_id < 0 and getattr(request, "isolation_level", 0) == READ_COMMITTED
    now = time.monotonic()
    wanted: list[_Wanted] = []
    # a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic (Kafka's)
    follower_allowed = replica_id < 0 or ctx.on_cluster(Operation.CLUSTER_ACTION)
    for topic in request.topics:
        name = getattr(topic, "topic", None)
        topic_id = getattr(topic, "topic_id", None)
        error = ErrorCode.none
        if name is None:
            info = broker.metadata.topics_by_id.get(topic_id)  # type: ignore[arg-type]
            if info is None:
                error = ErrorCode.unknown_topic_id
            else:
                name = info.name
        if error is ErrorCode.none and not (
            follower_allowed if replica_id >= 0 else ctx.on_topic(Operation.READ, name or "")
        ):
            error = ErrorCode.topic_authorization_failed
        for p in topic.partitions:
            part = plog = None
            perr = error
            if perr is ErrorCode.none:
                try:
                    part = broker.replicas.leader(
                        name,  # type: ignore[arg-type]
                        p.partition,
                        getattr(p, "current_leader_epoch", -1),
                    )
                    plog = part.plog
                    if replica_id >= 0:
                        part.record_follower_fetch(replica_id, p.fetch_offset, now)
                except BrokerError as exc:
                    perr = error_code_for(exc)
            wanted.append(
                _Wanted(
                    topic,
                    p.partition,
                    p.fetch_offset,
                    p.partition_max_bytes,
                    plog,
                    perr,
                    replica_id >= 0,
                    part,
                    committed,
                )
            )
    return wanted


def _read_all(
    wanted: list[_Wanted], max_bytes: int, region_min: int
) -> tuple[list[tuple[ErrorCode, Records]], int]:
    """Each partition's batches; with ``region_min`` > 0, as a ``FileRegion`` where they
    add up to that many bytes."""
    results: list[tuple[ErrorCode, Records]] = []
    total = 0
    for w in wanted:
        if w.plog is None:
            results.append((w.error, b""))
            continue
        budget = min(w.max_bytes, max_bytes - total)
        if budget <= 0 and total > 0:
            results.append((ErrorCode.none, b""))
            continue
        plog = w.plog
        if w.offset < plog.log_start_offset and plog.tiered and w.offset >= plog.first_offset:
            if w.replica:
                results.append((ErrorCode.offset_moved_to_tiered_storage, b""))
            else:
                results.append((ErrorCode.none, REMOTE))
            continue
        try:
            if w.replica:
                upper = plog.log_end_offset
            else:
                upper = plog.last_stable_offset if w.committed else plog.high_watermark
            if w.offset > upper and not w.replica and w.offset <= plog.log_end_offset:
                data: Records = b""  # beyond the HW / LSO: nothing yet
            else:
                data = plog.read_region(
                    w.offset, max(budget, 1), upper=upper, region_min=region_min
                )
        except BrokerError as exc:
            results.append((error_code_for(exc), b""))
            continue
        total += len(data)
        results.append((ErrorCode.none, data))
    return results, total


def _response(
    ctx: RequestContext,
    request: Any,
    wanted: list[_Wanted],
    results: list[tuple[ErrorCode, Records]],
    remote_aborted: dict[int, list[tuple[int, int]]] | None = None,
) -> Any:
    """``remote_aborted``: the aborted transactions of partitions (by position) read from
    the remote tier with read_committed. Encoded by ``wire.fetch_response`` unless a
    partition's error carries a leader hint (KIP-951, v16+: tagged fields), then by kio."""
    by_topic: dict[int, tuple[Any, list[PartitionAnswer]]] = {}
    meter = ctx.broker.usage.meter
    hinted = ctx.api_version >= FETCH_HINT_VERSION and any(
        code in FETCH_HINTED for code, _ in results
    )
    for i, (w, (code, data)) in enumerate(zip(wanted, results, strict=True)):
        plog = w.plog
        if data and plog is not None:
            if w.replica:
                meter.replication(plog.topic, len(data))
            else:
                meter.bytes_out(plog.topic, ctx.caller, len(data))
        hw = lso = start = -1
        aborted: list[tuple[int, int]] | None = None
        if plog is not None:
            hw = plog.high_watermark
            lso = plog.last_stable_offset
            start = plog.log_start_offset if w.replica else plog.first_offset
            if w.committed and remote_aborted is not None and i in remote_aborted:
                aborted = remote_aborted[i]
            elif w.committed:
                aborted = _aborted(plog, w.offset, data)
        answer = (w.partition, code.value, hw, lso, start, aborted, data)
        by_topic.setdefault(id(w.topic), (w.topic, []))[1].append(answer)
    if not hinted:
        topics = [
            (getattr(t, "topic", None), getattr(t, "topic_id", None), parts)
            for t, parts in by_topic.values()
        ]
        return EncodedResponse(encode_fetch(ctx.api_version, topics), ctx.api_version >= 12)
    return _kio_response(ctx, by_topic)


def _kio_response(ctx: RequestContext, by_topic: dict[int, tuple[Any, list[Any]]]) -> Any:
    """The answer with leader hints on the partitions whose error has one."""
    hints = LeaderHints(ctx)
    responses = []
    for topic, parts in by_topic.values():
        name, topic_id = getattr(topic, "topic", None), getattr(topic, "topic_id", None)
        partitions = []
        for index, code, hw, lso, start, aborted, data in parts:
            hint: dict[str, Any] = {}
            if ErrorCode(code) in FETCH_HINTED:
                hint = hints.current_leader(resp.LeaderIdAndEpoch, name, topic_id, index)
            partitions.append(
                ctx.make(
                    resp.PartitionData,
                    partition_index=index,
                    error_code=ErrorCode(code),
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=start,
                    aborted_transactions=None if aborted is None else _as_aborted(ctx, aborted),
                    records=data,
                    **hint,
                )
            )
        responses.append(
            ctx.make(
                resp.FetchableTopicResponse,
                topic=name,
                topic_id=topic_id or ZERO_UUID,
                partitions=tuple(partitions),
            )
        )
    return ctx.make(
        resp.FetchResponse,
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(responses),
        **hints.node_endpoints(resp.NodeEndpoint),
    )


def _aborted(plog: PartitionLog, offset: int, data: Records) -> list[tuple[int, int]]:
    """The aborted transactions overlapping the batches served (read_committed)."""
    if not data:
        return []
    return plog.aborted_transactions(offset, _served_end(data, offset))


def _as_aborted(ctx: RequestContext, found: list[tuple[int, int]]) -> tuple[Any, ...]:
    return tuple(
        ctx.make(resp.AbortedTransaction, producer_id=pid, first_offset=first)
        for pid, first in found
    )


def _served_end(data: Records, offset: int) -> int:
    """One past the last offset of the whole batches in ``data``."""
    if isinstance(data, FileRegion):
        return data.next_offset if data.next_offset >= 0 else offset + 1
    return max((h.next_offset for h in iter_headers(data)), default=offset + 1)
