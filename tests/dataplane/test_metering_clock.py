"""Metering and a broker's clock (dataplane/metering/README.md, "Clock skew"): usage is cut
into intervals by the broker's own clock, aligned to it and never across an hour, so a
broker whose clock is off by s moves at most s of usage into the neighbouring hour; a clock
that jumps forward still gives events inside one hour. Driven on a real in-process broker
whose metering reads a skewed clock (its one time source); the events are read from its
spool (nothing listens for the usage topic here)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dataplane.broker import Broker
from dataplane.config import BrokerConfig
from wire.usage import HOUR_MS, Dimension, UsageEvent


class SkewedClock:
    """Wall time as a broker with a wrong clock sees it: starts ``lead_s`` before an hour
    boundary and runs at the real rate; ``jump`` moves it."""

    def __init__(self, lead_s: float) -> None:
        hour = (int(time.time() * 1000) // HOUR_MS + 5) * HOUR_MS  # an hour of the future
        self.offset = hour / 1000 - lead_s - time.monotonic()

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def jump(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = BrokerConfig.build(
        data_dir=str(tmp_path / "data"),
        listen="127.0.0.1:0",
        overrides={"usage.flush.interval.ms": "1000"},
    )
    started = Broker(config)
    started.usage.clock = SkewedClock(lead_s=2.5)
    await started.start()
    try:
        yield started
    finally:
        await started.stop()


def bytes_in(events: list[UsageEvent]) -> int:
    return sum(u.quantity for e in events for u in e.usage if u.dimension == Dimension.BYTES_IN)


async def events_until(broker: Broker, total_bytes_in: int) -> list[UsageEvent]:
    """The spooled events once they hold ``total_bytes_in`` (or after 30 s)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if bytes_in(broker.usage.spool.pending) >= total_bytes_in:
            break
        await asyncio.sleep(0.1)
    return list(broker.usage.spool.pending)


def hour_of(ms: int) -> int:
    return ms - ms % HOUR_MS


async def test_usage_is_cut_by_the_brokers_clock_at_its_hours(broker: Broker) -> None:
    clock = broker.usage.clock
    assert isinstance(clock, SkewedClock)
    boundary = hour_of(int(clock() * 1000)) + HOUR_MS
    meter = broker.usage.meter
    early_bytes = 0
    while clock() * 1000 < boundary - 300:  # usage just before the broker's hour ends
        meter.bytes_in("t", "User:a", 100)
        early_bytes += 100
        await asyncio.sleep(0.05)
    before = int(clock() * 1000)
    await asyncio.sleep(max(boundary - before, 0) / 1000 + 0.2)
    meter.bytes_in("t", "User:a", 7)  # and just after it
    events = await events_until(broker, early_bytes + 7)
    for event in events:
        assert hour_of(event.start_ms) == hour_of(max(event.end_ms - 1, event.start_ms))
        assert event.start_ms % 1000 == 0 or event.sequence == 0  # aligned after the first
    early = [e for e in events if e.end_ms <= boundary]
    late = [e for e in events if e.start_ms >= boundary]
    assert len(early) + len(late) == len(events), "no event spans the broker's hour boundary"
    assert bytes_in(late) == 7, "usage after the broker's hour boundary counts in the next hour"
    assert bytes_in(early) == early_bytes


async def test_a_clock_jump_gives_no_event_across_an_hour(broker: Broker) -> None:
    clock = broker.usage.clock
    assert isinstance(clock, SkewedClock)
    broker.usage.meter.bytes_in("t", None, 10)
    first = await events_until(broker, 10)
    clock.jump(HOUR_MS / 1000 + 1.5)  # an NTP step of an hour and a half second
    broker.usage.meter.bytes_in("t", None, 20)
    events = await events_until(broker, 30)
    assert bytes_in(events) == 30, "nothing is lost to the jump"
    after = events[len(first) :]
    assert after
    assert hour_of(after[-1].start_ms) > hour_of(first[-1].start_ms)
    for event in events:
        assert hour_of(event.start_ms) == hour_of(max(event.end_ms - 1, event.start_ms))
        UsageEvent.decode(event.encode())  # what a reader checks
