"""Metadata changes a controller-side handler decides, committed as one log entry.

A handler validates against the image and calls these methods instead of changing
anything; the records commit together (all or nothing) once the handler has built its
answer, and every broker applies them from the log. A ``Changes`` exists only inside
``QuorumController.decide``: it is made under the controller's lock, after the image holds
every earlier decision, so nothing it reads can go stale before its records commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from dataplane.cluster import records as r

if TYPE_CHECKING:
    from dataplane.cluster.image import MetadataImage


class Decider(Protocol):
    """What a decision may ask of the controller that makes it (``QuorumController``):
    placement and the records of partition state changes, all read from its image."""

    image: MetadataImage

    def place(
        self, name: str, partitions: Iterable[int], replication_factor: int
    ) -> dict[int, list[int]]: ...

    def check_assignment(self, replicas: Sequence[int]) -> None: ...

    def new_partition(
        self, topic_id: str, partition: int, replicas: Sequence[int]
    ) -> r.Partition: ...

    def fence_records(self, broker_id: int) -> list[r.Record]: ...

    def reassignment(
        self, topic: str, partition: int, target: Sequence[int] | None
    ) -> r.Partition | None: ...


class Changes:
    def __init__(self, controller: Decider) -> None:
        self.controller = controller
        self.image = controller.image
        self.records: list[r.Record] = []
        self.after: list[Awaitable[object]] = []
        """Awaited after the commit, before the answer (e.g. local topic removals)."""

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> str:
        """Records for a new topic; its id. ``assignment``: replica lists by partition."""
        controller = self.controller
        if assignment is None:
            placed = controller.place(name, range(partitions), replication_factor)
        else:
            for replicas in assignment:
                controller.check_assignment(replicas)
            placed = {p: list(replicas) for p, replicas in enumerate(assignment)}
        topic_id = r.new_topic_id()
        self.records.append(r.Topic(name, topic_id, dict(configs)))
        for p in sorted(placed):
            self.records.append(controller.new_partition(topic_id, p, placed[p]))
        return topic_id

    def add_partitions(
        self, name: str, count: int, assignment: Sequence[Sequence[int]] | None = None
    ) -> None:
        info = self.image.get(name)
        new = range(info.partitions, count)
        if assignment is None:
            placed = self.controller.place(name, new, info.replication_factor)
        else:
            for replicas in assignment:
                self.controller.check_assignment(replicas)
            placed = {p: list(a) for p, a in zip(new, assignment, strict=True)}
        for p in new:
            self.records.append(self.controller.new_partition(str(info.topic_id), p, placed[p]))

    def delete_topic(self, broker_removals: dict[str, asyncio.Task[None]], name: str) -> None:
        info = self.image.get(name)
        self.records.append(r.RemoveTopic(str(info.topic_id)))

        async def removed() -> None:
            task = broker_removals.get(name)
            if task is not None:
                await task

        self.after.append(removed())

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.records.append(r.TopicConfig(name, dict(configs)))

    def set_broker_configs(self, scope: str, configs: dict[str, str]) -> None:
        self.records.append(r.BrokerConfig(scope, dict(configs)))

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        self.records.append(r.GroupConfig(group, dict(configs)))

    def set_transform(self, transform: r.Transform) -> None:
        self.records.append(transform)

    def remove_transform(self, name: str) -> None:
        self.records.append(r.RemoveTransform(name))

    def set_scram_credential(self, credential: r.ScramCredential) -> None:
        self.records.append(credential)

    def remove_scram_credential(self, name: str, mechanism: int) -> None:
        self.records.append(r.RemoveScramCredential(name, mechanism))

    def add_acl(self, acl: r.Acl) -> None:
        self.records.append(acl)

    def remove_acl(self, acl_id: str) -> None:
        self.records.append(r.RemoveAcl(acl_id))

    def discard_after(self) -> None:
        for awaitable in self.after:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
        self.after = []
