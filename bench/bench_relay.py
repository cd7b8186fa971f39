"""The floor under a cold tiered read: what relaying bytes between two loopback sockets costs.

    .venv/bin/python -m bench.bench_relay [--mib 512] [--chunk-mib 16] [--runs 3] [--no-record]

A cold tiered read moves each byte from the object store to the broker and from the broker
to the consumer; a raw GET, its peer in ``bench_tiered``, moves it once. This bench takes
the brokers, the store and the consumer out and measures only the moves, in three processes
on loopback:

- origin (the store): answers each 1-byte request with ``--chunk-mib`` of a file, by
  ``sendfile`` (as ``tiered/s3_fast_get.py`` does);
- sink (the consumer, at its cheapest): requests chunks one at a time and receives them into
  one reused buffer;
- relay (the broker), in one of these ways, or none (``direct``: the sink asks the origin,
  the raw GET):
  - ``fresh``: each chunk received as new bytes (``recv(MSG_WAITALL)``, as
    ``tiered.ranged_get`` does), its CRC32C computed over it (the broker checks every batch's
    CRC), then sent in 1 MiB slices (a fetch answer's size);
  - ``reused``: the same into one reused buffer (a pool of receive buffers);
  - ``splice``: received with ``splice`` through a pipe into a file, its CRC32C computed
    over an ``mmap`` of it, sent with ``sendfile`` (no copy through user space);
  - ``pipe``: moved with ``splice`` from the origin's socket through a pipe to the sink's
    socket, 1 MiB at a time: the bytes never enter the relay's memory, so no CRC32C
    either (what a broker could do only if it cut fetch answers at batch boundaries known
    beforehand and left checking to the consumer).

For each: the wall rate, the CPU of every process per MiB (from /proc, all threads), their
sum, and the ceiling that sum puts on any relay on this machine's cores (cores / CPU per
MiB, with perfect overlap), as a ratio to the direct rate measured in the same run.
"""

from __future__ import annotations

import argparse
import fcntl
import mmap
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import crc32c

from bench.common import (
    REPO,
    cpu_seconds,
    free_port,
    kill_all_children,
    machine_info,
    minor_faults,
    replace_section,
    spawn,
    stop_process,
)

RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- BEGIN relay (bench/bench_relay.py) -->"
END = "<!-- END relay -->"
MiB = 1 << 20
SLICE = MiB
"""The relay sends a chunk in pieces of this size (a fetch answer of librdkafka's default)."""
MODES = ("direct", "fresh", "reused", "splice", "pipe")


def _accept(port: int) -> socket.socket:
    listener = socket.create_server(("127.0.0.1", port))
    conn, _ = listener.accept()
    listener.close()
    return conn


def origin(port: int, path: str, chunk: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    conn = _accept(port)
    while conn.recv(1):
        _send_file(conn, fd, 0, chunk)


def _send_file(sock: socket.socket, fd: int, start: int, count: int) -> None:
    sent = 0
    while sent < count:
        sent += os.sendfile(sock.fileno(), fd, start + sent, count - sent)


def _receive_into(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:], len(view) - got, socket.MSG_WAITALL)
        if not n:
            raise ConnectionError("the origin closed")
        got += n


def _receive_fresh(sock: socket.socket, chunk: int) -> bytes:
    """A chunk as new bytes, as ``tiered.ranged_get`` receives a GET's body."""
    pieces = []
    got = 0
    while got < chunk:
        piece = sock.recv(chunk - got, socket.MSG_WAITALL)
        if not piece:
            raise ConnectionError("the origin closed")
        pieces.append(piece)
        got += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def splice_through(sock: socket.socket, pipe: tuple[int, int], out: int, n: int, at: bool) -> None:
    """``n`` bytes from the socket through the pipe to descriptor ``out``: into its first
    ``n`` bytes when ``at`` (a file), else onwards (a socket). The pages move between the
    kernel's buffers and the pipe, never through user space."""
    r, w = pipe
    got = 0
    while got < n:
        moved = os.splice(sock.fileno(), w, min(MiB, n - got))
        if not moved:
            raise ConnectionError("the origin closed")
        end = got + moved
        while got < end:
            got += os.splice(r, out, end - got, offset_dst=got if at else None)


def relay(port: int, upstream: int, chunk: int, mode: str, scratch: str) -> None:
    up = socket.create_connection(("127.0.0.1", upstream))
    down = _accept(port)
    reused = memoryview(bytearray(chunk))
    fd = os.open(os.path.join(scratch, "chunk"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.ftruncate(fd, chunk)
    pipe = os.pipe()
    fcntl.fcntl(pipe[1], fcntl.F_SETPIPE_SZ, MiB)
    while down.recv(1):
        up.send(b"g")
        if mode == "splice":
            splice_through(up, pipe, fd, chunk, at=True)
            with mmap.mmap(fd, chunk, prot=mmap.PROT_READ) as mapped:
                crc32c.crc32c(mapped)
            for at in range(0, chunk, SLICE):
                _send_file(down, fd, at, SLICE)
            continue
        if mode == "pipe":
            splice_through(up, pipe, down.fileno(), chunk, at=False)
            continue
        if mode == "fresh":
            view = memoryview(_receive_fresh(up, chunk))
        else:
            _receive_into(up, reused)
            view = reused
        crc32c.crc32c(view)
        for at in range(0, chunk, SLICE):
            down.sendall(view[at : at + SLICE])


def sink(port: int, chunk: int, chunks: int) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    buf = memoryview(bytearray(chunk))
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(chunks):
        sock.send(b"g")
        _receive_into(sock, buf)
    sys.stdout.write(f"{time.perf_counter() - start} {time.process_time() - cpu}\n")


def role(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.bench_relay", "--role", *args]


def one_run(mode: str, data: str, scratch: str, chunk: int, chunks: int) -> dict[str, float]:
    """Wall seconds and CPU seconds of each process for one relay of ``chunks`` chunks."""
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        origin_port = free_port()
        procs["origin"] = spawn(role("origin", str(origin_port), data, str(chunk)), cwd=REPO)
        wait_for = origin_port
        if mode != "direct":
            relay_port = free_port()
            _wait_listening(origin_port, procs["origin"])
            procs["relay"] = spawn(
                role("relay", str(relay_port), str(origin_port), str(chunk), mode, scratch),
                cwd=REPO,
            )
            wait_for = relay_port
        # they accept one connection each: wait by looking (/proc), not by connecting
        _wait_listening(wait_for, procs.get("relay") or procs["origin"])
        before = {name: cpu_seconds(p.pid) for name, p in procs.items()}
        faults = minor_faults(procs["relay"].pid) if "relay" in procs else 0
        procs["sink"] = spawn(
            role("sink", str(wait_for), str(chunk), str(chunks)), cwd=REPO, stdout=subprocess.PIPE
        )
        out, _ = procs["sink"].communicate(timeout=600)
        after = {name: cpu_seconds(p.pid) for name, p in procs.items() if name != "sink"}
        if "relay" in procs:
            faults = minor_faults(procs["relay"].pid) - faults
        if procs["sink"].returncode != 0:
            raise RuntimeError(f"the {mode} run's sink exited with {procs['sink'].returncode}")
        result = {name: after[name] - before[name] for name in after}
        wall, sink_cpu = out.decode().split()
        result["wall"], result["sink"] = float(wall), float(sink_cpu)
        result["faults"] = faults
        return result
    finally:
        for proc in procs.values():
            stop_process(proc, grace=2)


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Until something listens on ``port`` (read from /proc/net/tcp: a connection would
    be the one the server accepts)."""
    want = f":{port:04X} "
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"a bench process exited with {proc.returncode} before listening")
        listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
        if any(want in line.split()[1] + " " and line.split()[3] == "0A" for line in listening):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--mib", type=int, default=512, help="MiB relayed per run")
    parser.add_argument("--chunk-mib", type=int, default=16, help="MiB per request")
    parser.add_argument("--runs", type=int, default=3, help="runs of each mode (median)")
    parser.add_argument("--no-record", action="store_true", help="leave RESULTS.md alone")
    args = parser.parse_args()
    if args.role:
        name, *rest = args.role
        if name == "origin":
            origin(int(rest[0]), rest[1], int(rest[2]))
        elif name == "relay":
            relay(int(rest[0]), int(rest[1]), int(rest[2]), rest[3], rest[4])
        else:
            sink(int(rest[0]), int(rest[1]), int(rest[2]))
        return
    chunk = args.chunk_mib * MiB
    chunks = max(1, args.mib // args.chunk_mib)
    cores = os.cpu_count() or 1
    load_before = _load()
    rows: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-relay-") as tmp:
            data = os.path.join(tmp, "object")
            with open(data, "wb") as f:
                f.write(os.urandom(chunk))
            for run in range(args.runs):
                for mode in MODES:  # interleaved: each mode sees the same machine
                    result = one_run(mode, data, tmp, chunk, chunks)
                    rows[mode].append(result)
                    rate = chunks * args.chunk_mib / result["wall"]
                    print(f"run {run + 1} {mode}: {rate:.0f} MiB/s", flush=True)
    finally:
        kill_all_children()
    section = report(rows, chunks * args.chunk_mib, args, cores, load_before)
    print(section)
    if not args.no_record:
        replace_section(RESULTS, BEGIN, END, section)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(
    rows: dict[str, list[dict[str, float]]],
    mib: int,
    args: argparse.Namespace,
    cores: int,
    load_before: str,
) -> str:
    info = machine_info()
    load_after = _load()
    median = {
        mode: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        for mode, runs in rows.items()
    }
    direct = mib / median["direct"]["wall"]
    lines = [
        BEGIN,
        "### Relaying bytes over loopback: the floor under a cold tiered read (issue 20)",
        "",
        f"`python -m bench.bench_relay --mib {args.mib} --chunk-mib {args.chunk_mib} --runs"
        f" {args.runs}` (nproc {cores}, {info['cpu']}, kernel {info['kernel']}),"
        f" {time.strftime('%Y-%m-%d %H:%M')};"
        f" load average before {load_before}, after {load_after}. Medians of {args.runs} runs,"
        " the modes interleaved.",
        "",
        "| mode | MiB/s | origin ms/MiB | relay ms/MiB | relay page faults/MiB | sink ms/MiB |"
        f" sum ms/MiB | ceiling on {cores} cores | ceiling / direct |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        m = median[mode]
        per = {k: m.get(k, 0.0) * 1000 / mib for k in ("origin", "relay", "sink")}
        total = sum(per.values())
        ceiling = cores * 1000 / total if total else float("inf")
        lines.append(
            f"| {mode} | {mib / m['wall']:,.0f} | {per['origin']:.2f} | "
            + (f"{per['relay']:.2f} | {m['faults'] / mib:.1f}" if mode != "direct" else "- | -")
            + f" | {per['sink']:.2f} | {total:.2f} | {ceiling:,.0f} | {ceiling / direct:.2f}x |"
        )
    lines += [
        "",
        "Modes: direct, the sink asks the origin (a raw GET's one move); fresh, the relay"
        " receives each chunk as new bytes; reused, into one reused buffer; splice, through a"
        " pipe into a file, sent with sendfile: each computes the chunk's CRC32C; pipe, spliced"
        " from socket to socket through a pipe, never in the relay's memory, no CRC. CPU per"
        " MiB from /proc over the run. Ceiling: the cores over the sum, the most any relay"
        " could move with perfect overlap; beside the direct transfer's MiB/s of this run.",
        "",
        END,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
