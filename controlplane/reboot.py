"""Broker reboots (RebootBroker, as MSK's), one job of a cluster's reconciler.

Rolling-safe: the broker is stopped only once every partition's ISR is full (no partition
loses a replica it needs), with a controlled shutdown (SIGTERM: the broker has the controller
fence it, so its leaderships move at once); it is started again with its data and, once it
answers, the reboot ends when the ISR of every partition is full again (the broker caught up).
Each wait has ``broker.reboot.timeout.ms``; past it the reboot fails (the cluster stays
ACTIVE: it runs). The request is recorded on the broker (``reboot_requested``) until the
broker has been stopped, so a control plane restarted meanwhile carries it out.
"""

from __future__ import annotations

import asyncio
import time

from controlplane.kafka import KafkaResponseError, TopicMetadata, on_any
from controlplane.reconcile_base import AGAIN, IDLE, BrokerRuntime, log
from controlplane.states import BrokerState, ClusterState
from controlplane.store import ClusterRecord
from controlplane.supervision import Supervision


def under_replicated(topics: list[TopicMetadata]) -> list[str]:
    """``topic-partition`` of every partition with a replica out of its ISR (or no leader)."""
    return [
        f"{t.name}-{p.partition}"
        for t in topics
        for p in t.partitions
        if p.leader < 0 or not set(p.replicas) <= set(p.isr)
    ]


def examples(names: list[str]) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


class Reboot(Supervision):
    _rebooting: int | None = None
    """The broker being rebooted (for messages; None after a control-plane restart)."""

    def _reboot_deadline_passed(self) -> bool:
        if self._reboot_deadline is None:
            self._reboot_deadline = time.monotonic() + self.settings.broker_reboot_timeout_ms / 1000
        return time.monotonic() > self._reboot_deadline

    async def _lagging(self) -> list[str] | None:
        """Partitions whose ISR is not full, from one broker's metadata; None when no broker
        answered (not known)."""
        brokers = [rt.record for rt in self.runtimes.values()]
        timeout = self.settings.kafka_request_timeout_ms / 1000
        try:
            topics = await on_any(brokers, lambda admin: admin.metadata(), timeout, read_only=True)
        except (KafkaResponseError, OSError, asyncio.IncompleteReadError) as exc:
            log.info("cluster %s: reboot: metadata not read (%s)", self.name, exc)
            return None
        return under_replicated(topics)

    async def _reboot(self, cluster: ClusterRecord, rt: BrokerRuntime) -> str:
        """Stop and start one broker once the ISR of every partition is full."""
        broker_id = rt.record.broker_id
        self._rebooting = broker_id
        what = f"reboot of broker {broker_id}"
        lagging = await self._lagging()
        if lagging is None or lagging:
            limit = self.settings.broker_reboot_timeout_ms
            if self._reboot_deadline_passed():
                self.store.update_broker(self.name, broker_id, reboot_requested=0)
                self._reboot_deadline = None
                why = (
                    f"{len(lagging)} partition(s) under-replicated ({examples(lagging)})"
                    if lagging
                    else "no broker answered a metadata request"
                )
                self.fail_operation(
                    cluster,
                    ClusterState.ACTIVE,
                    "",
                    f"{what} failed: {why} for {limit} ms (broker.reboot.timeout.ms); "
                    f"broker {broker_id} was not restarted",
                )
                return AGAIN
            waiting = (
                f"{len(lagging)} under-replicated partition(s) ({examples(lagging)}) to catch up"
                if lagging
                else "the brokers' metadata"
            )
            self.set_state(
                cluster, ClusterState.UPDATING, f"{what}: waiting for {waiting} before stopping it"
            )
            return IDLE
        cluster = self.set_state(
            cluster,
            ClusterState.UPDATING,
            f"{what}: stopping it (controlled shutdown: its partition leaderships move first)",
        )
        if rt.proc is not None:
            rt.state = BrokerState.STOPPING
            await rt.proc.stop(self.settings.broker_stop_timeout_ms / 1000)
            rt.proc = None
        rt.state = BrokerState.STOPPED
        self.store.update_broker(self.name, broker_id, pid=0, reboot_requested=0)
        rt.record = self.store.broker(self.name, broker_id)
        log.info("cluster %s: %s: stopped; starting it", self.name, what)
        cluster = self.set_state(cluster, ClusterState.UPDATING, f"{what}: starting it")
        self._reboot_deadline = None  # the next wait (the ISR after the start) gets its own
        try:
            self._spawn(cluster, rt)
        except OSError as exc:
            self._failed_start(cluster, rt, f"cannot start: {exc}")
            return AGAIN
        await self._await_ready(cluster, [rt])
        return AGAIN

    async def _reboot_settled(self, cluster: ClusterRecord) -> bool:
        """After the restart: True once the ISR of every partition is full again, or when the
        reboot failed at its deadline; else says what it waits for."""
        which = f"broker {self._rebooting}" if self._rebooting is not None else "a broker"
        what = f"reboot of {which}"
        lagging = await self._lagging()
        if lagging == []:
            self._reboot_deadline = None
            self._rebooting = None
            return True
        if self._reboot_deadline_passed():
            self._reboot_deadline = None
            detail = f": {examples(lagging)}" if lagging else ""
            self.fail_operation(
                cluster,
                ClusterState.ACTIVE,
                "",
                f"{what}: the ISR was not full again within "
                f"{self.settings.broker_reboot_timeout_ms} ms (broker.reboot.timeout.ms){detail}",
            )
            return True
        waiting = (
            f"{len(lagging)} partition(s) to have every replica in sync again ({examples(lagging)})"
            if lagging
            else "the brokers' metadata"
        )
        self.set_state(cluster, ClusterState.UPDATING, f"{what}: waiting for {waiting}")
        return False
