"""What the embedded S3 server serves to clients that read tiered data directly (Spark's
``format("sluice")`` executors): bytes per bucket, topic and minute, for the control plane
to meter as ``spark_tiered_read_bytes`` (dataplane/metering/README.md).

Counted: the body bytes of every successful (200, 206) GET of an object, signed with a
bucket's read-only key (the key the control plane hands to clients with the cluster's object
store: ``GetCluster`` with credentials). Not counted: the brokers' own reads (their key is
read-write: that is ``tiered_retrieval_bytes``, metered by the brokers), the control plane's
(admin key), HEAD requests, listings, errors. A response is counted as its bytes leave the
server, in the minute they leave it; a client that stops reading mid-body is counted for
what was sent. The topic is the one in the object's key (``tiered.layout``); objects outside
the layout count under topic "".

The server keeps the counts in memory and writes them to ``DATA_DIR/read-bytes.json``
(atomically: temp file, fsync, rename) every ``--read-counts-flush-ms`` (default 1000) when
they changed, and when it stops (SIGTERM). A kill -9 loses at most the counts of that last
interval. Minutes older than ``--read-counts-retention-ms`` (default 31 days: the control
plane's ``metering.catchup.max.ms``) are dropped at each write. The file, read by
:func:`load_counts`::

    {"v": 1, "counts": [["BUCKET", MINUTE_START_MS, "TOPIC", BYTES], ...]}
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from tiered.layout import parse_key
from tiered.s3_auth import ACCESS_KEY_ENVIRON
from tiered.s3_fast_get import FileBody

READS_FILE = "read-bytes.json"
"""The counts file's name in the embedded server's data directory."""

MINUTE_MS = 60_000
FLUSH_MS = 1_000
RETENTION_MS = 31 * 24 * 3_600_000

Counts = dict[tuple[str, int, str], int]
"""(bucket, minute start ms, topic) -> bytes."""


def load_counts(data_dir: Path) -> Counts:
    """The counts the server last wrote ({} when it wrote none)."""
    try:
        doc = json.loads((data_dir / READS_FILE).read_bytes())
    except FileNotFoundError:
        return {}
    return {(str(b), int(m), str(t)): int(n) for b, m, t, n in doc["counts"]}


class ReadCounts:
    """The server's counts, in memory, written to ``READS_FILE`` by :meth:`flush`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        retention_ms: int = RETENTION_MS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = data_dir / READS_FILE
        self.retention_ms = retention_ms
        self.clock = clock
        self._lock = threading.Lock()
        self._counts: Counts = load_counts(data_dir)
        self._dirty = False

    def add(self, bucket: str, topic: str, count: int) -> None:
        if count <= 0:
            return
        now = int(self.clock() * 1000)
        slot = (bucket, now - now % MINUTE_MS, topic)
        with self._lock:
            self._counts[slot] = self._counts.get(slot, 0) + count
            self._dirty = True

    def snapshot(self) -> Counts:
        with self._lock:
            return dict(self._counts)

    def flush(self) -> None:
        """Write the counts if they changed (minutes past the retention dropped)."""
        with self._lock:
            if not self._dirty:
                return
            oldest = int(self.clock() * 1000) - self.retention_ms
            self._counts = {k: n for k, n in self._counts.items() if k[1] >= oldest}
            rows = sorted([b, m, t, n] for (b, m, t), n in self._counts.items())
            self._dirty = False
        data = json.dumps({"v": 1, "counts": rows}, separators=(",", ":")).encode()
        temp = self.path.with_name(f".{self.path.name}.tmp")
        with open(temp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, self.path)

    def run(self, interval_ms: int, stop: threading.Event) -> None:
        """Flush every ``interval_ms`` until ``stop`` is set, then once more."""
        while not stop.wait(interval_ms / 1000):
            self.flush()
        self.flush()


class ReadMeter:
    """WSGI middleware behind ``SigV4Front``: counts what read-only keys GET."""

    def __init__(self, app: Callable[..., Any], counts: ReadCounts) -> None:
        self.app = app
        self.counts = counts

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        key = environ.get(ACCESS_KEY_ENVIRON)
        method = str(environ.get("REQUEST_METHOD", "")).upper()
        path = str(environ.get("PATH_INFO") or "/")
        bucket, _, name = path.lstrip("/").partition("/")
        if method != "GET" or not name or key is None or key.admin or not key.read_only:
            return self.app(environ, start_response)
        status: list[str] = []

        def capture(code: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status.append(code)
            return start_response(code, headers, exc_info)

        parsed = parse_key(name)
        topic = parsed.topic if parsed is not None else ""
        return self._counted(self.app(environ, capture), status, bucket, topic)

    def _counted(
        self, body: Iterable[bytes], status: list[str], bucket: str, topic: str
    ) -> Iterator[bytes]:
        ok = bool(status) and status[0][:3] in ("200", "206")
        try:
            for chunk in body:
                if ok:
                    self.counts.add(bucket, topic, len(chunk))
                yield chunk
        finally:
            if ok and isinstance(body, FileBody) and body.sent:  # sent with sendfile
                self.counts.add(bucket, topic, body.sent)
            close = getattr(body, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()
