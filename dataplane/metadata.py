"""Topic values shared by the metadata image and the handlers (the topic-name rule is
``dataplane.config.rules.check_topic_name``).

The image itself (brokers, topics, partitions, configs) is ``dataplane.cluster.image``,
replayed from the metadata log.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from wire.usage import USAGE_TOPIC

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", USAGE_TOPIC})
"""Reported internal in Metadata (regex subscriptions and default listings skip them); their
records cannot be deleted. The usage topic is Sluice's own (metering, ``wire.usage``)."""


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    """Topic-level overrides as the user gave them (validated)."""

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS
