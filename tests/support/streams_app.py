"""Run a Kafka Streams application (tools/java/StreamsApp.java, Apache Kafka's kafka-streams)
from the tests, and read what it wrote.

The jars come from ``tools/fetch-streams-deps.sh`` (``make streams-deps``) in
``.cache/java/streams``; the app is compiled once into ``.cache/java/streams-app`` by the same
code path as the Java client harness (``java_client.compiled_classes``).

    reason = streams_available()
    if reason:
        pytest.skip(reason)
    app = StreamsApp(
        tmp_path / "a", Topology.WORDCOUNT, bootstrap,
        application_id="wc", input_topic="lines", output_topic="counts",
    )
    with app:
        app.wait_running()
        ...
    records = read_committed(bootstrap, "counts")

The app runs in its own session (``kill()`` is ``kill -9`` of its process group), is stopped
with SIGTERM by ``stop()`` (Streams then closes: its open transaction ends), at interpreter exit
if a caller forgot, and by the kernel if the test process dies (Linux, main thread).
"""

from __future__ import annotations

import enum
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v0.request import ListTransactionsRequest

from .java_client import (
    JAVA_CACHE,
    REPO_ROOT,
    compiled_classes,
    java_missing,
    parse_json_lines,
)
from .processes import StartStop, die_with_parent_preexec, kill_group, stop_group, track, untrack
from .raw_client import RawClient

STREAMS_DIR = JAVA_CACHE / "streams"
APP_SRC = REPO_ROOT / "tools" / "java" / "StreamsApp.java"
APP_CLASSES = JAVA_CACHE / "streams-app"
FETCH_HINT = "run `make streams-deps` (tools/fetch-streams-deps.sh)"
STOP_GRACE_SECONDS = 45.0
"""SIGTERM, then SIGKILL: Streams' own close waits up to 30 s (StreamsApp.java)."""


class Topology(enum.StrEnum):
    """The topologies of StreamsApp.java (its first argument)."""

    WORDCOUNT = "wordcount"
    WINDOWED = "windowed"
    JOIN = "join"


def streams_available() -> str | None:
    """Skip reason when the Streams app cannot run here, else None."""
    reason = java_missing()
    if reason:
        return reason
    if not any(STREAMS_DIR.glob("kafka-streams-*.jar")):
        return f"kafka-streams jars missing from {STREAMS_DIR}; {FETCH_HINT}"
    if shutil.which("javac") is None:
        return "no `javac` on PATH (the Streams app is compiled; Java 17+ JDK needed)"
    return None


def streams_command(args: list[str]) -> list[str]:
    """``java ... StreamsApp args`` (compiles the app first if its source changed)."""
    classpath = str(STREAMS_DIR / "*")
    classes = compiled_classes(APP_SRC, APP_CLASSES, classpath)
    if classes is None:
        raise RuntimeError(f"javac could not compile {APP_SRC} against {classpath}")
    return [
        shutil.which("java") or "java",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        f"{classes}{os.pathsep}{classpath}",
        "StreamsApp",
        *args,
    ]


class StreamsApp(StartStop):
    """One instance of StreamsApp.java. Its JSON lines go to ``workdir/out.jsonl``, its log to
    ``workdir/streams.log``, its state stores to ``workdir/state``."""

    def __init__(
        self,
        workdir: Path,
        topology: Topology,
        bootstrap: str,
        *,
        application_id: str,
        input_topic: str,
        output_topic: str,
        table_topic: str | None = None,
        config: Mapping[str, str] | None = None,
        log_level: str = "info",
    ) -> None:
        self.workdir = Path(workdir)
        self.application_id = application_id
        args = [
            str(topology),
            "--bootstrap",
            bootstrap,
            "--application-id",
            application_id,
            "--input",
            input_topic,
            "--output",
            output_topic,
            "--state-dir",
            str(self.workdir / "state"),
            "--log-level",
            log_level,
        ]
        if table_topic is not None:
            args += ["--table", table_topic]
        for key, value in (config or {}).items():
            args += ["--config", f"{key}={value}"]
        self.args = args
        self.out_path = self.workdir / "out.jsonl"
        self.log_path = self.workdir / "streams.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._files: list[IO[bytes]] = []

    def start(self) -> None:
        if self.alive():
            raise RuntimeError("the Streams app is already running")
        command = streams_command(self.args)
        self.workdir.mkdir(parents=True, exist_ok=True)
        out = open(self.out_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        log = open(self.log_path, "ab")  # noqa: SIM115
        self._files = [out, log]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=log,
            cwd=REPO_ROOT,
            start_new_session=True,
            preexec_fn=die_with_parent_preexec(),
        )
        track(self)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def lines(self) -> list[dict[str, Any]]:
        try:
            return parse_json_lines(self.out_path.read_text(errors="replace"))
        except OSError:
            return []

    def running_lines(self) -> list[dict[str, Any]]:
        """The ``{"state": "RUNNING", "active": [...], ...}`` lines so far, oldest first."""
        return [line for line in self.lines() if line.get("state") == "RUNNING"]

    def state(self) -> str | None:
        """The last state Streams reported (``RUNNING``, ``REBALANCING``, ...), None before
        the first."""
        states = [line["state"] for line in self.lines() if "state" in line]
        return str(states[-1]) if states else None

    def active_tasks(self) -> list[str]:
        """Active tasks of the last RUNNING state (empty before the first)."""
        running = self.running_lines()
        return list(running[-1]["active"]) if running else []

    def transactional_ids(self) -> list[str]:
        """The transactional ids of the app's stream threads (exactly_once_v2 names them
        ``<application.id>-<process id>-<thread index>``; a thread is named
        ``<application.id>-<process id>-StreamThread-<thread index>``)."""
        running = self.running_lines()
        if not running:
            return []
        return [re.sub(r"-StreamThread-(\d+)$", r"-\1", name) for name in running[-1]["threads"]]

    def wait_running(self, timeout: float = 120, *, after: int = 0) -> dict[str, Any]:
        """The first RUNNING line after the ``after`` first ones; raises with the log's tail
        when the app exits or reports an error first, or on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            running = self.running_lines()
            if len(running) > after:
                return running[after]
            self.check()
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the Streams app is not RUNNING after {timeout:.0f} s\n" + self.tail()
                )
            time.sleep(0.2)

    def check(self) -> None:
        """Raise when the app reported an error or exited."""
        errors = [line for line in self.lines() if "error" in line]
        if errors:
            raise RuntimeError(f"the Streams app failed: {errors[-1]}\n" + self.tail())
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(
                f"the Streams app exited with {self.proc.returncode}\n" + self.tail()
            )

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return f"--- {self.log_path}:\n" + "\n".join(text.splitlines()[-lines:])

    def pause(self) -> None:
        """SIGSTOP the app: it sends nothing until ``resume()`` (or ``kill()``)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """``kill -9`` of the app (no close, no commit: its transaction stays open)."""
        if self.proc is not None:
            kill_group(self.proc)
        self._close_files()
        untrack(self)

    def stop(self) -> None:
        """SIGTERM (Streams closes, ending its transaction), SIGKILL after the grace period."""
        if self.proc is not None:
            stop_group(self.proc, STOP_GRACE_SECONDS)
        self._close_files()
        untrack(self)

    def _close_files(self) -> None:
        for f in self._files:
            f.close()
        self._files = []


# ---------------------------------------------------------------------- input and output


@dataclass(frozen=True)
class Record:
    """One record read back; ``value`` as stored (a state store's changelog holds serialized
    longs), ``text`` decoded as UTF-8 (the apps' output topics hold strings)."""

    partition: int
    offset: int
    key: str | None
    value: bytes | None
    timestamp: int

    @property
    def text(self) -> str | None:
        return None if self.value is None else self.value.decode()


class Writer:
    """An idempotent producer (acks=all) writing (key, value, timestamp ms or None) records in
    order; ``write`` returns once every record is acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "log_level": 0,
            }
        )

    def write(self, topic: str, records: Iterable[tuple[str | None, str, int | None]]) -> int:
        errors: list[str] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                errors.append(str(err))

        count = 0
        for key, value, timestamp in records:
            extra: dict[str, Any] = {} if timestamp is None else {"timestamp": timestamp}
            while True:
                try:
                    self.producer.produce(
                        topic, value=value, key=key, on_delivery=delivered, **extra
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)
            count += 1
        left = self.producer.flush(60)
        if left or errors:
            raise RuntimeError(f"{left} records not delivered to {topic}; errors: {errors[:3]}")
        return count


def produce(
    bootstrap: str, topic: str, records: Iterable[tuple[str | None, str, int | None]]
) -> int:
    """Write the records with a new Writer; how many were written."""
    return Writer(bootstrap).write(topic, records)


def transaction_states(bootstraps: Iterable[str]) -> dict[str, str]:
    """Transactional id -> state (Kafka's names: ``Ongoing``, ``CompleteCommit``, ...) of
    every transaction the brokers coordinate (ListTransactions asked of each broker)."""
    states: dict[str, str] = {}
    for bootstrap in bootstraps:
        with RawClient(bootstrap) as client:
            answer = client.request(
                ListTransactionsRequest(state_filters=(), producer_id_filters=())
            )
        if answer.error_code != ErrorCode.none:
            raise RuntimeError(f"ListTransactions on {bootstrap}: {answer.error_code!r}")
        states.update({t.transactional_id: t.transaction_state for t in answer.transaction_states})
    return states


def read_committed(bootstrap: str, topic: str, timeout: float = 60) -> list[Record]:
    """Every record of ``topic`` a read_committed consumer sees up to the last stable offsets
    of the moment it starts, in offset order per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 0,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends: dict[int, int] = {}
        for p in partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        pending = {p for p, end in ends.items() if end > 0}
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(pending)} not read to {ends}")
            for msg in consumer.consume(500, timeout=0.5):
                err = msg.error()
                p = msg.partition() or 0
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if (msg.offset() or 0) >= ends.get(p, 0):
                            pending.discard(p)
                        continue
                    raise RuntimeError(f"reading {topic}: {err}")
                key = msg.key()
                records.append(
                    Record(
                        p,
                        msg.offset() or 0,
                        None if key is None else key.decode(),
                        msg.value(),
                        msg.timestamp()[1],
                    )
                )
                if (msg.offset() or 0) + 1 >= ends[p]:
                    pending.discard(p)
        return records
    finally:
        consumer.close()


def last_values(records: Iterable[Record]) -> dict[str, str | None]:
    """The last value of each key (records in offset order per partition; a key lives in one
    partition)."""
    last: dict[str, str | None] = {}
    for r in records:
        if r.key is not None:
            last[r.key] = r.text
    return last


def values_by_key(records: Iterable[Record]) -> dict[str, list[str | None]]:
    """Every value of each key, in offset order."""
    out: dict[str, list[str | None]] = {}
    for r in records:
        if r.key is not None:
            out.setdefault(r.key, []).append(r.text)
    return out
