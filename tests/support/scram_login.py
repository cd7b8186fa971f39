"""Whether a SCRAM (or PLAIN) user can log in: a confluent-kafka producer that either reads
metadata (logged in) or gets librdkafka's authentication error (refused)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException, Producer

LOGIN_TIMEOUT = 20.0


def logs_in(conf: Mapping[str, str], timeout: float = LOGIN_TIMEOUT) -> bool:
    """True when a producer with ``conf`` (bootstrap.servers, security.protocol,
    sasl.mechanisms, sasl.username, sasl.password, ...) authenticates and reads metadata;
    False when the broker refuses the login. Neither within ``timeout``: AssertionError."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "log_level": 0, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
        try:
            producer.list_topics(timeout=1)
            return True
        except KafkaException:
            producer.poll(0.1)  # librdkafka reports a refused login to error_cb in poll()
    raise AssertionError(f"neither logged in nor refused within {timeout} s: {errors}")
