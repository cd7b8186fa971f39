"""Long-polling fetches wait on the replication ``Partition``, not on the log.

The log only calls its owner's ``on_change`` hook; the ``Partition`` keeps the waiting
fetches (``FetchWaiters``) and wakes them. Driven on a real in-process broker through the
Fetch handler: every fetch below could wait ten minutes, so only the wake-up under test
can answer it within the test's bound.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.delete_topics.v6 import request as delete_req
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from dataplane.broker import Broker
from dataplane.cluster.topics import NewTopic
from dataplane.config import BrokerConfig
from dataplane.handlers import delete_topics, fetch
from dataplane.handlers.context import RequestContext
from dataplane.replication.partition import FetchWaiters, Partition
from tests.dataplane.test_log_partition import fill, open_log
from tests.support.records import fetch_request, partition_response
from wire.record_batch import decode_records, encode_batch

BOUND = 30.0
"""Seconds a woken fetch may take to answer (the fetches ask for ten minutes)."""
TEN_MINUTES_MS = 600_000
TOPIC = "polled"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = BrokerConfig.build(data_dir=str(tmp_path / "data"), listen="127.0.0.1:0")
    started = Broker(config)
    await started.start()
    try:
        assert await started.cluster.create_topic(NewTopic(TOPIC, 1))
        assert await started.await_topic(TOPIC) is not None
        for _ in range(1_000):
            part = started.replicas.partitions.get((TOPIC, 0))
            if part is not None and part.is_leader:
                break
            await asyncio.sleep(0.01)
        yield started
    finally:
        await started.stop()


def leader(broker: Broker) -> Partition:
    return broker.replicas.leader(TOPIC, 0)


def long_poll(broker: Broker, offset: int, *, replica_id: int = -1) -> asyncio.Task[Any]:
    request = fetch_request(TOPIC, offset, max_wait_ms=TEN_MINUTES_MS)
    if replica_id >= 0:
        request = dataclasses.replace(request, replica_id=i32(replica_id))
    answer = fetch.handle(RequestContext(broker, fetch.API_KEY, 12, 0, "test"), request)
    assert asyncio.iscoroutine(answer), "nothing to read yet: the fetch must wait"
    return asyncio.ensure_future(answer)


async def pending(task: asyncio.Task[Any]) -> bool:
    for _ in range(20):  # let a woken fetch run its re-read
        await asyncio.sleep(0)
    return not task.done()


def offsets(response: Any) -> list[int]:
    records = partition_response(response).records
    return [r.offset for r in decode_records(bytes(records or b""))]


async def test_an_append_wakes_a_follower_long_poll(broker: Broker) -> None:
    part = leader(broker)
    end = part.plog.log_end_offset
    task = long_poll(broker, end, replica_id=7)  # a follower reads up to the log end
    assert await pending(task)
    part.plog.append_internal(encode_batch([(b"k", b"v")], timestamp_ms=1_000))
    response = await asyncio.wait_for(task, BOUND)
    assert partition_response(response).error_code == ErrorCode.none
    assert offsets(response) == [end]


async def test_a_high_watermark_advance_wakes_a_consumer_long_poll(broker: Broker) -> None:
    part = leader(broker)
    plog = part.plog
    end = plog.log_end_offset
    task = long_poll(broker, end)
    plog.append_internal(encode_batch([(b"k", b"v")], timestamp_ms=1_000))
    assert await pending(task), "woken by the append, but nothing is below the high watermark"
    assert plog.high_watermark == end
    part.maybe_advance_high_watermark()  # the ISR (the leader alone) has the record
    response = await asyncio.wait_for(task, BOUND)
    assert partition_response(response).high_watermark == end + 1
    assert offsets(response) == [end]


async def test_a_truncation_wakes_a_long_poll(broker: Broker) -> None:
    part = leader(broker)
    plog = part.plog
    for i in range(3):
        plog.append_internal(encode_batch([(b"k", b"%d" % i)], timestamp_ms=1_000))
    part.maybe_advance_high_watermark()
    end = plog.log_end_offset
    task = long_poll(broker, end)
    assert await pending(task)
    assert plog.truncate_to(end - 2)
    response = await asyncio.wait_for(task, BOUND)
    assert partition_response(response).error_code == ErrorCode.offset_out_of_range


async def test_topic_deletion_wakes_a_long_poll(broker: Broker) -> None:
    part = leader(broker)
    task = long_poll(broker, part.plog.log_end_offset)
    assert await pending(task)
    request = delete_req.DeleteTopicsRequest(
        topics=(delete_req.DeleteTopicState(name=TopicName(TOPIC), topic_id=fetch.ZERO_UUID),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
    )
    answer = delete_topics.handle(
        RequestContext(broker, delete_topics.API_KEY, 6, 0, "test"), request
    )
    if asyncio.iscoroutine(answer):
        answer = await answer
    assert answer.responses[0].error_code == ErrorCode.none
    response = await asyncio.wait_for(task, BOUND)
    part_response = partition_response(response)
    assert part_response.error_code == ErrorCode.unknown_topic_or_partition
    assert part_response.records in (None, b"")


# --------------------------------------------------------------------------- the pieces


async def test_the_partition_is_the_logs_change_hook(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    assert plog.on_change is None  # a log alone keeps no waiters
    fill(plog, 2)
    part = Partition(plog, node_id=1)
    plog.auto_high_watermark = False  # as replication runs it
    waiter = part.new_data_future()
    fill(plog, 1)
    assert waiter.done(), "append"
    waiter = part.new_data_future()
    plog.advance_high_watermark(3)
    assert waiter.done(), "high-watermark advance"
    waiter = part.new_data_future()
    plog.truncate_to(1)
    assert waiter.done(), "truncation"
    waiter = part.new_data_future()
    plog.close()
    assert waiter.done(), "close"


async def test_fetch_waiters_prune_cancelled_futures() -> None:
    waiters = FetchWaiters()
    for _ in range(1_000):
        waiters.new_future().cancel()
    assert len(waiters) <= 64
    live = waiters.new_future()
    waiters.wake()
    assert live.done()
    assert len(waiters) == 0
    waiters.wake()  # nothing waiting: nothing to do
