"""Child process for the confluent-kafka client; prints one JSON line with its own timing.

python -m bench.ck_worker produce BOOTSTRAP TOPIC RECORDS_FILE COUNT SETTINGS_JSON
python -m bench.ck_worker consume BOOTSTRAP TOPIC COUNT
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def produce(bootstrap: str, topic: str, path: str, count: int, settings: dict[str, str]) -> None:
    conf = {k: v for k, v in settings.items() if k != "compression.codec"}
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, **conf})
    errors = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    with open(path, "rb") as f:
        values = f.read().split(b"\n")[:count]
    producer.list_topics(topic, timeout=10)
    started = time.perf_counter()
    for value in values:
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(300)
    seconds = time.perf_counter() - started
    if remaining or errors:
        sys.exit(f"{remaining} undelivered, {len(errors)} errors: {errors[:3]}")
    print(json.dumps({"seconds": seconds, "records": len(values)}))


def consume(bootstrap: str, topic: str, count: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "sluice-bench",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=10000, timeout=1):
            if msg.error() is None:
                got += 1
    seconds = time.perf_counter() - started
    consumer.close()
    if got < count:
        sys.exit(f"consumed {got} of {count}")
    print(json.dumps({"seconds": seconds, "records": got}))


def main() -> None:
    what = sys.argv[1]
    if what == "produce":
        _, _, bootstrap, topic, path, count, settings = sys.argv
        produce(bootstrap, topic, path, int(count), json.loads(settings))
    elif what == "consume":
        _, _, bootstrap, topic, count = sys.argv
        consume(bootstrap, topic, int(count))
    else:
        sys.exit(f"unknown command {what}")


if __name__ == "__main__":
    main()
