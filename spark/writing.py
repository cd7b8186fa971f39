"""Executor side of a write: rows of Spark's Kafka sink schema produced with confluent-kafka.

Columns (Spark's Kafka sink): ``value`` (binary or string, required), ``key`` (binary or
string), ``headers`` (array<struct<key string, value binary>>), ``partition`` (int), ``topic``
(string; the ``topic`` option, when given, wins over it). Other columns are refused at
planning, as Spark does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

WRITABLE = ("topic", "key", "value", "headers", "partition")


class WriteError(Exception):
    """A record could not be written (the first delivery error of a task)."""


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    producer_conf: Mapping[str, str]
    flush_timeout_s: float = 120.0


def check_columns(names: Iterable[str], topic_option: str | None) -> None:
    names = list(names)
    lowered = [n.lower() for n in names]
    extra = [n for n in names if n.lower() not in WRITABLE]
    if extra:
        raise ValueError(
            f"column(s) {', '.join(extra)} cannot be written to Kafka; allowed: "
            + ", ".join(WRITABLE)
        )
    if "value" not in lowered:
        raise ValueError("a 'value' column is required")
    if topic_option is None and "topic" not in lowered:
        raise ValueError("no topic: give the 'topic' option or a 'topic' column")


def _bytes(value: Any, column: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise WriteError(f"column {column!r} must be binary or string, got {type(value).__name__}")


def produce_rows(options: WriteOptions, rows: Iterable[Any]) -> int:
    """Produce every row and wait for all deliveries; returns the number written."""
    producer = Producer(
        {**options.producer_conf, "bootstrap.servers": options.bootstrap, "log_level": 3}
    )
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None and not failures:
            failures.append(str(err))

    count = 0
    for row in rows:
        fields = row.asDict() if hasattr(row, "asDict") else dict(row)
        topic = options.topic or fields.get("topic")
        if not topic:
            raise WriteError("a row has no topic (null 'topic' column and no 'topic' option)")
        kwargs: dict[str, Any] = {
            "key": _bytes(fields.get("key"), "key"),
            "value": _bytes(fields.get("value"), "value"),
            "on_delivery": delivered,
        }
        if fields.get("partition") is not None:
            kwargs["partition"] = int(fields["partition"])
        headers = fields.get("headers")
        if headers:
            kwargs["headers"] = [(h["key"], _bytes(h["value"], "headers")) for h in headers]
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.1)
        count += 1
        if count % 1000 == 0:
            producer.poll(0)
        if failures:
            break
    left = producer.flush(options.flush_timeout_s)
    if failures:
        raise WriteError(f"writing to Kafka failed: {failures[0]}")
    if left:
        raise WriteError(f"{left} record(s) not delivered within {options.flush_timeout_s} s")
    return count
