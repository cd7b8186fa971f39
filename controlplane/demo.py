"""The cloud flow, as a user runs it: `python -m controlplane.demo` (for `make demo`).

    cloudctl up → the cluster sluice-demo (3 brokers) → a topic → produce and consume 10,000
    records with a real Kafka client (confluent-kafka) → a tiered topic: old segments move
    to the object store, local retention trims the disk, and every record is read back from
    offset 0 → describe → leave it running

Idempotent: it reuses a running control plane and an existing ``sluice-demo`` cluster and
its topics, and never deletes anything. Each run adds 10,000 records to ``demo-events``
(and reads back its own); ``demo-history`` gets its 20,000 records once and is read back
from offset 0 on every run. Every step prints one line with the time since the start.

Uses ``$SLUICE_HOME`` (default ``~/.sluice``), so plain ``cloudctl`` commands work afterwards.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

CLUSTER = "sluice-demo"
TOPIC = "demo-events"
COUNT = 10_000
HISTORY = "demo-history"
HISTORY_COUNT = 20_000
SEGMENT_BYTES = 1 << 20
LOCAL_RETENTION_BYTES = 2 << 20
CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")


def _started() -> float:
    """The demo's clock: now, or when `make demo` started (SLUICE_DEMO_T0, epoch seconds),
    so that the install's time counts."""
    try:
        before = time.time() - float(os.environ.get("SLUICE_DEMO_T0", ""))
    except ValueError:
        before = 0.0
    return time.monotonic() - max(0.0, before)


STARTED = _started()
QUIET = 3  # librdkafka: errors only (leadership moves while a cluster settles are retried)


def mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def step(message: str) -> None:
    """One line per step, with the time since the demo started."""
    print(f"[{time.monotonic() - STARTED:6.1f}s] {message}", flush=True)


def cloudctl(*args: str, show: bool = True, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run cloudctl like a user; print the command and (``show``) what it printed."""
    step(f"$ cloudctl {shlex.join(args)}")
    done = subprocess.run([CLOUDCTL, *args], capture_output=True, text=True, check=False)
    if show:
        if done.stdout.strip():
            print(done.stdout.rstrip(), flush=True)
        if done.stderr.strip():
            print(done.stderr.rstrip(), file=sys.stderr, flush=True)
    if check and done.returncode != 0:
        if not show:
            print(done.stderr.rstrip(), file=sys.stderr, flush=True)
        sys.exit(f"demo: `cloudctl {shlex.join(args)}` failed (exit {done.returncode})")
    return done


def quiet(*args: str) -> Any:
    """A cloudctl query whose JSON the demo reads (not shown); None when it fails."""
    done = subprocess.run(
        [CLOUDCTL, *args, "-o", "json"], capture_output=True, text=True, check=False
    )
    return json.loads(done.stdout) if done.returncode == 0 else None


def ensure_cluster() -> None:
    """Reuse sluice-demo when it exists (waiting for it to be ACTIVE), else create it."""
    found = quiet("describe-cluster", CLUSTER)
    if found is None:
        step(f"cluster {CLUSTER}: not found; creating it (3 brokers, a few seconds)")
        cloudctl("create-cluster", CLUSTER, "--brokers", "3", "--wait", show=False)
        return
    created = found["created_at"]
    step(
        f"cluster {CLUSTER}: found it ({found['state']}, {found['broker_count']} brokers, "
        f"created {created}); reusing it and its data"
    )
    if found["state"] == "DELETING":
        sys.exit(f"demo: cluster {CLUSTER} is being deleted; run the demo again once it is gone")
    if found["state"] != "ACTIVE" or found["operation"]:
        step(f"cluster {CLUSTER}: waiting until it is ACTIVE (it is {found['state']})")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            found = quiet("describe-cluster", CLUSTER)
            if found and found["state"] == "ACTIVE" and not found["operation"]:
                return
            if found and found["state"] == "FAILED" and not found["operation"]:
                break
            time.sleep(1)
        sys.exit(
            f"demo: cluster {CLUSTER} is not ACTIVE ({found and found['state_message']}); "
            f"see `cloudctl describe-cluster {CLUSTER}`"
        )


def topic_records(bootstrap: str, topic: str) -> int:
    """Records in the topic now (end minus start offsets of its partitions)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "demo-count", "log_level": QUIET}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        total = 0
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def ensure_topic(topic: str, *args: str) -> bool:
    """Create the topic unless it exists; True when it was created."""
    if quiet("describe-topic", "--cluster", CLUSTER, topic) is not None:
        return False
    cloudctl("create-topic", "--cluster", CLUSTER, topic, *args, show=False)
    return True


def round_trip(bootstrap: str, run: str) -> None:
    step(f"producing {COUNT:,} records (run {run}) to {TOPIC} with confluent-kafka (idempotent)")
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    failures: list[str] = []
    started = time.monotonic()
    for i in range(COUNT):
        producer.produce(
            TOPIC,
            key=f"key-{i}",
            value=f"{run} record {i}",
            on_delivery=lambda err, _msg: failures.append(str(err)) if err else None,
        )
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        sys.exit(f"demo: {left} records unacknowledged, {len(failures)} failed: {failures[:1]}")
    step(f"  all acknowledged in {time.monotonic() - started:.2f}s")

    group = f"demo-{run}"
    step(f"consuming them back in the consumer group {group}")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "log_level": QUIET,
        }
    )
    consumer.subscribe([TOPIC])
    seen: set[str] = set()
    total = 0
    prefix = f"{run} record "
    deadline = time.monotonic() + 120
    while len(seen) < COUNT and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        total += 1
        value = (msg.value() or b"").decode()
        if value.startswith(prefix):
            seen.add(value)
    consumer.close()
    if seen != {f"{prefix}{i}" for i in range(COUNT)}:
        sys.exit(f"demo: consumed {len(seen)} distinct records of run {run}, expected {COUNT}")
    kept = topic_records(bootstrap, TOPIC)
    runs = kept // COUNT
    step(
        f"  all {COUNT:,} records of this run came back; {TOPIC} holds {kept:,} records "
        f"({runs} run(s) of the demo: earlier runs' records are kept)"
    )


def fill_history(bootstrap: str) -> None:
    """demo-history holds HISTORY_COUNT records of 500 B (produced once, kept after)."""
    have = topic_records(bootstrap, HISTORY)
    if have >= HISTORY_COUNT:
        step(f"topic {HISTORY}: found it with {have:,} records; not adding more")
        return
    missing = HISTORY_COUNT - have
    step(f"producing {missing:,} records of 500 B to {HISTORY} (remote.storage.enable=true)")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(have, HISTORY_COUNT):
        producer.produce(HISTORY, key=f"{i}", value=b"h" * 500)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(60):
        sys.exit("demo: history records unacknowledged")


def wait_for_tiers() -> dict[str, Any]:
    """Until closed segments are in the object store and local retention trimmed the disk
    (the brokers check every few seconds: the control plane's
    broker.retention.check.interval.ms)."""
    step(
        "waiting for the leader to upload closed segments to the object store, and for local "
        f"retention to keep {LOCAL_RETENTION_BYTES >> 20} MiB (+ the active segment) per replica"
    )
    deadline = time.monotonic() + 120
    topic: dict[str, Any] = {}
    while time.monotonic() < deadline:
        topic = quiet("describe-topic", "--cluster", CLUSTER, HISTORY) or {}
        uploaded = topic.get("tiered_segments", 0) >= 5
        trimmed = topic.get("hot_bytes_per_replica", 1 << 40) <= (
            LOCAL_RETENTION_BYTES + SEGMENT_BYTES
        )
        if uploaded and trimmed:
            break
        time.sleep(1)
    else:
        sys.exit(f"demo: {HISTORY} was not tiered within 120 s: {topic}")
    step(
        f"  {topic['tiered_segments']} segments ({mib(topic['tiered_bytes'])}) in the "
        f"object store; {mib(topic['hot_bytes_per_replica'])} on disk per replica "
        f"({mib(topic['hot_bytes'])} on all {topic['replication_factor']} replicas)"
    )
    return topic


def read_history(bootstrap: str) -> None:
    expected = topic_records(bootstrap, HISTORY)
    step(f"reading {HISTORY} back from offset 0 (object store, then disk)")
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"demo-{uuid.uuid4().hex[:8]}"}
    )
    consumer.assign([TopicPartition(HISTORY, 0, OFFSET_BEGINNING)])
    seen = 0
    first = -1
    deadline = time.monotonic() + 120
    while seen < expected and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 1.0):
            offset = msg.offset()
            if msg.error() is None and offset is not None:
                first = offset if first < 0 else first
                seen += 1
    consumer.close()
    if seen != expected or first != 0:
        sys.exit(f"demo: read {seen} of {expected} history records (first offset {first})")
    step(f"  read all {expected:,} back from offset 0, across the object store and disk")


def main() -> None:
    home = os.environ.get("SLUICE_HOME") or str(Path("~/.sluice").expanduser())
    run = time.strftime("run-%Y%m%dT%H%M%S")
    step(f"Sluice cloud demo (SLUICE_HOME={home})")
    cloudctl("up")
    ensure_cluster()
    bootstrap = cloudctl("get-bootstrap-brokers", CLUSTER, show=False).stdout.strip()
    step(f"  bootstrap brokers: {bootstrap}")
    if ensure_topic(TOPIC, "--partitions", "3"):
        step(f"topic {TOPIC}: created (3 partitions, 3 replicas, min.insync.replicas=2)")
    else:
        step(f"topic {TOPIC}: found it with {topic_records(bootstrap, TOPIC):,} records")
    round_trip(bootstrap, run)
    if ensure_topic(
        HISTORY,
        "--partitions",
        "1",
        "--config",
        "remote.storage.enable=true",
        "--config",
        f"segment.bytes={SEGMENT_BYTES}",
        "--config",
        f"local.retention.bytes={LOCAL_RETENTION_BYTES}",
    ):
        step(f"topic {HISTORY}: created (tiered: 1 MiB segments, 2 MiB kept on disk)")
    fill_history(bootstrap)
    wait_for_tiers()
    read_history(bootstrap)
    cloudctl("describe-cluster", CLUSTER)
    cloudctl("describe-topic", "--cluster", CLUSTER, HISTORY)
    cloudctl("list-operations", CLUSTER)
    cloudctl("status")
    on_path = Path(CLOUDCTL).parent
    step("done")
    print(
        f"""
The control plane and the cluster {CLUSTER!r} are still running; `make demo` again reuses
them (and adds {COUNT:,} records to {TOPIC}).
(cloudctl is {CLOUDCTL}; `export PATH={on_path}:$PATH` to type just `cloudctl`.)

Continue:
  cloudctl use-cluster {CLUSTER}       # the default of --cluster from now on
  echo hello | cloudctl produce {TOPIC}
  cloudctl consume {TOPIC} --exit
  cloudctl list-groups; cloudctl describe-group demo-{run}
  cloudctl logs {CLUSTER} --since -5m
  kcat -b $(cloudctl get-bootstrap-brokers {CLUSTER}) -L
  .venv/bin/python spark/examples/backfill.py   # Spark reads {HISTORY}, tiers and all

Stop:
  cloudctl delete-cluster {CLUSTER} --wait   # the cluster and its data
  cloudctl down                              # the control plane and every broker"""
    )


if __name__ == "__main__":
    main()
