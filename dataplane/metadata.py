"""Topic values and name rules shared by the metadata image and the handlers.

The image itself (brokers, topics, partitions, configs) is ``dataplane.cluster.image``,
replayed from the metadata log.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from wire.errors import (
    InvalidTopic,
)

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopic("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopic(f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not LEGAL_TOPIC.match(name):
        raise InvalidTopic(
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
        )


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
