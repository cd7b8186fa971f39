"""Object-store throughput against the embedded S3 server (moto + disk mirror) on loopback.

    .venv/bin/python bench/bench_object_store.py [--mib 64] [--ranges 20]

Prints put and get MiB/s for one object (multipart above 16 MiB, through ``S3ObjectStore``),
the median and p90 latency of 1 MiB ranged GETs, and the restart (reload) time of the data
directory; then the same against plain ``moto_server`` (no durability) for comparison.
Single runs on a shared machine: orders of magnitude.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tiered.access_keys import AccessKey  # noqa: E402
from tiered.config import MiB, ObjectStoreSettings  # noqa: E402
from tiered.embedded_s3 import EmbeddedS3, free_port  # noqa: E402
from tiered.object_store import S3ObjectStore  # noqa: E402

ADMIN = AccessKey("bench", "bench", admin=True)


def store_for(endpoint: str) -> S3ObjectStore:
    store = S3ObjectStore(
        ObjectStoreSettings(
            endpoint=endpoint, bucket="bench", access_key_id="bench", secret_access_key="bench"
        )
    )
    store.ensure_bucket()
    return store


def measure(label: str, endpoint: str, data: bytes, ranges: int) -> None:
    store = store_for(endpoint)
    mib = len(data) / MiB
    started = time.perf_counter()
    store.put("segment.log", data)
    put_s = time.perf_counter() - started
    started = time.perf_counter()
    got = store.get("segment.log")
    get_s = time.perf_counter() - started
    assert got == data
    latencies = []
    for i in range(ranges):
        start = (i * 7 * MiB) % (len(data) - MiB)
        t = time.perf_counter()
        chunk = store.get_range("segment.log", start, start + MiB)
        latencies.append((time.perf_counter() - t) * 1000)
        assert chunk == data[start : start + MiB]
    latencies.sort()
    print(
        f"{label:<28} put {mib / put_s:7.1f} MiB/s   get {mib / get_s:7.1f} MiB/s   "
        f"1 MiB ranged GET median {statistics.median(latencies):6.1f} ms, "
        f"p90 {latencies[int(len(latencies) * 0.9) - 1]:6.1f} ms"
    )


def wait_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(port)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--ranges", type=int, default=20)
    args = parser.parse_args()
    data = os.urandom(args.mib * MiB)
    print(f"object {args.mib} MiB, {args.ranges} ranged GETs of 1 MiB; {os.cpu_count()} CPUs")

    with tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp:
        server = EmbeddedS3(Path(tmp) / "data", admin=ADMIN).start()
        try:
            measure("embedded (durable)", server.endpoint, data, args.ranges)
        finally:
            server.kill()
        started = time.perf_counter()
        server = EmbeddedS3(Path(tmp) / "data", port=server.port, admin=ADMIN).start()
        print(
            f"{'embedded restart':<28} {time.perf_counter() - started:.2f} s to reload "
            f"{args.mib} MiB and listen"
        )
        server.stop()

    port = free_port()
    moto = REPO / ".venv" / "bin" / "moto_server"
    plain = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        measure("plain moto_server", f"http://127.0.0.1:{port}", data, args.ranges)
    finally:
        plain.kill()
        plain.wait()


if __name__ == "__main__":
    main()
