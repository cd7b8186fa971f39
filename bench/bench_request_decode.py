"""What the array-count check (wire/request_bounds.py) adds to decoding a request, beside
kio's own decode of the same frames (the peer: what the broker did before the check).

    python -m bench.bench_request_decode [--seconds S] [--no-record]

Frames: the requests captured from real clients (confluent-kafka, kafka-python, aiokafka,
the Java client) in tests/fuzz/corpus/kafka_request, grouped by API. For each API it times,
over the same frames and alternating so that load falls on both alike, kio's header and
body decode alone and ``wire.framing.decode_request`` (header, count check, body), and
prints microseconds per request and the check's share. Prints a table and replaces the
"Request decoding" section of bench/RESULTS.md unless --no-record. Pure CPU in this
process: nothing is started.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from bench.common import replace_section
from dataplane.handlers.registry import SERVED
from wire.framing import decode_request, peek_header, request_codec

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fuzz" / "corpus" / "kafka_request"
RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- request-decode:begin -->"
END = "<!-- request-decode:end -->"
ROUNDS = 7


def frames_by_api() -> dict[str, list[tuple[bytes, int, int]]]:
    out: dict[str, list[tuple[bytes, int, int]]] = defaultdict(list)
    for path in sorted(CORPUS.iterdir()):
        data = path.read_bytes()
        head = peek_header(data)
        served = SERVED.get(head.api_key)
        if served is None or not served.versions[0] <= head.api_version <= served.versions[1]:
            continue
        decode_request(data, head.api_key, head.api_version)  # every frame must decode
        api = request_codec(head.api_key, head.api_version)[2].__name__.removesuffix("Request")
        out[api].append((data, head.api_key, head.api_version))
    return out


def kio_only(frames: list[tuple[bytes, int, int]]) -> Callable[[], None]:
    codecs = [(request_codec(k, v), data) for data, k, v in frames]

    def run() -> None:
        for (header_reader, body_reader, _), data in codecs:
            _, used = header_reader(data, 0)
            body_reader(data, used)

    return run


def checked(frames: list[tuple[bytes, int, int]]) -> Callable[[], None]:
    def run() -> None:
        for data, key, version in frames:
            decode_request(data, key, version)

    return run


def per_call_us(fn: Callable[[], None], calls: int, seconds: float) -> float:
    """Microseconds per frame: loops of ``fn`` for about ``seconds``."""
    loops = 0
    started = time.perf_counter()
    while True:
        fn()
        loops += 1
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return elapsed / (loops * calls) * 1e6


def measure(seconds: float) -> list[tuple[str, int, float, float]]:
    rows = []
    for api, frames in sorted(frames_by_api().items()):
        plain, full = kio_only(frames), checked(frames)
        a, b = [], []
        for _ in range(ROUNDS):  # alternating: load from elsewhere falls on both alike
            a.append(per_call_us(plain, len(frames), seconds / ROUNDS / 2))
            b.append(per_call_us(full, len(frames), seconds / ROUNDS / 2))
        rows.append((api, len(frames), statistics.median(a), statistics.median(b)))
    return rows


def table(rows: list[tuple[str, int, float, float]], seconds: float) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    lines = [
        f"### {stamp}: {seconds:g} s per API, load average {load:.1f} on {os.cpu_count()} CPUs",
        "",
        "| API | frames | kio decode (µs) | with the count check (µs) | check's cost (µs) | "
        "ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for api, n, plain, full in rows:
        lines.append(
            f"| {api} | {n} | {plain:.1f} | {full:.1f} | {full - plain:.1f} | {full / plain:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def record(text: str) -> None:
    intro = (
        "## Request decoding\n\n`python -m bench.bench_request_decode`: the array-count check "
        "of wire/request_bounds.py (it keeps kio from reserving memory for an impossible "
        "count) beside kio's own decode of the same frames, captured from real clients "
        "(tests/fuzz/corpus/kafka_request). Each run replaces the last.\n\n"
    )
    replace_section(RESULTS, BEGIN, END, f"{BEGIN}\n{intro}{text}{END}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_request_decode")
    parser.add_argument("--seconds", type=float, default=4.0, help="per API (default 4)")
    parser.add_argument("--no-record", action="store_true", help="print only")
    args = parser.parse_args(argv)
    text = table(measure(args.seconds), args.seconds)
    print(text)
    if not args.no_record:
        record(text)
        print(f"recorded in {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
