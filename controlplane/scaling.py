"""Scale-in, one job of a cluster's reconciler: move every partition off the brokers that go
(AlterPartitionReassignments, polled with ListPartitionReassignments), then stop, unregister
and forget them; refusals and the ``reassignment.timeout.ms`` deadline fail it, cancelling the
moves it started. See controlplane/README.md, "Scaling"."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from controlplane import kafka
from controlplane.kafka import KafkaResponseError, on_any
from controlplane.reconcile_base import AGAIN, IDLE, BrokerRuntime, ReconcilerBase, log
from controlplane.states import BrokerState, ClusterState
from controlplane.store import BrokerRecord, ClusterRecord
from controlplane.topics import plan_reassignment

DONE = "done"
"""A pass of the scale-in found nothing left to move."""

Key = tuple[str, int]


@dataclass
class ScaleInPass:
    """What one scale-in works on: the brokers that stay and go, the moves it started."""

    what: str
    ids: str
    removed: set[int]
    keep: list[BrokerRecord]
    going: list[BrokerRuntime]
    started: set[Key] = field(default_factory=set)
    ongoing: dict[Key, kafka.Reassignment] = field(default_factory=dict)

    @property
    def order(self) -> list[BrokerRecord]:
        """Any broker answers; those that stay first."""
        return self.keep + [rt.record for rt in self.going]


class ScaleIn(ReconcilerBase):
    async def _scale_in(self, cluster: ClusterRecord, runtimes: list[BrokerRuntime]) -> str:
        """Move every partition off the brokers that go, then stop, unregister and forget them.

        One pass: wait for reassignments in progress; plan moves for partitions that still
        have a replica on a broker that goes (``plan_reassignment``) and send them
        (AlterPartitionReassignments) to any broker; repeat until nothing is left to move.
        Then stop the brokers, UnregisterBroker each, delete their data and rows. A broker that
        exits meanwhile ends the pass (the next step restarts it and resumes); refusals and the
        ``reassignment.timeout.ms`` deadline fail the scale-in.
        """
        count = cluster.broker_count
        going = [rt for rt in runtimes if rt.record.broker_id >= count]
        removed = {rt.record.broker_id for rt in going}
        job = ScaleInPass(
            what=f"scale-in to {count} broker(s)",
            ids=", ".join(str(i) for i in sorted(removed)),
            removed=removed,
            keep=[rt.record for rt in runtimes if rt.record.broker_id < count],
            going=going,
        )
        timeout = self.settings.kafka_request_timeout_ms / 1000
        poll = self.settings.reassignment_poll_ms / 1000
        if self._scale_in_deadline is None:
            self._scale_in_deadline = (
                time.monotonic() + self.settings.reassignment_timeout_ms / 1000
            )
        while True:
            if any(rt.proc is None or not rt.proc.alive() for rt in runtimes):
                return AGAIN  # the next step restarts it; this scale-in resumes after
            try:
                outcome, cluster = await self._move(cluster, job, timeout)
                if outcome == DONE:
                    break
                if outcome is not None:
                    return outcome
            except (KafkaResponseError, OSError, asyncio.IncompleteReadError) as exc:
                log.warning("cluster %s: %s: %s", self.name, job.what, exc or type(exc).__name__)
                cluster = self.set_state(
                    cluster, ClusterState.UPDATING, f"{job.what}: waiting for the brokers ({exc})"
                )
            if time.monotonic() > self._scale_in_deadline:
                ongoing = job.ongoing
                pending = ", ".join(f"{t}-{p}" for t, p in sorted(ongoing)[:3]) if ongoing else ""
                return await self._scale_in_failed(
                    cluster,
                    f"{job.what} failed: partitions not moved off broker(s) {job.ids} within "
                    f"{self.settings.reassignment_timeout_ms} ms (reassignment.timeout.ms)"
                    + (f"; still moving: {pending}" if pending else ""),
                    job.started | set(ongoing),
                    job.order,
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), poll)
            self._wake.clear()
        return await self._retire(cluster, job, timeout)

    async def _move(
        self, cluster: ClusterRecord, job: ScaleInPass, timeout: float
    ) -> tuple[str | None, ClusterRecord]:
        """One look at the cluster: wait for moves in progress, or start the next ones.
        Returns DONE when nothing is left on the brokers that go, IDLE when the scale-in
        failed, None to look again after the poll interval."""
        job.ongoing, topics = await on_any(job.order, _look, timeout, read_only=True)
        if job.ongoing:
            ongoing = job.ongoing
            moving = ", ".join(f"{t}-{p}" for t, p in sorted(ongoing)[:3])
            more = f" and {len(ongoing) - 3} more" if len(ongoing) > 3 else ""
            cluster = self.set_state(
                cluster,
                ClusterState.UPDATING,
                f"{job.what}: moving partitions off broker(s) {job.ids}: "
                f"{len(ongoing)} in progress ({moving}{more})",
            )
            return None, cluster
        moves, problem = plan_reassignment(topics, job.removed, [r.broker_id for r in job.keep])
        if problem is not None:
            failed = await self._scale_in_failed(
                cluster, f"{job.what} failed: {problem}", set(), job.order
            )
            return failed, cluster
        if not moves:
            return DONE, cluster
        cluster = self.set_state(
            cluster,
            ClusterState.UPDATING,
            f"{job.what}: moving {len(moves)} partition(s) off broker(s) {job.ids}",
        )
        log.info("cluster %s: %s: reassigning %s", self.name, job.what, moves)
        targets: dict[Key, Sequence[int] | None] = dict(moves)
        refused = await on_any(
            job.order,
            functools.partial(_reassign, moves=targets),
            timeout,
            read_only=True,  # the same targets again are harmless
        )
        job.started |= set(moves) - set(refused)
        if refused:
            (key, error), *_ = sorted(refused.items())
            failed = await self._scale_in_failed(
                cluster,
                f"{job.what} failed: {len(refused)} partition(s) refused, e.g. "
                f"{key[0]}-{key[1]}: {error.detail}",
                job.started,
                job.order,
            )
            return failed, cluster
        return None, cluster

    async def _retire(self, cluster: ClusterRecord, job: ScaleInPass, timeout: float) -> str:
        """Nothing is left on the brokers that go: stop them, then make the cluster forget
        them."""
        what, ids = job.what, job.ids
        cluster = self.set_state(
            cluster, ClusterState.UPDATING, f"{what}: stopping broker(s) {ids}"
        )
        stop_timeout = self.settings.broker_stop_timeout_ms / 1000
        for rt in job.going:
            rt.state = BrokerState.STOPPING
        await asyncio.gather(
            *(rt.proc.stop(stop_timeout) for rt in job.going if rt.proc is not None)
        )
        for rt in job.going:
            rt.proc = None
            rt.state = BrokerState.STOPPED
        cluster = self.set_state(
            cluster, ClusterState.UPDATING, f"{what}: unregistering broker(s) {ids}"
        )
        for broker_id in sorted(job.removed):
            try:
                await on_any(
                    job.keep,
                    functools.partial(_unregister, broker_id=broker_id),
                    timeout,
                )
            except KafkaResponseError as exc:
                if exc.code != ErrorCode.broker_id_not_registered:  # not registered: fine
                    log.warning(
                        "cluster %s: unregistering broker %d: %s", self.name, broker_id, exc
                    )
            except (OSError, asyncio.IncompleteReadError) as exc:
                # it is stopped and fenced after broker.session.timeout.ms anyway
                log.warning("cluster %s: unregistering broker %d: %s", self.name, broker_id, exc)
        self.store.remove_brokers(
            self.name,
            sorted(job.removed),
            state_message=f"{what}: deleting data of broker(s) {ids}",
        )
        for rt in job.going:
            self.runtimes.pop(rt.record.broker_id, None)
            await asyncio.to_thread(shutil.rmtree, rt.record.data_dir, True)
        self._scale_in_deadline = None
        self._failure = ""
        log.info("cluster %s: %s: removed broker(s) %s", self.name, what, ids)
        return AGAIN

    async def _scale_in_failed(
        self,
        cluster: ClusterRecord,
        message: str,
        started: set[tuple[str, int]],
        order: list[BrokerRecord],
    ) -> str:
        """Give up: cancel the moves this scale-in started, keep every broker, turn FAILED."""
        self._scale_in_deadline = None
        if started:
            try:
                await on_any(
                    order,
                    functools.partial(_reassign, moves=dict.fromkeys(started)),
                    self.settings.kafka_request_timeout_ms / 1000,
                    read_only=True,
                )
                message += "; its reassignments were cancelled"
            except (KafkaResponseError, OSError, asyncio.IncompleteReadError) as exc:
                log.warning("cluster %s: cancelling reassignments: %s", self.name, exc)
        brokers = len(self.store.brokers(self.name))
        message += f"; the cluster keeps its {brokers} brokers"
        log.warning("cluster %s: %s", self.name, message)
        self._failure = message
        self.set_state(cluster, ClusterState.FAILED, message, operation="", broker_count=brokers)
        return IDLE


async def _look(
    admin: kafka.Admin,
) -> tuple[dict[Key, kafka.Reassignment], list[kafka.TopicMetadata]]:
    """Reassignments in progress and the topics, both from one broker: one metadata image."""
    return await admin.list_partition_reassignments(), await admin.metadata()


async def _reassign(
    admin: kafka.Admin, moves: dict[tuple[str, int], Sequence[int] | None]
) -> dict[tuple[str, int], KafkaResponseError]:
    return await admin.alter_partition_reassignments(moves)


async def _unregister(admin: kafka.Admin, broker_id: int) -> None:
    await admin.unregister_broker(broker_id)
