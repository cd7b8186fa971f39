"""The machine's limits and a peer: disk write rate, loopback bandwidth, Redis Streams.

disk      dd if=/dev/zero of=FILE bs=1M count=1024 conv=fdatasync, in the data dir's filesystem
loopback  iperf3 -c 127.0.0.1 -t 5 against a local iperf3 -s (a Python socket blast without it)
redis     redis-benchmark -P 1000 XADD s '*' f VALUE against a redis-server the bench starts
          (appendonly yes, appendfsync everysec); unpipelined with 50 clients for one-record
"""

from __future__ import annotations

import csv
import io
import json
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

from bench.common import (
    Failed,
    Figure,
    Measure,
    free_port,
    median_of,
    spawn,
    stop_process,
    tool,
    wait_port,
)
from bench.servers import RedisServer


def disk_write(directory: Path, mib: int, runs: int = 1) -> Figure:
    """Median of ``runs`` dd runs (the virtual disk here varies several-fold between runs)."""
    return median_of([_dd(directory, mib) for _ in range(runs)])


def _dd(directory: Path, mib: int) -> Figure:
    target = directory / "dd.bin"
    cmd = ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}", "conv=fdatasync"]
    try:
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        elapsed = time.perf_counter() - started
    finally:
        target.unlink(missing_ok=True)
    if proc.returncode != 0:
        return Failed(f"dd exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    # "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 3.43 s, 313 MB/s"
    match = re.search(r"(\d+) bytes .* copied, ([\d.,]+) s", proc.stderr)
    nbytes = mib << 20
    seconds = float(match.group(2).replace(",", ".")) if match else elapsed
    if match:
        nbytes = int(match.group(1))
    return Measure(nbytes / seconds, "B/s", seconds, 0, nbytes, note=f"dd {mib} MiB fdatasync")


def loopback(seconds: int) -> Figure:
    if tool("iperf3"):
        return _iperf3(seconds)
    return _socket_blast(seconds)


def _iperf3(seconds: int) -> Figure:
    port = free_port()
    server = spawn(
        ["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, server, 10, "iperf3 -s")
        time.sleep(0.2)
        cmd = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=seconds + 30, check=False
        )
        if proc.returncode != 0:
            return Failed(f"iperf3 -c exited {proc.returncode}: {proc.stdout[-200:]}")
        report = json.loads(proc.stdout)
        if "error" in report or "sum_received" not in report.get("end", {}):
            return Failed(f"iperf3: {report.get('error', 'no summary')}")
        received = report["end"]["sum_received"]
        bps = float(received["bits_per_second"]) / 8
        return Measure(
            bps,
            "B/s",
            float(received["seconds"]),
            0,
            int(received["bytes"]),
            note=f"iperf3 -t {seconds}",
        )
    finally:
        stop_process(server, grace=5)


def _socket_blast(seconds: int) -> Figure:
    """Fallback: one TCP stream over loopback, 1 MiB sends, receiver in a thread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    received = [0]

    def sink() -> None:
        conn, _ = listener.accept()
        with conn:
            while chunk := conn.recv(1 << 20):
                received[0] += len(chunk)

    thread = threading.Thread(target=sink, daemon=True)
    thread.start()
    block = b"\0" * (1 << 20)
    with socket.create_connection(listener.getsockname()) as sock:
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            sock.sendall(block)
    thread.join(10)
    elapsed = time.perf_counter() - started
    listener.close()
    return Measure(received[0] / elapsed, "B/s", elapsed, 0, received[0], note="python socket")


def redis_benchmark(
    server: RedisServer, key: str, *, size: int, ops: int, pipeline: int, clients: int = 50
) -> Figure:
    value = "v" * size
    cmd = [
        tool("redis-benchmark") or "redis-benchmark",
        "-h",
        "127.0.0.1",
        "-p",
        str(server.port),
        "-c",
        str(clients),
        "-n",
        str(ops),
        "-P",
        str(pipeline),
        "--csv",
        "XADD",
        key,
        "*",
        "f",
        value,
    ]
    cpu0 = server.cpu()
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    elapsed = time.perf_counter() - started
    cpu = server.cpu() - cpu0
    if proc.returncode != 0:
        return Failed(f"redis-benchmark exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    rows = [r for r in csv.reader(io.StringIO(proc.stdout)) if len(r) >= 2]
    try:
        rps = float(rows[-1][1])
    except (IndexError, ValueError):
        return Failed(f"cannot parse redis-benchmark output: {proc.stdout[-200:]}")
    return Measure(
        rps,
        "ops/s",
        ops / rps if rps else elapsed,
        ops,
        ops * size,
        broker_cpu=cpu,
        note=f"-P {pipeline} -c {clients}",
    )
