"""Measures the transforms engine: records/s per ABI and guest, and what a busy transform adds
to the latency of an asyncio task that does small work every 1 ms, with the guest run on the
instance's own thread (the shipped design) or in a child process (the alternative).

    .venv/bin/python -m tools.measure_transforms [--seconds 3]

Needs the guests of tools/build-transform-guests.sh. Prints one line per measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
from multiprocessing.connection import Connection
from pathlib import Path

from transforms.errors import TransformFailure
from transforms.module import validate_module, validate_spec
from transforms.records import BatchHeader, InputBatch, InputRecord
from transforms.runtime import Instance, Runtime

GUESTS = Path(__file__).resolve().parents[1] / ".cache" / "transforms"
JSON_KEEP = b'{"level":"error","msg":"' + b"x" * 70 + b'"}'
JSON_DROP = b'{"level":"info","msg":"' + b"x" * 71 + b'"}'


def batch(n: int, json_values: bool) -> InputBatch:
    value = b"v" * 100
    return InputBatch.of(
        [
            InputRecord(
                i,
                1_700_000_000_000 + i,
                b"key-%d" % (i % 100),
                (JSON_KEEP if i % 2 else JSON_DROP) if json_values else value,
            )
            for i in range(n)
        ]
    )


def start(runtime: Runtime, family: str, name: str) -> Instance:
    module = validate_module((GUESTS / family / f"{name}.wasm").read_bytes())
    return runtime.instantiate(runtime.compile(module), validate_spec("m", "in", ["out"]))


def throughput(runtime: Runtime, seconds: float) -> None:
    for family, abi in (("go", "redpanda"), ("c", "batch"), ("as", "batch")):
        for name in ("identity", "jsonfilter"):
            for size in (10, 100, 1000):
                instance = start(runtime, family, name)
                b = batch(size, name == "jsonfilter")
                what = f"throughput abi={abi} guest={family}/{name} batch={size}"
                done = 0
                t0 = time.perf_counter()
                try:
                    instance.process(b)
                    while time.perf_counter() - t0 < seconds:
                        instance.process(b)
                        done += size
                except TransformFailure as exc:
                    print(f"{what}: FAILED after {done:,} records: {exc.reason}: {exc.message}")
                    continue
                finally:
                    instance.close()
                rate = done / (time.perf_counter() - t0)
                print(f"{what}: {rate:,.0f} records/s")


async def ticker(stop: asyncio.Event, lateness: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(0.001)
        sum(range(100))  # the small work
        lateness.append((loop.time() - t - 0.001) * 1000)


def report(what: str, lateness: list[float], records: int, seconds: float) -> None:
    q = statistics.quantiles(lateness, n=100)
    print(
        f"loop {what}: tick lateness p50 {q[49]:.3f} ms, p99 {q[98]:.3f} ms, "
        f"max {max(lateness):.3f} ms; transform {records / seconds:,.0f} records/s"
    )


async def loop_with_thread(
    instance: Instance | None, b: InputBatch, seconds: float, what: str
) -> None:
    stop = asyncio.Event()
    lateness: list[float] = []
    task = asyncio.create_task(ticker(stop, lateness))
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if instance is None:
            await asyncio.sleep(0.01)
        else:
            await instance.aprocess(b)
            done += b.header.record_count
    elapsed = time.perf_counter() - t0
    stop.set()
    await task
    report(what, lateness, done, elapsed)


def child(conn: Connection, family: str, name: str) -> None:
    runtime = Runtime()
    instance = start(runtime, family, name)
    while True:
        message = conn.recv()
        if message is None:
            break
        header, records = message
        result = instance.process(InputBatch(BatchHeader(*header), records))
        conn.send([(o.topic_index, o.record_count, o.records) for o in result.outputs])
    instance.close()


async def loop_with_process(family: str, name: str, b: InputBatch, seconds: float) -> None:
    ctx = multiprocessing.get_context("spawn")
    parent, child_end = ctx.Pipe()
    proc = ctx.Process(target=child, args=(child_end, family, name), daemon=True)
    proc.start()
    loop = asyncio.get_running_loop()
    h = b.header
    message = (
        (
            h.base_offset,
            h.record_count,
            h.partition_leader_epoch,
            h.attributes,
            h.last_offset_delta,
            h.base_timestamp,
            h.max_timestamp,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
        ),
        b.records,
    )

    async def call() -> object:
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_reader(parent.fileno(), lambda: ready.done() or ready.set_result(None))
        parent.send(message)
        try:
            await ready
        finally:
            loop.remove_reader(parent.fileno())
        return parent.recv()

    await call()  # the child compiled and started
    stop = asyncio.Event()
    lateness: list[float] = []
    task = asyncio.create_task(ticker(stop, lateness))
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        await call()
        done += h.record_count
    elapsed = time.perf_counter() - t0
    stop.set()
    await task
    parent.send(None)
    proc.join(10)
    report(f"process guest={family}/{name} batch={h.record_count}", lateness, done, elapsed)


async def loop_latency(runtime: Runtime, seconds: float) -> None:
    await loop_with_thread(None, batch(1, False), seconds, "idle (no transform)")
    for family, name in (("go", "identity"), ("c", "identity"), ("c", "jsonfilter")):
        for size in (100, 1000):
            b = batch(size, name == "jsonfilter")
            instance = start(runtime, family, name)
            await loop_with_thread(
                instance, b, seconds, f"thread guest={family}/{name} batch={size}"
            )
            instance.close()
            await loop_with_process(family, name, b, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--only", choices=("throughput", "loop"))
    args = parser.parse_args()
    runtime = Runtime()
    if args.only != "loop":
        throughput(runtime, args.seconds)
    if args.only != "throughput":
        asyncio.run(loop_latency(runtime, args.seconds))


if __name__ == "__main__":
    main()
