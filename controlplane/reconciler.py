"""Backend: one reconciler per cluster converges broker processes to the desired state.

The servicers only write desired state (store.py) and call :meth:`ClusterManager.notify`. Each
cluster's reconciler then runs *steps*; a step reads the cluster and its brokers from the store,
looks at the processes, and moves one stage forward, driving the state machine:

    CREATING ──all brokers answer, registered──▶ ACTIVE ◀──▶ UPDATING (scale out or in,
                                                  │  ▲          rolling restart, broker reboot)
                       a broker exits or hangs ──▼  │ restarted, answers again
                                                 HEALING
    any state ──DeleteCluster──▶ DELETING ──brokers stopped, data removed──▶ (row deleted)
    CREATING/UPDATING ──a broker fails to start broker.start.attempts times──▶ FAILED (retried
    with backoff; ACTIVE again once every broker answers)
    UPDATING (scale-in) ──reassignment refused or not done in reassignment.timeout.ms──▶ FAILED
    (the cluster keeps its brokers; stays FAILED until the next operation)

Steps run one at a time per cluster, after a wake-up (a request, a process exit seen through
its pidfd) or every ``supervisor.interval.ms``. DeleteCluster interrupts a running step. Every
operation (create, update, scale, reboot, heal, delete) is recorded with its progress and end
(``reconcile_base.ReconcilerBase.set_state``).

The jobs of a step live in their own modules, one class each, combined here: process
supervision (``supervision.py``), buckets (``buckets.py``), scale-in (``scaling.py``, see
controlplane/README.md "Scaling"), reboots (``reboot.py``) and deletion (``deletion.py``);
``reconcile_base.py`` holds what they share.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from controlplane import endpoints
from controlplane.config import Settings
from controlplane.deletion import Deletion
from controlplane.objectstore import ObjectStoreManager
from controlplane.process import BrokerProcess, scan_brokers
from controlplane.reboot import Reboot
from controlplane.reconcile_base import AGAIN, GONE, IDLE, BrokerRuntime, ReconcilerBase, log
from controlplane.scaling import ScaleIn
from controlplane.states import BrokerState, ClusterState, OperationType
from controlplane.store import ClusterRecord, Store

__all__ = ["AGAIN", "GONE", "IDLE", "BrokerRuntime", "ClusterManager", "ClusterReconciler"]


class ClusterReconciler(Deletion, ScaleIn, Reboot):
    """A cluster's reconciler: the loop, and the step that calls each job in turn."""

    # ------------------------------------------------------------------ loop

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"reconcile-{self.name}")

    def interrupt(self) -> None:
        """Cancel the running step (DeleteCluster); the loop goes on with a fresh step."""
        if self._step_task is not None and not self._step_task.done():
            self._interrupted = True
            self._step_task.cancel()
        self.wake()

    async def run(self) -> None:
        watchdog = asyncio.create_task(self.watchdog(), name=f"watchdog-{self.name}")
        try:
            await self._loop()
        finally:
            watchdog.cancel()

    async def _loop(self) -> None:
        interval = self.settings.supervisor_interval_ms / 1000
        while True:
            self._wake.clear()
            self._step_task = asyncio.create_task(self.step())
            try:
                progress = await self._step_task
            except asyncio.CancelledError:
                if not self._interrupted:
                    self._step_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await self._step_task
                    raise
                self._interrupted = False
                continue
            except Exception:
                log.exception("cluster %s: reconcile step failed", self.name)
                progress = IDLE
            if progress is GONE:
                self.manager.forget(self)
                return
            if progress is AGAIN:
                continue
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    # ------------------------------------------------------------------ one step

    async def step(self) -> str:
        """Move the cluster one stage towards its desired state: GONE, AGAIN or IDLE."""
        cluster = self.store.get_cluster(self.name)
        if cluster is None:
            await self.stop_all()
            return GONE
        if cluster.state == ClusterState.DELETING:
            await self.delete(cluster)
            return GONE
        cluster = self._ensure_bucket(cluster)
        cluster = self._ensure_quorum(cluster)
        endpoints.ensure_ports(self.store, self.name, self.manager.reserved_ports())
        records = self.store.brokers(self.name)
        self._sync_runtimes(records)
        runtimes = [self.runtimes[r.broker_id] for r in records]

        # 1-4: every broker runs, answers, has the current config and is healthy
        moved = await self._supervise(cluster, runtimes)
        if moved is not None:
            return moved

        # 5. a reboot asked for (RebootBroker): one broker, once the ISR is full
        rebooting = [rt for rt in runtimes if rt.record.reboot_requested]
        if rebooting:
            return await self._reboot(cluster, rebooting[0])

        # 6. scale-in: move partitions off the brokers that go, then stop and forget them
        if len(runtimes) > cluster.broker_count:
            return await self._scale_in(cluster, runtimes)

        # 7. everything answers: finish the operation
        return await self._finish(cluster)

    async def _supervise(self, cluster: ClusterRecord, runtimes: list[BrokerRuntime]) -> str | None:
        """The process steps: AGAIN when one moved something, None when all is in order."""
        # 1. processes that are gone
        down = []
        for rt in runtimes:
            if rt.proc is not None and not rt.proc.alive():
                code = rt.proc.returncode
                log.warning(
                    "cluster %s: broker %d (pid %d) exited%s",
                    self.name,
                    rt.record.broker_id,
                    rt.proc.pid,
                    "" if code is None else f" with code {code}",
                )
                rt.proc.kill()  # reaps a child
                rt.proc = None
                rt.state = BrokerState.STOPPED
                self.store.update_broker(self.name, rt.record.broker_id, pid=0)
            if rt.proc is None:
                down.append(rt)
        if down:
            await self._start(cluster, down)
            return AGAIN

        # 2. processes that run but do not answer yet (just started, or adopted)
        starting = [rt for rt in runtimes if rt.state == BrokerState.STARTING]
        if starting:
            await self._await_ready(cluster, starting)
            return AGAIN

        # 3. rolling restart for a config change, one broker at a time; brokers that run
        # without the cluster's internal user (it just got its first secured mode) together
        outdated = [rt for rt in runtimes if rt.record.config_version < cluster.config_version]
        unsecured = [
            rt for rt in outdated if rt.record.config_version < cluster.inter_broker_version
        ]
        if len(unsecured) > 1:
            await self._restart_together(cluster, unsecured)
            return AGAIN
        if outdated:
            await self._roll(cluster, outdated[0], len(runtimes) - len(outdated) + 1, len(runtimes))
            return AGAIN

        # 4. health of running brokers
        await self._health(runtimes)
        if any(rt.state != BrokerState.RUNNING for rt in runtimes):
            return AGAIN
        return None

    async def _finish(self, cluster: ClusterRecord) -> str:
        """Every broker answers: the operation is done (a reboot once the ISR is full again);
        private endpoints every broker now runs with (or without) are ACTIVE (or gone)."""
        endpoints.settle(self.store, self.name)
        if cluster.state == ClusterState.FAILED and cluster.state_message == self._failure:
            return IDLE  # a failed scale-in stays visible until the next operation
        if cluster.operation == OperationType.REBOOT_BROKER:
            if not await self._reboot_settled(cluster):
                return IDLE
            cluster = self.store.get_cluster(self.name) or cluster
        if cluster.state != ClusterState.ACTIVE or cluster.operation:
            self.set_state(cluster, ClusterState.ACTIVE, "", operation="")
        return IDLE


class ClusterManager:
    """Owns the reconcilers; the servicers' handle on the backend."""

    def __init__(
        self,
        store_: Store,
        settings: Settings,
        home: Path,
        object_store: ObjectStoreManager | None = None,
    ) -> None:
        self.store = store_
        self.settings = settings
        self.home = home
        self.object_store = object_store
        """The remote tier's object store (None: clusters get no bucket)."""
        self.reconcilers: dict[str, ClusterReconciler] = {}
        self.orphans: dict[str, list[int]] = {}
        """Broker processes found at start-up, by data directory, not yet adopted."""
        self.halted = False
        """Shutting down: no reconciler runs or starts, so no process starts."""
        self.final_meter: Callable[[ClusterRecord], Awaitable[None]] | None = None
        """Meters a deleted cluster up to its end before its brokers stop (``metering.py``)."""

    @property
    def clusters_dir(self) -> Path:
        return self.home / "clusters"

    def cluster_dir(self, cluster: ClusterRecord) -> Path:
        return self.clusters_dir / f"{cluster.name}-{cluster.cluster_id[:8]}"

    def cluster_log_dir(self, cluster: ClusterRecord) -> Path:
        return self.home / "logs" / "clusters" / f"{cluster.name}-{cluster.cluster_id[:8]}"

    async def start(self) -> None:
        """Re-adopt or restart the brokers of every recorded cluster."""
        self.clusters_dir.mkdir(parents=True, exist_ok=True)
        self.orphans = scan_brokers(self.clusters_dir)
        known = {b.data_dir for b in self.store.all_brokers()}
        for data_dir in [d for d in self.orphans if d not in known]:
            for pid in self.orphans.pop(data_dir):
                log.warning("stopping broker pid %d of no recorded cluster (%s)", pid, data_dir)
                BrokerProcess(pid, data_dir).kill()
        for cluster in self.store.list_clusters():
            self.notify(cluster.name)

    def notify(self, name: str, *, interrupt: bool = False) -> None:
        if self.halted:
            return  # shutting down: the cluster is reconciled on the next start
        reconciler = self.reconcilers.get(name)
        if reconciler is None:
            reconciler = self.reconcilers[name] = ClusterReconciler(self, name)
            reconciler.start()
        elif interrupt:
            reconciler.interrupt()
        reconciler.wake()

    def forget(self, reconciler: ReconcilerBase) -> None:
        if self.reconcilers.get(reconciler.name) is reconciler:
            del self.reconcilers[reconciler.name]

    def reserved_ports(self) -> set[int]:
        """Ports that are not for brokers (the embedded S3 server's)."""
        return set() if self.object_store is None else self.object_store.reserved_ports()

    def runtime(self, cluster: str, broker_id: int) -> BrokerRuntime | None:
        reconciler = self.reconcilers.get(cluster)
        return None if reconciler is None else reconciler.runtimes.get(broker_id)

    def running_brokers(self) -> int:
        return sum(
            1
            for r in self.reconcilers.values()
            for rt in r.runtimes.values()
            if rt.proc is not None and rt.proc.alive()
        )

    def broker_processes(self) -> list[tuple[str, int | None, int]]:
        """(cluster, broker id, pid) of every broker process this control plane runs, and
        (``""``, None, pid) of those found at start-up that no cluster adopted yet."""
        found: list[tuple[str, int | None, int]] = [
            (r.name, broker_id, rt.proc.pid)
            for r in self.reconcilers.values()
            for broker_id, rt in sorted(r.runtimes.items())
            if rt.proc is not None
        ]
        found += [("", None, pid) for pids in self.orphans.values() for pid in pids]
        return found

    def halt(self) -> None:
        """Start nothing from now on: cancel every reconciler's loop (a running step stops at
        its next await, before it could start another process) and halt the embedded S3
        server's supervisor. ``shutdown`` and ``ObjectStoreManager.stop`` follow."""
        self.halted = True
        if self.object_store is not None:
            self.object_store.halt()
        for reconciler in self.reconcilers.values():
            if reconciler.task is not None:
                reconciler.task.cancel()

    async def shutdown(self) -> None:
        """Stop every reconciler, then every broker (``cloudctl down``)."""
        self.halt()
        reconcilers = list(self.reconcilers.values())
        for reconciler in reconcilers:
            if reconciler.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await reconciler.task
        timeout = self.settings.broker_stop_timeout_ms / 1000
        orphans = [BrokerProcess(pid, d) for d, pids in self.orphans.items() for pid in pids]
        self.orphans.clear()  # found at start-up, not adopted yet: stopped as well
        await asyncio.gather(
            *(r.stop_all() for r in reconcilers), *(p.stop(timeout) for p in orphans)
        )
        for reconciler in reconcilers:
            reconciler.cancel_background()
        for reconciler in reconcilers:
            for broker_id in reconciler.runtimes:
                with contextlib.suppress(Exception):
                    self.store.update_broker(reconciler.name, broker_id, pid=0)
        self.reconcilers.clear()
