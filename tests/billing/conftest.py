"""Fixtures of the billing pipeline's tests: two one-broker clusters (metering off: the
tests write every usage event themselves), the run's local SparkSession, and helpers that
write usage events, run ``python -m billing.job`` as the control plane does, and read
what it wrote."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import unique
from tests.support.broker import REPO, BrokerProcess
from tests.support.processes import die_with_parent_preexec
from tests.support.spark_session import local_session, spark_run  # noqa: F401 - fixture
from wire.usage import USAGE_TOPIC, MalformedUsage, UsageEvent

USAGE_PARTITIONS = 2
"""The brokers create a one-partition usage topic; two here exercise the per-partition
offsets and duplicates re-sent to another partition."""
JOB_TIMEOUT = 600.0
"""A guard against a hung job, not a time limit: Spark on a loaded machine takes minutes."""


@pytest.fixture(scope="session")
def session(spark_run: None) -> Any:  # noqa: F811 - the imported fixture, requested
    """The run's local[2] SparkSession (``tests.support.spark_session``), session-scoped
    here: module fixtures use it, and the billing tests start no streaming query (the Spark
    tests' ``session`` makes it active for each test's thread)."""
    return local_session()


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess]]:
    """Clusters "alpha" and "beta": one broker each, each with its own usage topic."""
    brokers: dict[str, BrokerProcess] = {}
    try:
        for name in ("alpha", "beta"):
            proc = BrokerProcess(
                tmp_path_factory.mktemp(f"billing-{name}") / "data",
                {"usage.metering.enable": "false"},
            )
            brokers[name] = proc.start()
            create_usage_topic(proc)
        yield brokers
    finally:
        for proc in brokers.values():
            proc.stop()
            proc.kill()


def create_usage_topic(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(USAGE_TOPIC, USAGE_PARTITIONS, 1)])
    futures[USAGE_TOPIC].result(30)


def produce(broker: BrokerProcess, records: list[tuple[int, bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i, (partition, key, value) in enumerate(records):
        producer.produce(USAGE_TOPIC, key=key, value=value, partition=partition)
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


@dataclass(frozen=True)
class Stored:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def consume_usage(broker: BrokerProcess) -> list[Stored]:
    """Every record of the cluster's usage topic with its offset (ground truth)."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("billing-truth"),
            "enable.auto.commit": False,
        }
    )
    out: list[Stored] = []
    try:
        highs = {
            p: consumer.get_watermark_offsets(TopicPartition(USAGE_TOPIC, p), timeout=10)[1]
            for p in range(USAGE_PARTITIONS)
        }
        consumer.assign([TopicPartition(USAGE_TOPIC, p, 0) for p in range(USAGE_PARTITIONS)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(out) < sum(highs.values()):
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    out.append(
                        Stored(
                            int(msg.partition() or 0),
                            int(msg.offset() or 0),
                            msg.key(),
                            msg.value(),
                        )
                    )
    finally:
        consumer.close()
    assert len(out) == sum(highs.values())
    return out


def high_watermarks(broker: BrokerProcess) -> dict[str, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("hw")})
    try:
        return {
            str(p): consumer.get_watermark_offsets(TopicPartition(USAGE_TOPIC, p), timeout=10)[1]
            for p in range(USAGE_PARTITIONS)
        }
    finally:
        consumer.close()


def decoded_or_none(value: bytes) -> UsageEvent | None:
    try:
        return UsageEvent.decode(value)
    except MalformedUsage:
        return None


@dataclass
class JobRun:
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str

    @property
    def failed(self) -> dict[str, Any] | None:
        return next((x for x in self.lines if x.get("stage") == "failed"), None)


def write_spec(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


def job_command(spec: Path) -> list[str]:
    return [sys.executable, "-m", "billing.job", "--spec", str(spec)]


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1", **(extra or {})}


def late_first_streaming_worker(directory: Path) -> dict[str, str]:
    """The job's environment with a Python for Spark's workers whose first streaming-source
    worker starts 15 s late and exits, as on a saturated machine: Spark gives a worker 10 s
    to connect back, so that query fails once to start."""
    wrapper = directory / "late-python"
    marker = directory / "late-python.started"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in *python_streaming_source_runner*)\n'
        f"  if mkdir {shlex.quote(str(marker))} 2>/dev/null; then sleep 15; exit 1; fi ;;\n"
        "esac\n"
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return {"PYSPARK_PYTHON": str(wrapper)}


def run_job(spec: Path, log: Path, env: dict[str, str] | None = None) -> JobRun:
    """``python -m billing.job --spec SPEC`` to its end, as the control plane runs it."""
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            job_command(spec),
            cwd=REPO,
            env=job_env(env),
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
            preexec_fn=die_with_parent_preexec(),
        )
        try:
            out, _ = proc.communicate(timeout=JOB_TIMEOUT)
        finally:
            kill_job(proc)
    return JobRun(proc.returncode, parse_lines(out.decode()), log.read_text()[-4000:])


def run_job_until(spec: Path, log: Path, stop: Callable[[dict[str, Any]], bool]) -> JobRun:
    """Run the job and SIGKILL its whole process group (driver, JVM, Python workers) at the
    first progress line ``stop`` accepts."""
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            job_command(spec),
            cwd=REPO,
            env=job_env(),
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
            preexec_fn=die_with_parent_preexec(),
        )
        lines: list[dict[str, Any]] = []
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = json.loads(raw)
                lines.append(line)
                if stop(line):
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
        finally:
            kill_job(proc)
            if proc.stdout is not None:
                proc.stdout.close()
    return JobRun(proc.returncode, lines, log.read_text()[-4000:])


def kill_job(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the job's process group and wait until none of it is left (the JVM must not
    touch the checkpoint after the next run started)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the job's process group {proc.pid} outlived SIGKILL")


def parse_lines(stdout: str) -> list[dict[str, Any]]:
    lines = []
    for raw in stdout.splitlines():
        doc = json.loads(raw)  # every stdout line is one JSON object (the contract)
        assert isinstance(doc, dict), raw
        lines.append(doc)
    return lines
