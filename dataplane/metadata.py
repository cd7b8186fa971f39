"""The broker's metadata image: cluster id, topics, their ids, partition counts, configs.

On a single broker the image is persisted as one JSON document, replaced atomically
(write, fsync, rename) on every change. It is the "table" of the frontend/table/backend
pattern: handlers validate and change it; the log manager reconciles partition
directories to it.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dataplane.config import TOPIC_CONFIGS, parse_overrides
from dataplane.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidReplicationFactor,
    InvalidTopic,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
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


class MetadataStore:
    def __init__(self, data_dir: Path, *, node_id: int, cluster_id: str = "") -> None:
        self.path = data_dir / "metadata.json"
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self.next_producer_id = 1000
        self.producer_id_block = 1000
        self.broker_configs: dict[str, dict[str, str]] = {}
        """Dynamic broker configs (AlterConfigs on BROKER resources) by scope: "" is the
        cluster-wide default, "N" the broker with node id N."""
        self._load()

    # ------------------------------------------------------------------ persistence

    def _load(self) -> None:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            self.cluster_id = self.cluster_id or _new_cluster_id()
            self._save()
            return
        if self.cluster_id and doc["cluster_id"] != self.cluster_id:
            raise InvalidConfig(
                f"{self.path.parent} holds data of cluster {doc['cluster_id']}, not of "
                f"cluster.id={self.cluster_id}; use another --data-dir or the matching id"
            )
        self.cluster_id = doc["cluster_id"]
        self.next_producer_id = int(doc.get("producer_id_high_watermark", 1000))
        self.broker_configs = {
            str(scope): {str(k): str(v) for k, v in values.items()}
            for scope, values in doc.get("broker_configs", {}).items()
        }
        for raw in doc["topics"]:
            info = TopicInfo(
                raw["name"],
                uuid.UUID(raw["id"]),
                int(raw["partitions"]),
                int(raw.get("replication_factor", 1)),
                dict(raw.get("configs", {})),
            )
            self._index(info)

    def _save(self) -> None:
        doc: dict[str, Any] = {
            "cluster_id": self.cluster_id,
            "producer_id_high_watermark": self.next_producer_id,
            "topics": [
                {
                    "name": t.name,
                    "id": str(t.topic_id),
                    "partitions": t.partitions,
                    "replication_factor": t.replication_factor,
                    "configs": t.configs,
                }
                for t in self.topics.values()
            ],
            "broker_configs": self.broker_configs,
        }
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def _index(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.topics_by_id[info.topic_id] = info

    # ------------------------------------------------------------------ topics

    def get(self, name: str) -> TopicInfo:
        try:
            return self.topics[name]
        except KeyError:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}") from None

    def validate_new_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        *,
        max_partitions: int,
        brokers: int = 1,
    ) -> dict[str, str]:
        validate_topic_name(name)
        if name in self.topics:
            raise TopicAlreadyExists(f"topic {name!r} already exists")
        if partitions <= 0:
            raise InvalidPartitions(f"partition count must be at least 1, got {partitions}")
        if partitions > max_partitions:
            raise InvalidPartitions(
                f"partition count {partitions} exceeds max.partitions.per.topic={max_partitions}"
            )
        if replication_factor <= 0:
            raise InvalidReplicationFactor(
                f"replication factor must be at least 1, got {replication_factor}"
            )
        if replication_factor > brokers:
            raise InvalidReplicationFactor(
                f"replication factor {replication_factor} is larger than the {brokers} "
                "available broker(s)"
            )
        parse_overrides(TOPIC_CONFIGS, configs, what="topic")
        return dict(configs)

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicInfo:
        info = TopicInfo(name, uuid.uuid4(), partitions, replication_factor, dict(configs))
        self._index(info)
        self._save()
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.get(name)
        del self.topics[name]
        del self.topics_by_id[info.topic_id]
        self._save()
        return info

    def set_partitions(self, name: str, count: int) -> TopicInfo:
        info = replace(self.get(name), partitions=count)
        self._index(info)
        self._save()
        return info

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        info = replace(self.get(name), configs=dict(configs))
        self._index(info)
        self._save()
        return info

    # ------------------------------------------------------------------ broker configs

    def set_broker_configs(self, scope: str, configs: dict[str, str]) -> None:
        """Replace the dynamic broker configs of ``scope`` ("" or a node id)."""
        if configs:
            self.broker_configs[scope] = dict(configs)
        else:
            self.broker_configs.pop(scope, None)
        self._save()

    # ------------------------------------------------------------------ producer ids

    def allocate_producer_id(self) -> int:
        """A fresh producer id; blocks of ids are persisted so none is ever reused."""
        pid = self.next_producer_id
        self.next_producer_id += 1
        self._save()
        return pid


def _new_cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
