"""`cloudctl reboot-broker` under load: an idempotent acks=all producer (confluent-kafka) keeps
sending while two brokers of a 3-broker cluster are rebooted one after the other (rolling-safe:
each reboot waits for the ISR to be full again). Every acknowledged record is read back exactly
once; nothing is lost or duplicated. The longest pause between two acknowledgements is printed
(a measurement, not asserted)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.cli.conftest import running_cloud
from tests.controlplane.harness import wait_until

CLUSTER = "reboots"
TOPIC = "payments"
PARTITIONS = 3


class Load:
    """Sends a numbered record every 2 ms until stopped; notes each acknowledgement's time."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "log_level": 3,
            }
        )
        self.acked: list[str] = []
        self.ack_times: list[float] = []
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        self.acked.append(msg.value().decode())  # type: ignore[attr-defined]
        self.ack_times.append(time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce(
                TOPIC, value=f"r-{self.sent}".encode(), on_delivery=self._delivered
            )
            self.sent += 1
            self.producer.poll(0.002)
        self.producer.flush(60)

    def start(self) -> Load:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(90)
        del self.producer  # its librdkafka threads go (no reconnects once the cluster is gone)

    def longest_pause(self, since: float) -> float:
        times = [t for t in self.ack_times if t >= since]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def read_all(bootstrap: str) -> list[str]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reboot-check", "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[str] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < PARTITIONS and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            at_end.add(int(msg.partition() or 0))
            continue
        values.append((msg.value() or b"").decode())
    consumer.close()
    return values


def test_rolling_reboots_lose_nothing_under_an_idempotent_producer(tmp_path: Path) -> None:
    with running_cloud(tmp_path / "home") as cloud:
        made = cloud.run("create-cluster", CLUSTER, "--brokers", "3", "--wait")
        assert made.returncode == 0, made.stderr
        topic = cloud.run("create-topic", "--cluster", CLUSTER, TOPIC, "--partitions", "3")
        assert topic.returncode == 0, topic.stderr

        def in_sync() -> bool:
            out = cloud.run("describe-topic", "--cluster", CLUSTER, TOPIC, "-o", "json")
            parts = json.loads(out.stdout)["partition_details"]
            return all(len(p["isr"]) == 3 for p in parts)

        wait_until(in_sync, 30, "every replica in sync")
        bootstrap = cloud.run("get-bootstrap-brokers", CLUSTER).stdout.strip()
        load = Load(bootstrap).start()
        try:
            wait_until(lambda: len(load.acked) >= 500, 60, "the first acknowledgements")
            started = time.monotonic()
            pauses = []
            for broker in ("1", "0"):
                since = time.monotonic()
                rebooted = cloud.run(
                    "reboot-broker", CLUSTER, "--broker", broker, "--wait", "-o", "json"
                )
                assert rebooted.returncode == 0, rebooted.stderr
                assert f"reboot of broker {broker}: starting it" in rebooted.stderr
                assert in_sync(), "--wait ends once the ISR of every partition is full again"
                pauses.append(load.longest_pause(since))
                acked = len(load.acked)
                wait_until(lambda acked=acked: len(load.acked) > acked + 200, 60, "more acks")
            took = time.monotonic() - started
        finally:
            load.stop()
        assert load.errors == []
        values = read_all(bootstrap)
        assert len(values) == len(set(values)), "no record twice (idempotent producer)"
        assert set(load.acked) <= set(values), "every acknowledged record is kept"
        print(
            f"\nreboot-broker x2 under load: {len(load.acked)} records acknowledged, "
            f"{took:.1f}s for both reboots, longest pause between acks "
            + ", ".join(f"{p * 1000:.0f} ms" for p in pauses)
        )
        ops = json.loads(cloud.run("list-operations", CLUSTER, "-o", "json").stdout)
        reboots = [o for o in ops["operations"] if o["type"] == "REBOOT_BROKER"]
        assert [(o["detail"], o["state"]) for o in reboots] == [
            ("broker 1", "COMPLETED"),
            ("broker 0", "COMPLETED"),
        ]
