"""KIP-951's leader hints: a Produce (v10+) or Fetch (v16+) partition answered
NOT_LEADER_OR_FOLLOWER (Fetch: FENCED_LEADER_EPOCH too) carries the leader this broker's
metadata image names and that leader's endpoint on the request's listener, so the client
sends its next request there without a Metadata round trip first. Clients that know the
fields (librdkafka 2.4+, the Java client 3.7+) redirect at once after a leadership move:
a controlled shutdown, a preferred-leader election, a reassignment.

A hint is given only for a live (unfenced) leader other than this broker that has the
request's listener; otherwise the fields keep their defaults (left out of the response),
and the client refreshes its metadata as before.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from dataplane.handlers.context import RequestContext

PRODUCE_HINT_VERSION = 10
FETCH_HINT_VERSION = 16
PRODUCE_HINTED = frozenset({ErrorCode.not_leader_or_follower})
FETCH_HINTED = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


class LeaderHints:
    """The hints of one response: ``leader`` per partition, then ``endpoints`` for the
    response's ``node_endpoints`` (each hinted leader once)."""

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx
        self._endpoints: dict[int, tuple[str, int]] = {}

    def leader(
        self, topic: str | None, topic_id: uuid.UUID | None, partition: int
    ) -> tuple[int, int] | None:
        """(leader id, leader epoch) of the partition, if there is a leader to point to."""
        image = self.ctx.broker.metadata
        if topic is None:
            info = image.topics_by_id.get(topic_id) if topic_id is not None else None
            if info is None:
                return None
            topic = info.name
        state = image.partitions.get((topic, partition))
        if state is None or state.leader < 0 or state.leader == self.ctx.broker.node_id:
            return None
        known = image.brokers.get(state.leader)
        if known is None or known.fenced:
            return None
        address = known.address_on(self.ctx.listener)
        if address is None:
            return None
        self._endpoints[state.leader] = address
        return state.leader, state.leader_epoch

    def current_leader(
        self, entity: type[Any], topic: str | None, topic_id: uuid.UUID | None, partition: int
    ) -> dict[str, Any]:
        """The ``current_leader`` keyword for a partition response (``entity``: the API's
        LeaderIdAndEpoch class), or nothing when there is no hint."""
        found = self.leader(topic, topic_id, partition)
        if found is None:
            return {}
        leader_id, epoch = found
        return {"current_leader": self.ctx.make(entity, leader_id=leader_id, leader_epoch=epoch)}

    def node_endpoints(self, entity: type[Any]) -> dict[str, Any]:
        """The ``node_endpoints`` keyword for the response (``entity``: the API's NodeEndpoint
        class), or nothing when no partition was hinted."""
        if not self._endpoints:
            return {}
        return {
            "node_endpoints": tuple(
                self.ctx.make(entity, node_id=node, host=host, port=port, rack=None)
                for node, (host, port) in sorted(self._endpoints.items())
            )
        }
