"""Deletion, one job of a cluster's reconciler: stop every broker (showing each stop in the
state message), remove the data and log directories, delete the bucket, forget the cluster
(its DELETE operation completes with it). Its billing ends as the brokers start to stop: the
end is recorded (``usage_history``) and the usage up to it metered first (``metering.py``)."""

from __future__ import annotations

import asyncio
import shutil

from controlplane import usage_history
from controlplane.buckets import Buckets
from controlplane.process import BrokerProcess
from controlplane.reconcile_base import log
from controlplane.states import BrokerState, ClusterState
from controlplane.store import ClusterRecord
from controlplane.supervision import Supervision


class Deletion(Supervision, Buckets):
    async def delete(self, cluster: ClusterRecord) -> None:
        records = self.store.brokers(self.name)
        self._sync_runtimes(records)
        usage_history.end_cluster(self.store.db, self.name)
        if self.manager.final_meter is not None:
            await self.manager.final_meter(cluster)
        cluster = await self._stop_each(cluster)
        for record in records:
            # a broker started by a step that was interrupted, not yet recorded
            for pid in self.manager.orphans.pop(record.data_dir, []):
                BrokerProcess(pid, record.data_dir).kill()
        cluster_dir = self.manager.cluster_dir(cluster)
        log_dir = self.manager.cluster_log_dir(cluster)
        cluster = self.set_state(
            cluster, ClusterState.DELETING, f"removing data ({cluster_dir}) and logs ({log_dir})"
        )
        await asyncio.to_thread(shutil.rmtree, cluster_dir, True)
        await asyncio.to_thread(shutil.rmtree, log_dir, True)
        await self._delete_bucket(self.store.get_cluster(self.name) or cluster)
        self.store.delete_cluster(self.name)
        log.info("cluster %s: deleted", self.name)

    async def _stop_each(self, cluster: ClusterRecord) -> ClusterRecord:
        """Stop every broker at once (each SIGTERM: a controlled shutdown; SIGKILL after
        ``broker.stop.timeout.ms``), saying in the state message which have stopped."""
        timeout = self.settings.broker_stop_timeout_ms / 1000
        running = {
            asyncio.ensure_future(rt.proc.stop(timeout)): rt
            for rt in self.runtimes.values()
            if rt.proc is not None
        }
        for rt in running.values():
            rt.state = BrokerState.STOPPING
        total = len(running)
        cluster = self.set_state(
            cluster,
            ClusterState.DELETING,
            f"stopping {total} broker(s) (controlled shutdown, at most {timeout:.0f}s each)"
            if total
            else "no broker runs",
        )
        stopped: list[int] = []
        pending = set(running)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                rt = running[task]
                rt.proc = None
                rt.state = BrokerState.STOPPED
                stopped.append(rt.record.broker_id)
            left = sorted(running[t].record.broker_id for t in pending)
            message = f"stopping brokers: {len(stopped)} of {total} stopped"
            message += f" (broker(s) {', '.join(map(str, left))} still stopping)" if left else ""
            cluster = self.set_state(cluster, ClusterState.DELETING, message)
        for rt in self.runtimes.values():
            rt.proc = None
            rt.state = BrokerState.STOPPED
        return cluster
