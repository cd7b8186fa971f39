"""Batched produce and consume through librdkafka, in separate processes.

Default client: kcat (librdkafka's CLI) fed from a file of newline-separated records, so the
client costs little CPU per record. Fallback (``--client confluent`` or no kcat): the
confluent-kafka Python client in a child process (``python -m bench.ck_worker``).

Settings for both brokers (same client, same settings): acks=1, linger.ms=10,
batch.size=1000000, no compression, no idempotence; one partition. Consumers read from the
beginning with librdkafka's default fetch sizes, no consumer group.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, TopicPartition

from bench.common import Failed, Figure, Measure, Others, python, tool

PRODUCER_SETTINGS = {
    "acks": "1",
    "linger.ms": "10",
    "batch.size": "1000000",
    "compression.codec": "none",
    "enable.idempotence": "false",
    "queue.buffering.max.messages": "1000000",
    "queue.buffering.max.kbytes": "2097152",
}
ALPHABET = bytes(range(48, 123))  # printable, no newline


def record_file(workdir: Path, size: int, count: int) -> Path:
    """A file of ``count`` lines of ``size`` bytes each (plus newline), varied content."""
    path = workdir / f"records-{size}x{count}.txt"
    if path.exists() and path.stat().st_size == (size + 1) * count:
        return path
    table = bytes(ALPHABET[b % len(ALPHABET)] for b in range(256))
    distinct = min(count, 1000)
    block = b"".join(os.urandom(size).translate(table) + b"\n" for _ in range(distinct))
    full, rest = divmod(count, distinct)
    with open(path, "wb") as out:
        for _ in range(full):
            out.write(block)
        out.write(block[: rest * (size + 1)])
    return path


def high_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "sluice-bench-hw", "log_level": 0}
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)
        return int(high)
    finally:
        consumer.close()


class Client:
    name = "?"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def version(self) -> str:
        return self.name

    def produce(self, bootstrap: str, topic: str, records: Path, count: int) -> float:
        """Seconds to produce every line of ``records``; raises on failure."""
        raise NotImplementedError

    def consume(self, bootstrap: str, topic: str, count: int) -> float:
        """Seconds to consume ``count`` records from the beginning; raises on failure."""
        raise NotImplementedError


def children_cpu() -> float:
    """CPU seconds of this process's waited-for children (the client processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Kcat(Client):
    name = "kcat"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.binary = tool("kcat", "kafkacat") or "kcat"

    @staticmethod
    def available() -> bool:
        return tool("kcat", "kafkacat") is not None

    def version(self) -> str:
        out = subprocess.run([self.binary, "-V"], capture_output=True, text=True, check=False)
        for line in (out.stdout + out.stderr).splitlines():
            if line.startswith("Version"):
                return "kcat " + line.split(" builtin.features")[0].removeprefix("Version ") + ")"
        return "kcat ?"

    def produce(self, bootstrap: str, topic: str, records: Path, count: int) -> float:
        cmd = [self.binary, "-P", "-q", "-b", bootstrap, "-t", topic, "-p", "0"]
        for key, value in PRODUCER_SETTINGS.items():
            cmd += ["-X", f"{key}={value}"]
        err = self.workdir / "kcat-produce.err"
        with open(records, "rb") as stdin, open(err, "wb") as stderr:
            started = time.perf_counter()
            proc = subprocess.run(cmd, stdin=stdin, stderr=stderr, timeout=600, check=False)
            elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"kcat -P exited {proc.returncode}: {_tail(err)}")
        if b"Failed" in err.read_bytes() or b"ERROR" in err.read_bytes():
            raise RuntimeError(f"kcat -P reported errors: {_tail(err)}")
        return elapsed

    def consume(self, bootstrap: str, topic: str, count: int) -> float:
        out = self.workdir / "kcat-consume.out"
        err = self.workdir / "kcat-consume.err"
        # One "." per record: the output's size is the number of records consumed.
        cmd = [self.binary, "-C", "-q", "-b", bootstrap, "-t", topic, "-p", "0"]
        cmd += ["-o", "beginning", "-e", "-c", str(count), "-f", "."]
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            started = time.perf_counter()
            proc = subprocess.run(
                cmd,
                stdout=stdout,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                timeout=600,
                check=False,
            )
            elapsed = time.perf_counter() - started
        got = out.stat().st_size
        out.unlink()
        if proc.returncode != 0 or got != count:
            raise RuntimeError(
                f"kcat -C exited {proc.returncode} after {got}/{count} records: {_tail(err)}"
            )
        return elapsed


class Confluent(Client):
    """confluent-kafka (librdkafka) in a child process; it times itself."""

    name = "confluent-kafka"

    def version(self) -> str:
        ck, rdk = confluent_kafka.__version__, confluent_kafka.libversion()[0]
        return f"confluent-kafka {ck}, librdkafka {rdk}"

    def _run(self, args: list[str]) -> dict[str, Any]:
        proc = subprocess.run(
            [python(), "-m", "bench.ck_worker", *args],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ck_worker {args[0]}: {proc.stderr.strip()[-500:]}")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    def produce(self, bootstrap: str, topic: str, records: Path, count: int) -> float:
        settings = json.dumps(PRODUCER_SETTINGS)
        result = self._run(["produce", bootstrap, topic, str(records), str(count), settings])
        return float(result["seconds"])

    def consume(self, bootstrap: str, topic: str, count: int) -> float:
        result = self._run(["consume", bootstrap, topic, str(count)])
        return float(result["seconds"])


def _tail(path: Path, n: int = 600) -> str:
    try:
        return path.read_text(errors="replace").strip()[-n:]
    except OSError:
        return ""


def measure_produce(
    client: Client, server: Any, topic: str, records: Path, *, count: int, size: int
) -> Figure:
    try:
        before_hw = high_watermark(server.bootstrap, topic)
        cpu0, client0, others = server.cpu(), children_cpu(), Others()
        seconds = client.produce(server.bootstrap, topic, records, count)
        cpu, client_cpu = server.cpu() - cpu0, children_cpu() - client0
        others_share = others.share(cpu, client_cpu)
        stored = high_watermark(server.bootstrap, topic) - before_hw
    except Exception as exc:
        return Failed(f"{type(exc).__name__}: {exc}"[:300])
    if stored != count:
        return Failed(f"{stored} of {count} records stored")
    return Measure(
        count / seconds,
        "rec/s",
        seconds,
        count,
        count * size,
        broker_cpu=cpu,
        note=client.name,
        extra={"client_cpu": client_cpu, "others": others_share},
    )


def measure_consume(client: Client, server: Any, topic: str, *, count: int, size: int) -> Figure:
    try:
        cpu0, client0, others = server.cpu(), children_cpu(), Others()
        seconds = client.consume(server.bootstrap, topic, count)
        cpu, client_cpu = server.cpu() - cpu0, children_cpu() - client0
        others_share = others.share(cpu, client_cpu)
    except Exception as exc:
        return Failed(f"{type(exc).__name__}: {exc}"[:300])
    return Measure(
        count / seconds,
        "rec/s",
        seconds,
        count,
        count * size,
        broker_cpu=cpu,
        note=client.name,
        extra={"client_cpu": client_cpu, "others": others_share},
    )
