"""Usage events: what the brokers and the control plane meter, as records of a cluster's
``__sluice_usage`` topic.

Record key (UTF-8): ``SOURCE/EPOCH/SEQUENCE``, the event's idempotent identity. A writer
that retries, restarts or fails over re-sends an event under the same key with the same
content, so a reader keeps the first record of each key and counts nothing twice.

- ``broker-N``: broker N's counters and samples. EPOCH is the broker's incarnation (one
  more at each start, kept in its data directory), SEQUENCE counts its events from 0 in
  that incarnation. Unsent events wait in a spool file, so a restart re-sends them.
- ``controller``: the active controller's partition samples. EPOCH is 0 and SEQUENCE the
  bucket's start (ms); any controller computes the same event for the same bucket.
- ``controlplane``: provisioned capacity (broker-hours by broker type, endpoint-hours)
  from the control plane's recorded state transitions. EPOCH 0, SEQUENCE the bucket's
  start (ms); re-computing a bucket gives the same event.

Record value (UTF-8 JSON object)::

    {"v": 1, "source": "broker-1", "epoch": 3, "sequence": 17,
     "start_ms": 1764104400000, "end_ms": 1764104410000,
     "usage": [{"d": "bytes_in", "q": 1048576, "topic": "orders", "principal": "User:app"},
               {"d": "broker_ms", "q": 60000, "resource": "kafka.m5.large"}]}

``start_ms``/``end_ms`` bound the interval the quantities cover, by the writer's clock.
Writers never let an interval cross an hour boundary, so an event belongs to the hour of
its ``start_ms``. Quantities are non-negative integers in the dimension's unit
(``UNITS``); ``topic``, ``principal`` and ``resource`` are omitted when empty.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

USAGE_TOPIC = "__sluice_usage"
"""Each cluster's usage topic (internal: created by the cluster, compacted never)."""

FORMAT_VERSION = 1
HOUR_MS = 3_600_000
BUCKET_MS = 60_000
"""The control plane's and the controller's metering bucket: whole minutes."""


class Dimension(enum.StrEnum):
    """A billable quantity. The table in dataplane/metering/README.md says what each
    counts, where and when."""

    BROKER_MS = "broker_ms"
    PARTITION_MS = "partition_ms"
    HOT_STORAGE_BYTE_MS = "hot_storage_byte_ms"
    TIERED_STORAGE_BYTE_MS = "tiered_storage_byte_ms"
    TIERED_RETRIEVAL_BYTES = "tiered_retrieval_bytes"
    BYTES_IN = "bytes_in"
    BYTES_OUT = "bytes_out"
    REPLICATION_BYTES = "replication_bytes"
    ENDPOINT_MS = "endpoint_ms"
    ENDPOINT_BYTES = "endpoint_bytes"
    TRANSFORM_CPU_MS = "transform_cpu_ms"
    TRANSFORM_RECORDS = "transform_records"
    SPARK_TIERED_READ_BYTES = "spark_tiered_read_bytes"


UNITS: Mapping[Dimension, str] = {
    Dimension.BROKER_MS: "ms",
    Dimension.PARTITION_MS: "ms",
    Dimension.HOT_STORAGE_BYTE_MS: "byte-ms",
    Dimension.TIERED_STORAGE_BYTE_MS: "byte-ms",
    Dimension.TIERED_RETRIEVAL_BYTES: "bytes",
    Dimension.BYTES_IN: "bytes",
    Dimension.BYTES_OUT: "bytes",
    Dimension.REPLICATION_BYTES: "bytes",
    Dimension.ENDPOINT_MS: "ms",
    Dimension.ENDPOINT_BYTES: "bytes",
    Dimension.TRANSFORM_CPU_MS: "ms",
    Dimension.TRANSFORM_RECORDS: "records",
    Dimension.SPARK_TIERED_READ_BYTES: "bytes",
}


class MalformedUsage(ValueError):
    """A usage record that does not follow this format."""


@dataclass(frozen=True, slots=True)
class Usage:
    dimension: Dimension
    quantity: int
    topic: str = ""
    principal: str = ""
    resource: str = ""
    """Broker type (broker_ms), endpoint (endpoint_*), transform (transform_*)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"d": self.dimension.value, "q": self.quantity}
        for name in ("topic", "principal", "resource"):
            value = getattr(self, name)
            if value:
                out[name] = value
        return out


@dataclass(frozen=True, slots=True)
class UsageEvent:
    source: str
    epoch: int
    sequence: int
    start_ms: int
    end_ms: int
    usage: tuple[Usage, ...] = field(default_factory=tuple)

    @property
    def key(self) -> bytes:
        return f"{self.source}/{self.epoch}/{self.sequence}".encode()

    @property
    def hour_ms(self) -> int:
        """The start of the hour the event belongs to."""
        return self.start_ms - self.start_ms % HOUR_MS

    def encode(self) -> bytes:
        return json.dumps(
            {
                "v": FORMAT_VERSION,
                "source": self.source,
                "epoch": self.epoch,
                "sequence": self.sequence,
                "start_ms": self.start_ms,
                "end_ms": self.end_ms,
                "usage": [u.to_json() for u in self.usage],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, value: bytes) -> UsageEvent:
        try:
            doc = json.loads(value)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MalformedUsage(f"usage record is not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("v") != FORMAT_VERSION:
            raise MalformedUsage(f"usage record of an unknown version: {str(doc)[:80]}")
        try:
            event = cls(
                source=_str(doc, "source"),
                epoch=_int(doc, "epoch"),
                sequence=_int(doc, "sequence"),
                start_ms=_int(doc, "start_ms"),
                end_ms=_int(doc, "end_ms"),
                usage=tuple(_usage(u) for u in _list(doc, "usage")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedUsage(f"usage record {str(doc)[:80]}: {exc}") from None
        if not event.source or event.end_ms < event.start_ms:
            raise MalformedUsage(f"usage record with no source or a negative interval: {doc}")
        if event.start_ms // HOUR_MS != max(event.start_ms, event.end_ms - 1) // HOUR_MS:
            raise MalformedUsage(f"usage record crossing an hour boundary: {doc}")
        return event


def split_at_hours(start_ms: int, end_ms: int) -> Iterable[tuple[int, int]]:
    """``[start_ms, end_ms)`` cut at hour boundaries (what writers do before emitting)."""
    while start_ms < end_ms:
        cut = min(end_ms, start_ms - start_ms % HOUR_MS + HOUR_MS)
        yield start_ms, cut
        start_ms = cut


def _usage(doc: Any) -> Usage:
    if not isinstance(doc, dict):
        raise TypeError("a usage entry is not an object")
    quantity = _int(doc, "q")
    if quantity < 0:
        raise ValueError(f"negative quantity {quantity}")
    return Usage(
        dimension=Dimension(doc["d"]),
        quantity=quantity,
        topic=str(doc.get("topic", "")),
        principal=str(doc.get("principal", "")),
        resource=str(doc.get("resource", "")),
    )


def _int(doc: dict[str, Any], name: str) -> int:
    value = doc[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} is not an integer")
    return value


def _str(doc: dict[str, Any], name: str) -> str:
    value = doc[name]
    if not isinstance(value, str):
        raise TypeError(f"{name} is not a string")
    return value


def _list(doc: dict[str, Any], name: str) -> list[Any]:
    value = doc[name]
    if not isinstance(value, list):
        raise TypeError(f"{name} is not a list")
    return value
