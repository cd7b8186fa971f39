"""The hot path's side of metering: counters that request handlers add to.

One dict update per partition of a request (a tuple key and an integer add, no lock: the
broker's event loop is the only writer). ``take`` swaps the counters out for a flush.
The usage topic itself is never metered (its own writes would feed the next flush).
"""

from __future__ import annotations

from collections import defaultdict

from wire.usage import USAGE_TOPIC, Dimension, Usage

Key = tuple[Dimension, str, str, str]
"""(dimension, topic, principal, resource)."""

ANONYMOUS = "User:ANONYMOUS"


class Meter:
    __slots__ = ("counts", "cpu_ns", "enabled")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.counts: defaultdict[Key, int] = defaultdict(int)
        self.cpu_ns: defaultdict[str, int] = defaultdict(int)
        """Guest time per transform not yet counted in whole milliseconds (carried over)."""

    def add(
        self,
        dimension: Dimension,
        quantity: int,
        topic: str = "",
        principal: str = "",
        resource: str = "",
    ) -> None:
        if quantity <= 0 or not self.enabled or topic == USAGE_TOPIC:
            return
        self.counts[dimension, topic, principal, resource] += quantity

    def bytes_in(self, topic: str, principal: str | None, nbytes: int) -> None:
        """A leader accepted ``nbytes`` of record batches from a client."""
        self.add(Dimension.BYTES_IN, nbytes, topic, principal or ANONYMOUS)

    def bytes_out(self, topic: str, principal: str | None, nbytes: int) -> None:
        """A fetch answered a consumer with ``nbytes`` of record batches."""
        self.add(Dimension.BYTES_OUT, nbytes, topic, principal or ANONYMOUS)

    def replication(self, topic: str, nbytes: int) -> None:
        """A fetch answered a follower with ``nbytes`` of record batches."""
        self.add(Dimension.REPLICATION_BYTES, nbytes, topic)

    def tiered_retrieval(self, topic: str, nbytes: int) -> None:
        """A consumer's fetch was answered with ``nbytes`` read from the remote tier."""
        self.add(Dimension.TIERED_RETRIEVAL_BYTES, nbytes, topic)

    def endpoint(self, endpoint: str, nbytes: int) -> None:
        """``nbytes`` crossed a private endpoint's listener (either way)."""
        self.add(Dimension.ENDPOINT_BYTES, nbytes, resource=endpoint)

    def transform(self, transform: str, records: int, cpu_ns: int) -> None:
        """A transform processed ``records`` input records in ``cpu_ns`` of guest time."""
        if not self.enabled:
            return
        self.add(Dimension.TRANSFORM_RECORDS, records, resource=transform)
        self.cpu_ns[transform] += max(cpu_ns, 0)

    def take(self) -> list[Usage]:
        """The counters since the last call, as usage entries (and zeroed)."""
        counts, self.counts = self.counts, defaultdict(int)
        for transform, ns in self.cpu_ns.items():
            ms, self.cpu_ns[transform] = divmod(ns, 1_000_000)
            if ms:
                counts[Dimension.TRANSFORM_CPU_MS, "", "", transform] += ms
        return [
            Usage(dimension, quantity, topic, principal, resource)
            for (dimension, topic, principal, resource), quantity in sorted(counts.items())
            if quantity > 0
        ]
