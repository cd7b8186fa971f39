"""The cloud flow, as a user runs it: `python -m controlplane.demo` (for `make demo`).

    cloudctl up → create-cluster (3 brokers) → create-topic → produce and consume 10,000
    records with a real Kafka client (confluent-kafka) → describe → leave it running

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

Stop:
  cloudctl delete-cluster {CLUSTER} --wait     # the cluster and its data
  cloudctl down                                # the control plane and every broker"""
    )


if __name__ == "__main__":
    main()
