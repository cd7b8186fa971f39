"""One-record produce requests from many connections: the per-request cost of a broker.

Each connection is a synchronous producer: it sends a Produce v7 request (acks=1) holding one
batch of one 100-byte record, waits for the answer, and sends the next. The request frame is
encoded once with kio and re-sent, so the client does almost no work per request; the
connections are spread over several processes (uvloop in each) so the client side is not the
bottleneck (its CPU is reported beside the broker's). Workers connect, wait for a common
start time, run a warm-up, then count answers in the measurement window.

    python -m bench.one_record BOOTSTRAP TOPIC CONNECTIONS START_AT WARMUP SECONDS SIZE OUT_JSON
"""

from __future__ import annotations

import asyncio
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from bench import frames
from bench.common import Failed, Figure, Measure, Others, python

CHECK_EVERY = 256  # decode one answer in this many with kio and check its error code
MAX_SAMPLES = 20000


class _Stats:
    def __init__(self) -> None:
        self.measuring = False
        self.running = True
        self.count = 0
        self.total = 0
        self.errors = 0
        self.error_codes: set[int] = set()
        self.latencies: list[float] = []


class _Conn(asyncio.Protocol):
    def __init__(self, frame: bytes, stats: _Stats) -> None:
        self.frame = frame
        self.stats = stats
        self.buf = bytearray()
        self.sent_at = 0.0
        self.transport: Any = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if self.stats.running:
            self.stats.errors += 1
            self.stats.error_codes.add(-1)

    def send(self) -> None:
        self.sent_at = time.perf_counter()
        self.transport.write(self.frame)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            size = int.from_bytes(buf[:4], "big")
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            self._answer(frame)

    def _answer(self, frame: bytes) -> None:
        stats = self.stats
        stats.total += 1
        if stats.measuring:
            stats.count += 1
            stats.latencies.append(time.perf_counter() - self.sent_at)
        if stats.total % CHECK_EVERY == 1:
            codes = [c for c in frames.produce_errors(frame) if c != 0]
            if codes:
                stats.errors += 1
                stats.error_codes.update(codes)
        if stats.running:
            self.send()


async def _worker(args: list[str]) -> dict[str, Any]:
    bootstrap, topic = args[0], args[1]
    connections, start_at = int(args[2]), float(args[3])
    warmup, seconds, size = float(args[4]), float(args[5]), int(args[6])
    host, _, port = bootstrap.rpartition(":")
    frame = frames.produce_frame(topic, frames.record_batch([b"v" * size]))
    loop = asyncio.get_running_loop()
    stats = _Stats()
    conns: list[_Conn] = []
    for _ in range(connections):
        _, conn = await loop.create_connection(lambda: _Conn(frame, stats), host, int(port))
        conns.append(conn)
    await asyncio.sleep(max(0.0, start_at - time.time()))
    for conn in conns:
        conn.send()
    await asyncio.sleep(warmup)
    stats.measuring = True
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    stats.measuring = False
    elapsed = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    stats.running = False
    await asyncio.sleep(0.2)
    for conn in conns:
        conn.transport.close()
    lat = stats.latencies
    if len(lat) > MAX_SAMPLES:
        lat = random.sample(lat, MAX_SAMPLES)
    return {
        "requests": stats.count,
        "seconds": elapsed,
        "errors": stats.errors,
        "error_codes": sorted(stats.error_codes),
        "client_cpu": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
        "latencies": lat,
    }


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(
    server: Any,
    topic: str,
    *,
    connections: int = 50,
    processes: int = 3,
    warmup: float = 2.0,
    seconds: float = 10.0,
    size: int = 100,
) -> Figure:
    """Requests/s of one-record produce requests from ``connections`` synchronous producers."""
    try:
        server.create_topic(topic)
    except Exception as exc:
        return Failed(f"creating topic: {exc}"[:300])
    start_at = time.time() + 1.5
    outdir = Path(tempfile.mkdtemp(prefix="one-record-"))
    per = [
        connections // processes + (1 if i < connections % processes else 0)
        for i in range(processes)
    ]
    workers = [
        subprocess.Popen(
            [
                python(),
                "-m",
                "bench.one_record",
                server.bootstrap,
                topic,
                str(n),
                str(start_at),
                str(warmup),
                str(seconds),
                str(size),
                str(outdir / f"{i}.json"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, n in enumerate(per)
        if n
    ]
    try:
        time.sleep(max(0.0, start_at + warmup - time.time()))
        cpu0, others = server.cpu(), Others()
        time.sleep(seconds)
        cpu = server.cpu() - cpu0
        others.stop()
        results = []
        for i, proc in enumerate(workers):
            _, err = proc.communicate(timeout=60)
            if proc.returncode != 0:
                return Failed(f"load worker exited {proc.returncode}: {err.strip()[-300:]}")
            results.append(json.loads((outdir / f"{i}.json").read_text()))
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(outdir, ignore_errors=True)
    total = sum(r["requests"] for r in results)
    window = max(r["seconds"] for r in results)
    errors = sum(r["errors"] for r in results)
    latencies = [x for r in results for x in r["latencies"]]
    codes = sorted({c for r in results for c in r["error_codes"]})
    client_cpu = sum(r["client_cpu"] for r in results)
    if errors:
        return Failed(f"{errors} sampled answers had errors (codes {codes})")
    return Measure(
        total / window,
        "req/s",
        window,
        total,
        total * size,
        broker_cpu=cpu,
        note=f"{connections} conns / {len(workers)} procs",
        extra={
            "p50_ms": _percentile(latencies, 0.5) * 1000,
            "p99_ms": _percentile(latencies, 0.99) * 1000,
            "client_cpu": client_cpu,
            "others": others.share(cpu, client_cpu),
        },
    )


def main() -> None:
    result = uvloop.run(_worker(sys.argv[1:8]))
    # To a file, not stdout: a large write to a pipe can come out short after the loop ran.
    with open(sys.argv[8], "w") as out:
        json.dump(result, out)


if __name__ == "__main__":
    main()
