"""A producer that keeps producing for a while (run as a script by the end-to-end test).

    python steady_producer.py BOOTSTRAP TOPIC SECONDS

Sends one record every 10 ms, idempotent with acks=all, and prints one JSON line at the end:
{"sent": N, "acked": N, "failed": N, "errors": [...]}.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "log_level": 3,
        }
    )
    acked = 0
    errors: list[str] = []

    def delivered(err: object, msg: object) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(str(err))

    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(topic, value=f"steady-{sent}".encode(), on_delivery=delivered)
        sent += 1
        producer.poll(0.01)
    producer.flush(30)
    print(json.dumps({"sent": sent, "acked": acked, "failed": len(errors), "errors": errors[:5]}))


if __name__ == "__main__":
    main()
