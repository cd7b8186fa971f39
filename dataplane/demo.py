"""``make demo``: start a broker, round-trip records through it with a real Kafka client.

Starts ``sluice-broker`` on a free loopback port with its data under ``.demo/``, creates a
topic, produces 10,000 records with confluent-kafka (librdkafka, idempotent, acks=all),
consumes them back in a consumer group, checks every one, and stops the broker.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

DEMO_DIR = Path(".demo")
COUNT = 10_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"demo: the broker exited; its log:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit("demo: the broker did not start listening within 20 s")


def main() -> None:
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir()
    port = _free_port()
    bootstrap = f"127.0.0.1:{port}"
    log_path = DEMO_DIR / "broker.log"
    print(f"starting sluice-broker on {bootstrap} (data in {DEMO_DIR}/data, log {log_path})")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dataplane.main",
                "--data-dir",
                str(DEMO_DIR / "data"),
                "--listen",
                bootstrap,
                "--set",
                "group.initial.rebalance.delay.ms=0",
            ],
            stdout=log,
            stderr=log,
        )
    try:
        _wait_listening(port, proc, log_path)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("demo", 3, 1)]).values():
            future.result(timeout=30)
        print("created topic 'demo' with 3 partitions")

        producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        started = time.monotonic()
        for i in range(COUNT):
            producer.produce("demo", key=f"key-{i}", value=f"record {i}")
            if i % 1000 == 0:
                producer.poll(0)
        if producer.flush(30):
            sys.exit("demo: some records were not acknowledged")
        produce_s = time.monotonic() - started
        print(f"produced {COUNT} records (idempotent, acks=all) in {produce_s:.2f}s")

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "demo-group",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["demo"])
        seen: set[str] = set()
        started = time.monotonic()
        while len(seen) < COUNT and time.monotonic() - started < 60:
            for msg in consumer.consume(1000, timeout=1):
                if msg.error() is None:
                    key = (msg.key() or b"").decode()
                    if (msg.value() or b"").decode() != f"record {key[4:]}":
                        sys.exit(f"demo: wrong value for {key}")
                    seen.add(key)
        consumer.close()
        if len(seen) != COUNT:
            sys.exit(f"demo: consumed {len(seen)} of {COUNT} records")
        print(
            f"consumed all {COUNT} records back in consumer group 'demo-group' "
            f"in {time.monotonic() - started:.2f}s"
        )
        del producer, admin  # destroy the clients before the broker goes away
        print("demo OK")
    finally:
        proc.terminate()
        proc.wait(20)
    print(
        "\nRun a broker yourself:\n"
        "  .venv/bin/sluice-broker --data-dir ./data --listen 127.0.0.1:9092\n"
        "and point any Kafka client (kcat, confluent-kafka, kafka-python, Java) at "
        "127.0.0.1:9092."
    )


if __name__ == "__main__":
    main()
