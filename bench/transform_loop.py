"""The peer of an inline transform: a Python consumer-producer loop outside the broker.

    python -m bench.transform_loop BOOTSTRAP INPUT OUTPUT LOGIC COUNT

Reads ``COUNT`` records of ``INPUT`` (partition 0, from the beginning, as the consumer group
``bench-loop-<OUTPUT>``), applies LOGIC (identity or jsonfilter, the same logic as the guests)
and writes the results to ``OUTPUT`` partition 0 with an idempotent acks=all producer; after
each consumed batch it waits for the outputs' acknowledgements, then commits the input offset:
the same at-least-once contract as the broker's transforms. ``COUNT`` 0 runs until killed
(the latency bench). Prints one JSON line: records read, written, seconds, CPU seconds.
"""

from __future__ import annotations

import json
import resource
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

BATCH = 10_000


def keeps(value: bytes | None) -> bool:
    """The JSON filter: records whose value is a JSON object with "level": "error"."""
    if value is None:
        return False
    try:
        doc = json.loads(value)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("level") == "error"


def main() -> None:
    bootstrap, source, target, logic, count_text = sys.argv[1:6]
    count = int(count_text)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-loop-{target}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
            "log_level": 0,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(source, 0)])
    read = written = 0
    started = time.perf_counter()
    filtering = logic == "jsonfilter"
    while count == 0 or read < count:
        # consume(n, timeout) waits for n records or the timeout: a short timeout keeps the
        # loop's latency low when records trickle in; a backlog fills the batch at once
        messages = consumer.consume(num_messages=BATCH, timeout=0.005)
        if not messages:
            continue
        last = -1
        for msg in messages:
            if msg.error() is not None:
                raise RuntimeError(f"consume: {msg.error()}")
            value = msg.value()
            if not filtering or keeps(value):
                producer.produce(target, value, msg.key(), partition=0)
                written += 1
            last = msg.offset()
        read += len(messages)
        if producer.flush(60):
            raise RuntimeError("outputs not acknowledged in 60 s")
        consumer.commit(offsets=[TopicPartition(source, 0, last + 1)], asynchronous=False)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    consumer.close()
    print(
        json.dumps(
            {
                "read": read,
                "written": written,
                "seconds": seconds,
                "cpu": usage.ru_utime + usage.ru_stime,
            }
        )
    )


if __name__ == "__main__":
    main()
