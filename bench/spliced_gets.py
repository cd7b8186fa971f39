"""GETs of objects whose bodies are spliced into /dev/null: the cheapest way to take bytes
from the S3 server, for the ceiling ``bench_tiered`` puts beside a cold read.

    python -m bench.spliced_gets [--receive] < urls.json

Standard input: a JSON list of ``[presigned_url, size]`` (presigned, so no key reaches the
command line or this process). The process prints ``ready``, waits for a line on standard
input, then GETs every object in order, each on a new connection (the embedded S3 server
answers ``Connection: close``, so boto3 connects anew for each GET too), each body moved
with ``splice`` from the socket through a pipe into /dev/null (never through user space),
checks the status and that exactly ``size`` bytes came, and prints ``<bytes> <seconds>
<cpu seconds>``. With ``--receive`` each body is received into one reused buffer instead
(``recv_into``): the bytes brought into user space once, the least any reader that looks at
them must do (``bench_spark`` puts it beside its from-memory source).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

from bench.bench_relay import MiB, splice_through

HEAD_LIMIT = 64 * 1024


def _head(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """Status and headers of one response, consuming exactly the head (peeked first, so no
    body byte is taken into user space)."""
    while True:
        peeked = sock.recv(HEAD_LIMIT, socket.MSG_PEEK)
        if not peeked:
            raise ConnectionError("the S3 server closed the connection")
        end = peeked.find(b"\r\n\r\n")
        if end >= 0:
            break
        if len(peeked) >= HEAD_LIMIT:
            raise ValueError(f"response head over {HEAD_LIMIT} bytes")
        time.sleep(0.0005)
    head = sock.recv(end + 4, socket.MSG_WAITALL).decode("latin-1")
    status_line, *lines = head.split("\r\n")
    headers = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers


def _receive(sock: socket.socket, buffer: memoryview, n: int) -> None:
    got = 0
    while got < n:
        moved = sock.recv_into(buffer[got:n])
        if not moved:
            raise ConnectionError("the S3 server closed the connection")
        got += moved


def main(argv: list[str]) -> int:
    receive = "--receive" in argv
    objects = json.loads(sys.stdin.readline())
    buffer = memoryview(bytearray(max(size for _, size in objects)))
    null = os.open(os.devnull, os.O_WRONLY)
    pipe = os.pipe()
    fcntl.fcntl(pipe[1], fcntl.F_SETPIPE_SZ, MiB)
    print("ready", flush=True)
    sys.stdin.readline()
    total, start, cpu = 0, time.perf_counter(), time.process_time()
    for url, size in objects:
        parts = urlsplit(url)
        target = f"{parts.path}?{parts.query}" if parts.query else parts.path
        with socket.create_connection((parts.hostname, parts.port or 80)) as sock:
            sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
            status, headers = _head(sock)
            length = int(headers.get("content-length", "-1"))
            if status != 200 or length != size:
                raise SystemExit(f"GET {parts.path}: status {status}, {length} bytes, want {size}")
            if receive:
                _receive(sock, buffer, size)
            else:
                splice_through(sock, pipe, null, size, at=False)
        total += size
    print(f"{total} {time.perf_counter() - start} {time.process_time() - cpu}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
