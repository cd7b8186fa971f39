"""GETs of objects whose bodies are spliced into /dev/null: the cheapest way to take bytes
from the S3 server, for the halves of a cold read ``bench_tiered`` measures.

    python -m bench.spliced_gets [--receive] < urls.json

Standard input: a JSON list of ``[presigned_url, size]`` (presigned, so no key reaches the
command line or this process). The process prints ``ready``, waits for a line on standard
input, then GETs every object in order, each on a new connection (the embedded S3 server
answers ``Connection: close``, so boto3 connects anew for each GET too) through
``tiered.ranged_get.HttpConnection``, each body moved with ``splice`` from the socket
through a pipe into /dev/null (never through user space), checks the status and that
exactly ``size`` bytes came, and prints ``<bytes> <seconds> <cpu seconds>``. With
``--receive`` each body is received into one reused buffer instead: the bytes brought into
user space once, the least any reader that looks at them must do (``bench_spark`` puts it
beside its from-memory source).

`GetsBeside` runs it as a child process for a bench: presigns, starts it, and reads its
answer.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from types import TracebackType
from urllib.parse import urlsplit

from bench.bench_relay import MiB, splice_through
from bench.common import REPO
from tiered.object_store import S3ObjectStore
from tiered.ranged_get import HttpConnection

TIMEOUT = 60.0
"""Seconds to connect, and to wait for bytes of an answer."""


class GetsBeside:
    """This module as a child process, its GETs started by `go` (so that they run beside
    whatever the bench measures), its answer checked by `result`."""

    def __init__(self, store: S3ObjectStore, objects: list[tuple[str, int]], receive: bool):
        self.size = sum(size for _, size in objects)
        urls = [
            [store.client.generate_presigned_url(
                "get_object", Params={"Bucket": store.bucket, "Key": key}, ExpiresIn=900
            ), size]
            for key, size in objects
        ]  # fmt: skip
        self.child = subprocess.Popen(
            [sys.executable, "-m", "bench.spliced_gets", *(["--receive"] if receive else [])],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self._say(json.dumps(urls))
        if self._line() != "ready":
            self.close()
            raise AssertionError("bench.spliced_gets did not start")

    def _say(self, line: str) -> None:
        assert self.child.stdin is not None
        self.child.stdin.write(line + "\n")
        self.child.stdin.flush()

    def _line(self) -> str:
        assert self.child.stdout is not None
        return self.child.stdout.readline().strip()

    def go(self) -> None:
        self._say("go")

    def result(self) -> tuple[int, float, float]:
        """Bytes moved (checked: every object's), seconds and CPU seconds of the GETs."""
        answer = self._line().split()
        if self.child.wait(600) != 0 or len(answer) != 3:
            raise AssertionError(f"bench.spliced_gets exited {self.child.returncode}")
        moved, seconds, cpu = int(answer[0]), float(answer[1]), float(answer[2])
        if moved != self.size:
            raise AssertionError(f"bench.spliced_gets moved {moved} bytes of {self.size}")
        return moved, seconds, cpu

    def close(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait()

    def __enter__(self) -> GetsBeside:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


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
        conn = HttpConnection(parts.netloc, TIMEOUT, TIMEOUT, None)
        try:
            status, headers = conn.request(f"{parts.path}?{parts.query}", {})
            length = int(headers.get("content-length", "-1"))
            if status != 200 or length != size:
                raise SystemExit(f"GET {parts.path}: status {status}, {length} bytes, want {size}")
            if receive:
                conn.receive_into(buffer[:size])
            else:
                assert conn.sock is not None
                conn.sock.settimeout(None)  # splice wants a blocking socket
                splice_through(conn.sock, pipe, null, size, at=False)
        finally:
            conn.close()
        total += size
    print(f"{total} {time.perf_counter() - start} {time.process_time() - cpu}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
