"""One partition's remote tier as its log sees it: offsets from the metadata image."""

from __future__ import annotations

from dataplane.cluster.image import MetadataImage


class PartitionTier:
    def __init__(self, image: MetadataImage, topic: str, partition: int) -> None:
        self.image = image
        self.topic = topic
        self.partition = partition

    def end_offset(self) -> int:
        remote = self.image.remote_log(self.topic, self.partition)
        return 0 if remote is None else remote.end_offset()

    def start_offset(self) -> int:
        remote = self.image.remote_log(self.topic, self.partition)
        return -1 if remote is None else remote.start_offset()
