"""The cloud flow, as a user runs it: `python -m controlplane.demo` (for `make demo`).

    cloudctl up → create-cluster (3 brokers) → create-topic → produce and consume 10,000
    records with a real Kafka client (confluent-kafka) → a tiered topic: old segments move
    to the object store and are read back from offset 0 → describe → leave it running

Uses ``$SLUICE_HOME`` (default ``~/.sluice``), so plain ``cloudctl`` commands work afterwards.
The demo cluster ``sluice-demo`` is re-created on every run; other clusters are left alone.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

CLUSTER = "sluice-demo"
TOPIC = "demo-events"
COUNT = 10_000
HISTORY = "demo-history"
HISTORY_COUNT = 20_000
CLOUDCTL = str(Path(sys.executable).parent / "cloudctl")


def cloudctl(*args: str, show: bool = True) -> str:
    """Run cloudctl like a user; print the command and what it printed."""
    print(f"\n$ cloudctl {shlex.join(args)}", flush=True)
    done = subprocess.run([CLOUDCTL, *args], capture_output=True, text=True, check=False)
    if done.stderr.strip():
        print(done.stderr.rstrip(), file=sys.stderr, flush=True)
    if show and done.stdout.strip():
        print(done.stdout.rstrip(), flush=True)
    if done.returncode != 0:
        sys.exit(f"demo: `cloudctl {shlex.join(args)}` failed (exit {done.returncode})")
    return done.stdout


def round_trip(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer

    print(f"\nproducing {COUNT:,} records to {TOPIC} with confluent-kafka (idempotent, acks=all)")
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    failures: list[str] = []
    started = time.monotonic()
    for i in range(COUNT):
        producer.produce(
            TOPIC,
            key=f"key-{i}",
            value=f"record {i}",
            on_delivery=lambda err, _msg: failures.append(str(err)) if err else None,
        )
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        sys.exit(f"demo: {left} records unacknowledged, {len(failures)} failed: {failures[:1]}")
    print(f"  acknowledged in {time.monotonic() - started:.2f}s")

    print("consuming them back in a consumer group")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"demo-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "log_level": 3,  # quiet: leadership moves while the cluster settles are retried
        }
    )
    consumer.subscribe([TOPIC])
    seen: set[str] = set()
    deadline = time.monotonic() + 120
    while len(seen) < COUNT and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        seen.add((msg.value() or b"").decode())
    consumer.close()
    expected = {f"record {i}" for i in range(COUNT)}
    if seen != expected:
        sys.exit(f"demo: consumed {len(seen)} distinct records, expected {COUNT}")
    print(f"  all {COUNT:,} records came back")


def remote_segments(bootstrap: str, topic: str) -> list[dict[str, object]]:
    """What the remote tier holds of ``topic`` (DescribeRemoteLog, asked of one broker)."""
    import asyncio

    from controlplane.kafka import Admin

    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    doc = asyncio.run(Admin(host, int(port), 10).describe_remote_log([topic]))
    parts = doc.get("topics", {}).get(topic, {}).get("partitions", {})
    return [s for p in parts.values() for s in p["segments"] if s["state"] == "copy_finished"]


def tiering(bootstrap: str) -> None:
    """A topic whose closed segments go to the object store, read back from offset 0."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    print(f"\nproducing {HISTORY_COUNT:,} records of 500 B to {HISTORY} (remote.storage.enable)")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(HISTORY_COUNT):
        producer.produce(HISTORY, key=f"{i}", value=b"h" * 500)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(60):
        sys.exit("demo: history records unacknowledged")
    print("waiting for the leader to upload closed segments to the object store", end="")
    deadline = time.monotonic() + 90
    segments: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        segments = remote_segments(bootstrap, HISTORY)
        if len(segments) >= 5:
            break
        print(".", end="", flush=True)
        time.sleep(1)
    size = sum(int(str(s["size_bytes"])) for s in segments)
    print(f"\n  {len(segments)} segments ({size / 1e6:.1f} MB) in the object store")
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"demo-{uuid.uuid4().hex[:8]}"}
    )
    consumer.assign([TopicPartition(HISTORY, 0, OFFSET_BEGINNING)])
    seen = 0
    first = -1
    deadline = time.monotonic() + 120
    while seen < HISTORY_COUNT and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 1.0):
            offset = msg.offset()
            if msg.error() is None and offset is not None:
                first = offset if first < 0 else first
                seen += 1
    consumer.close()
    if seen != HISTORY_COUNT or first != 0:
        sys.exit(f"demo: read {seen} of {HISTORY_COUNT} history records (first offset {first})")
    print(f"  read all {HISTORY_COUNT:,} back from offset 0, across the object store and disk")


def main() -> None:
    home = os.environ.get("SLUICE_HOME") or str(Path("~/.sluice").expanduser())
    print(f"Sluice cloud demo (SLUICE_HOME={home})")
    cloudctl("up")
    existing = cloudctl("list-clusters", "-o", "json", show=False)
    if f'"name": "{CLUSTER}"' in existing:
        cloudctl("delete-cluster", CLUSTER, "--wait")
    cloudctl("create-cluster", CLUSTER, "--brokers", "3", "--wait")
    cloudctl(
        "create-topic",
        "--cluster",
        CLUSTER,
        TOPIC,
        "--partitions",
        "3",
        "--replication-factor",
        "3",
    )
    bootstrap = cloudctl("get-bootstrap-brokers", CLUSTER).strip()
    round_trip(bootstrap)
    cloudctl(
        "create-topic",
        "--cluster",
        CLUSTER,
        HISTORY,
        "--partitions",
        "1",
        "--replication-factor",
        "3",
        "--config",
        "remote.storage.enable=true",
        "--config",
        "segment.bytes=1048576",
        "--config",
        "local.retention.bytes=2097152",
    )
    tiering(bootstrap)
    cloudctl("describe-cluster", CLUSTER)
    cloudctl("describe-topic", "--cluster", CLUSTER, TOPIC)
    cloudctl("status")
    on_path = Path(CLOUDCTL).parent
    print(
        f"""
The control plane and the cluster {CLUSTER!r} are still running.
(cloudctl is {CLOUDCTL}; `export PATH={on_path}:$PATH` to type just `cloudctl`.)

Continue:
  echo hello | cloudctl produce --cluster {CLUSTER} {TOPIC}
  cloudctl consume --cluster {CLUSTER} {TOPIC} --exit
  kcat -b $(cloudctl get-bootstrap-brokers {CLUSTER}) -L
  cloudctl create-cluster another --wait
  .venv/bin/python spark/examples/backfill.py    # Spark reads {HISTORY}, tiers and all

Stop:
  cloudctl delete-cluster {CLUSTER} --wait     # the cluster and its data
  cloudctl down                                # the control plane and every broker"""
    )


if __name__ == "__main__":
    main()
