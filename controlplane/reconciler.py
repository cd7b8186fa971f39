"""Backend: one reconciler per cluster converges broker processes to the desired state.

The servicers only write desired state (store.py) and call :meth:`ClusterManager.notify`. Each
cluster's reconciler then runs *steps*; a step reads the cluster and its brokers from the store,
looks at the processes, and moves one stage forward, driving the state machine:

    CREATING ──all brokers answer ApiVersions──▶ ACTIVE ◀──▶ UPDATING (scale out or in, rolling
                                                                     restart)
                                                  │  ▲
                       a broker exits or hangs ──▼  │ restarted, answers again
                                                 HEALING
    any state ──DeleteCluster──▶ DELETING ──brokers stopped, data removed──▶ (row deleted)
    CREATING/UPDATING ──a broker fails to start broker.start.attempts times──▶ FAILED (retried
    with backoff; ACTIVE again once every broker answers)
    UPDATING (scale-in) ──reassignment refused or not done in reassignment.timeout.ms──▶ FAILED
    (the cluster keeps its brokers; stays FAILED until the next operation)

Steps run one at a time per cluster, after a wake-up (a request, a process exit seen through
its pidfd) or every ``supervisor.interval.ms``. DeleteCluster interrupts a running step.

The brokers of a cluster form one Kafka cluster: a Raft metadata quorum of fixed voters (the
cluster's ``voters``, the 3 lowest ids or broker 0 alone, see ``store.choose_voters``) and
replicated partitions. Each broker gets its id, the cluster id, the voters' Raft and Kafka
addresses, its own Raft listener and advertises its own Kafka address (``_settings_for``). A
scale-out starts new brokers with the same settings; a scale-in moves partitions off the
brokers that go before it stops them (``_scale_in``). See controlplane/README.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from controlplane import kafka, store
from controlplane.config import Settings
from controlplane.kafka import KafkaResponseError, on_any
from controlplane.objectstore import ObjectStoreManager, bucket_name
from controlplane.process import (
    BrokerProcess,
    broker_command,
    free_port,
    log_tail,
    port_free,
    runs_broker,
    scan_brokers,
)
from controlplane.states import BrokerState, ClusterState
from controlplane.store import BrokerRecord, ClusterRecord, Store, choose_voters
from controlplane.topics import plan_reassignment
from tiered.errors import ObjectStoreError

log = logging.getLogger("sluice.controlplane.reconciler")

# What a step tells the loop: the cluster is gone; step again at once (it moved something);
# wait for a wake-up or the supervisor interval.
GONE = "gone"
AGAIN = "again"
IDLE = "idle"


@dataclass
class BrokerRuntime:
    """What the reconciler knows about one broker beyond its record."""

    record: BrokerRecord
    proc: BrokerProcess | None = None
    state: BrokerState = BrokerState.PENDING
    failures: int = 0
    """Consecutive failed starts."""
    next_attempt: float = 0.0
    """Monotonic time before which no new start is tried (crash-loop backoff)."""
    health_failures: int = 0
    last_probe: float = field(default_factory=time.monotonic)
    ever_ran: bool = False


class ClusterReconciler:
    def __init__(self, manager: ClusterManager, name: str) -> None:
        self.manager = manager
        self.name = name
        self.runtimes: dict[int, BrokerRuntime] = {}
        self._wake = asyncio.Event()
        self._step_task: asyncio.Task[str] | None = None
        self._interrupted = False
        self.task: asyncio.Task[None] | None = None
        self.bucket_ready = False
        """The cluster's bucket exists (created or checked since this control plane started)."""
        self._bucket_task: asyncio.Task[None] | None = None
        self._bucket_failures = 0
        self._bucket_next = 0.0
        self._scale_in_deadline: float | None = None
        """Monotonic time by which the running scale-in's reassignments must be done."""
        self._failure: str = ""
        """State message of a failed scale-in: FAILED stays until the next operation."""

    @property
    def store(self) -> Store:
        return self.manager.store

    @property
    def settings(self) -> Settings:
        return self.manager.settings

    # ------------------------------------------------------------------ loop

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"reconcile-{self.name}")

    def wake(self) -> None:
        self._wake.set()

    def interrupt(self) -> None:
        """Cancel the running step (DeleteCluster); the loop goes on with a fresh step."""
        if self._step_task is not None and not self._step_task.done():
            self._interrupted = True
            self._step_task.cancel()
        self.wake()

    async def run(self) -> None:
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

    def set_state(
        self, cluster: ClusterRecord, state: ClusterState, message: str, **changes: object
    ) -> ClusterRecord:
        if cluster.state != state or cluster.state_message != message or changes:
            if cluster.state != state:
                log.info("cluster %s: %s -> %s %s", self.name, cluster.state, state, message)
            cluster = self.store.update_cluster(
                self.name, state=state, state_message=message, **changes
            )
        return cluster

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
        records = self.store.brokers(self.name)
        self._sync_runtimes(records)
        runtimes = [self.runtimes[r.broker_id] for r in records]

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

        # 3. rolling restart for a config change, one broker at a time
        outdated = [rt for rt in runtimes if rt.record.config_version < cluster.config_version]
        if outdated:
            await self._roll(cluster, outdated[0], len(runtimes) - len(outdated) + 1, len(runtimes))
            return AGAIN

        # 4. health of running brokers
        await self._health(runtimes)
        if any(rt.state != BrokerState.RUNNING for rt in runtimes):
            return AGAIN

        # 5. scale-in: move partitions off the brokers that go, then stop and forget them
        if len(runtimes) > cluster.broker_count:
            return await self._scale_in(cluster, runtimes)

        # 6. everything answers: finish the operation
        if cluster.state == ClusterState.FAILED and cluster.state_message == self._failure:
            return IDLE  # a failed scale-in stays visible until the next operation
        if cluster.state != ClusterState.ACTIVE or cluster.operation:
            self.set_state(cluster, ClusterState.ACTIVE, "", operation="")
        return IDLE

    def _sync_runtimes(self, records: list[BrokerRecord]) -> None:
        for record in records:
            rt = self.runtimes.get(record.broker_id)
            if rt is None:
                rt = self.runtimes[record.broker_id] = BrokerRuntime(record)
                self._adopt(rt)
            rt.record = record

    def _adopt(self, rt: BrokerRuntime) -> None:
        """Find a process already running for this broker (after a control-plane restart)."""
        record = rt.record
        pids = self.manager.orphans.pop(record.data_dir, [])
        if record.pid and runs_broker(record.pid, record.data_dir) and record.pid not in pids:
            pids.insert(0, record.pid)
        if not pids:
            # stopped while the control plane was away: a restart, unless `down` stopped it
            rt.ever_ran = record.pid != 0
            return
        keep, *extra = pids
        for pid in extra:  # never two processes on one data directory
            log.warning("cluster %s: stopping duplicate broker pid %d", self.name, pid)
            BrokerProcess(pid, record.data_dir).kill()
        rt.proc = BrokerProcess(keep, record.data_dir)
        rt.proc.watch(self.wake)
        rt.state = BrokerState.STARTING
        rt.ever_ran = True
        if keep != record.pid:
            self.store.update_broker(self.name, record.broker_id, pid=keep)
        log.info("cluster %s: adopted broker %d (pid %d)", self.name, record.broker_id, keep)

    # ------------------------------------------------------------------ object store

    def _ensure_bucket(self, cluster: ClusterRecord) -> ClusterRecord:
        """Create the cluster's bucket in the background, retried with backoff until it is.

        Brokers do not wait for it: the remote tier copes with a store that is down (uploads
        retry, local data is kept). Clusters recorded before buckets existed get one here.
        """
        objects = self.manager.object_store
        if objects is None or self.bucket_ready:
            return cluster
        if not cluster.s3_bucket:
            cluster = self.store.update_cluster(
                self.name,
                s3_endpoint=objects.endpoint,
                s3_bucket=bucket_name(cluster.name, cluster.cluster_id),
            )
        busy = self._bucket_task is not None and not self._bucket_task.done()
        if not busy and time.monotonic() >= self._bucket_next:
            self._bucket_task = asyncio.create_task(
                self._create_bucket(objects, cluster.s3_endpoint, cluster.s3_bucket),
                name=f"bucket-{self.name}",
            )
        return cluster

    async def _create_bucket(self, objects: ObjectStoreManager, endpoint: str, bucket: str) -> None:
        try:
            await objects.ensure_bucket(endpoint, bucket)
        except ObjectStoreError as exc:
            self._bucket_failures += 1
            backoff = min(0.2 * 2 ** (self._bucket_failures - 1), 10.0)
            self._bucket_next = time.monotonic() + backoff
            log.log(
                logging.WARNING if self._bucket_failures > 3 else logging.INFO,
                "cluster %s: bucket %s at %s not created yet (%s); retrying in %.1fs",
                self.name,
                bucket,
                endpoint,
                exc,
                backoff,
            )
            return
        self.bucket_ready = True
        log.info("cluster %s: bucket %s ready at %s", self.name, bucket, endpoint)

    def cancel_background(self) -> None:
        """Stop waiting for a bucket being created (shutdown; the request ends on its own)."""
        if self._bucket_task is not None:
            self._bucket_task.cancel()

    async def _delete_bucket(self, cluster: ClusterRecord) -> None:
        """Best effort: the cluster goes away even when its object store does not answer."""
        objects = self.manager.object_store
        if objects is None or not cluster.s3_bucket:
            return
        if self._bucket_task is not None:  # a create in flight must not outlive the delete
            await asyncio.wait([self._bucket_task])
        self.set_state(cluster, ClusterState.DELETING, f"deleting bucket {cluster.s3_bucket}")
        try:
            deleted = await objects.delete_bucket(cluster.s3_endpoint, cluster.s3_bucket)
        except ObjectStoreError as exc:
            log.warning(
                "cluster %s: bucket %s at %s not deleted (%s); delete it by hand",
                self.name,
                cluster.s3_bucket,
                cluster.s3_endpoint,
                exc,
            )
            return
        log.info(
            "cluster %s: deleted bucket %s at %s (%d objects)",
            self.name,
            cluster.s3_bucket,
            cluster.s3_endpoint,
            deleted,
        )

    # ------------------------------------------------------------------ starting

    def _ensure_quorum(self, cluster: ClusterRecord) -> ClusterRecord:
        """Record the voters and every broker's Raft port (clusters recorded before Raft).

        Brokers that ran without them are restarted (a config-version bump: a rolling restart)
        so that they join the quorum.
        """
        records = self.store.brokers(self.name)
        if not cluster.voters and records:
            cluster = self.store.update_cluster(
                self.name, voters=choose_voters([r.broker_id for r in records])
            )
        missing = [r for r in records if not r.raft_port]
        if missing:
            used = self.store.used_ports() | self.manager.reserved_ports()
            for record in missing:
                port = free_port(record.host, used)
                used.add(port)
                self.store.update_broker(self.name, record.broker_id, raft_port=port)
                log.info(
                    "cluster %s: broker %d gets Raft port %d", self.name, record.broker_id, port
                )
            if any(r.config_version for r in missing):
                cluster = self.store.update_cluster(
                    self.name, config_version=cluster.config_version + 1
                )
        return cluster

    def _settings_for(self, cluster: ClusterRecord, record: BrokerRecord) -> dict[str, str]:
        by_id = {b.broker_id: b for b in self.store.brokers(self.name)}
        voters = [by_id[v] for v in cluster.voters if v in by_id]
        return {
            **cluster.config,
            "node.id": str(record.broker_id),
            "cluster.id": cluster.cluster_id,
            "controller.quorum.voters": ",".join(f"{v.broker_id}@{v.raft_address}" for v in voters),
            "controller.quorum.voter.listeners": ",".join(
                f"{v.broker_id}@{v.address}" for v in voters
            ),
            "controller.listener": record.raft_address,
            "advertised.listeners": record.address,
            **self._tiered_settings(cluster),
        }

    def _tiered_settings(self, cluster: ClusterRecord) -> dict[str, str]:
        """The broker settings of the cluster's remote tier: its bucket at the control
        plane's object store (static credentials for the embedded server; for an external
        store the brokers use boto3's default chain from the environment they inherit)."""
        objects = self.manager.object_store
        if objects is None or not cluster.s3_bucket:
            return {}
        store = objects.settings_for(cluster.s3_endpoint, cluster.s3_bucket)
        out = {
            "remote.log.storage.system.enable": "true",
            "tiered.s3.bucket": store.bucket,
            "tiered.s3.region": store.region,
        }
        if store.endpoint:
            out["tiered.s3.endpoint"] = store.endpoint
        if store.access_key_id and store.secret_access_key:
            out["tiered.s3.access.key.id"] = store.access_key_id
            out["tiered.s3.secret.access.key"] = store.secret_access_key
        return out

    def _spawn(self, cluster: ClusterRecord, rt: BrokerRuntime) -> None:
        record = rt.record
        if rt.failures and not port_free(record.host, record.port):
            # the port was taken while the broker was down: move the broker
            port = free_port(record.host, self.store.used_ports())
            log.warning(
                "cluster %s: port %d of broker %d is taken; moving it to %d",
                self.name,
                record.port,
                record.broker_id,
                port,
            )
            self.store.update_broker(self.name, record.broker_id, port=port)
            record = rt.record = self.store.broker(self.name, record.broker_id)
            if record.broker_id in cluster.voters and len(self.runtimes) > 1:
                # a voter's Kafka address is in every broker's settings: they restart to learn it
                log.warning(
                    "cluster %s: voter %d moved; rolling restart of the others",
                    self.name,
                    record.broker_id,
                )
                cluster = self.store.update_cluster(
                    self.name, config_version=cluster.config_version + 1
                )
        command = broker_command(
            record.data_dir, record.address, self._settings_for(cluster, record)
        )
        rt.proc = BrokerProcess.spawn(command, record.data_dir, record.log_path)
        rt.proc.watch(self.wake)
        rt.state = BrokerState.STARTING
        self.store.update_broker(
            self.name, record.broker_id, pid=rt.proc.pid, config_version=cluster.config_version
        )
        rt.record = self.store.broker(self.name, record.broker_id)
        log.info(
            "cluster %s: started broker %d (pid %d) on %s",
            self.name,
            record.broker_id,
            rt.proc.pid,
            record.address,
        )

    async def _start(self, cluster: ClusterRecord, down: list[BrokerRuntime]) -> None:
        """Start the brokers that are down and due (the others wait for their backoff)."""
        now = time.monotonic()
        due = [rt for rt in down if rt.next_attempt <= now]
        crashed = [rt for rt in down if rt.ever_ran]
        if cluster.state in (ClusterState.ACTIVE, ClusterState.HEALING):
            ids = ", ".join(str(rt.record.broker_id) for rt in down)
            why = "after an unexpected exit" if crashed else "after a control-plane start"
            cluster = self.set_state(
                cluster, ClusterState.HEALING, f"restarting broker(s) {ids} {why}"
            )
        elif cluster.state == ClusterState.CREATING:
            cluster = self.set_state(
                cluster, cluster.state, f"starting {len(down)} of {len(self.runtimes)} broker(s)"
            )
        elif cluster.operation == store.OP_UPDATE_BROKER_COUNT:
            ids = ", ".join(str(rt.record.broker_id) for rt in down)
            new = "new " if len(self.runtimes) <= cluster.broker_count else ""
            cluster = self.set_state(cluster, cluster.state, f"starting {new}broker(s) {ids}")
        if not due:
            wait = min(rt.next_attempt for rt in down) - now
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, min(wait, 1.0)))
            return
        for rt in due:
            if rt.ever_ran:
                self.store.update_broker(
                    self.name, rt.record.broker_id, restarts=rt.record.restarts + 1
                )
                rt.record = self.store.broker(self.name, rt.record.broker_id)
            try:
                self._spawn(cluster, rt)
            except OSError as exc:
                self._failed_start(cluster, rt, f"cannot start: {exc}")
        await self._await_ready(cluster, [rt for rt in due if rt.state == BrokerState.STARTING])

    async def _await_ready(self, cluster: ClusterRecord, runtimes: list[BrokerRuntime]) -> None:
        results = await asyncio.gather(*(self._wait_ready(rt) for rt in runtimes))
        for rt, error in zip(runtimes, results, strict=True):
            if error is None:
                rt.state = BrokerState.RUNNING
                rt.failures = 0
                rt.health_failures = 0
                rt.ever_ran = True
                rt.last_probe = time.monotonic()
                continue
            cluster = self.store.get_cluster(self.name) or cluster
            self._failed_start(cluster, rt, error)
        ready = sum(1 for rt in self.runtimes.values() if rt.state == BrokerState.RUNNING)
        cluster = self.store.get_cluster(self.name) or cluster
        if cluster.state in (ClusterState.CREATING, ClusterState.HEALING) and ready < len(
            self.runtimes
        ):
            self.set_state(cluster, cluster.state, f"{ready} of {len(self.runtimes)} brokers ready")

    async def _wait_ready(self, rt: BrokerRuntime) -> str | None:
        """None once the broker answers ApiVersions, else why it did not."""
        proc = rt.proc
        assert proc is not None
        record = rt.record
        deadline = time.monotonic() + self.settings.broker_ready_timeout_ms / 1000
        delay = 0.02
        while time.monotonic() < deadline:
            if not proc.alive():
                tail = log_tail(record.log_path)
                return f"exited during start-up{f': {tail}' if tail else ''}"
            if await kafka.probe(record.host, record.port, timeout=1.0):
                return None
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.2)
        return (
            f"did not answer on {record.address} within {self.settings.broker_ready_timeout_ms} ms"
        )

    def _failed_start(self, cluster: ClusterRecord, rt: BrokerRuntime, error: str) -> None:
        record = rt.record
        if rt.proc is not None:
            rt.proc.kill()
            rt.proc = None
        self.store.update_broker(self.name, record.broker_id, pid=0)
        rt.state = BrokerState.STOPPED
        rt.failures += 1
        backoff = min(
            0.1 * 2 ** (rt.failures - 1), self.settings.broker_restart_backoff_max_ms / 1000
        )
        rt.next_attempt = time.monotonic() + backoff
        message = f"broker {record.broker_id} {error} (log: {record.log_path})"
        log.warning("cluster %s: %s; retrying in %.1fs", self.name, message, backoff)
        if cluster.state in (ClusterState.CREATING, ClusterState.UPDATING) and (
            rt.failures >= self.settings.broker_start_attempts
        ):
            self.set_state(cluster, ClusterState.FAILED, message)
        elif cluster.state in (
            ClusterState.HEALING,
            ClusterState.FAILED,
            ClusterState.CREATING,
            ClusterState.UPDATING,
        ):
            self.set_state(cluster, cluster.state, message)

    # ------------------------------------------------------------------ updating

    async def _roll(
        self, cluster: ClusterRecord, rt: BrokerRuntime, index: int, total: int
    ) -> None:
        record = rt.record
        cluster = self.set_state(
            cluster,
            ClusterState.UPDATING,
            f"rolling restart: broker {record.broker_id} ({index} of {total})",
        )
        if rt.proc is not None:
            rt.state = BrokerState.STOPPING
            await rt.proc.stop(self.settings.broker_stop_timeout_ms / 1000)
            rt.proc = None
        rt.state = BrokerState.STOPPED
        self.store.update_broker(self.name, record.broker_id, pid=0)
        self._spawn(cluster, rt)
        await self._await_ready(cluster, [rt])

    async def _health(self, runtimes: list[BrokerRuntime]) -> None:
        interval = self.settings.broker_health_interval_ms / 1000
        now = time.monotonic()
        due = [
            rt
            for rt in runtimes
            if rt.state == BrokerState.RUNNING and now - rt.last_probe >= interval
        ]
        if not due:
            return
        results = await asyncio.gather(
            *(kafka.probe(rt.record.host, rt.record.port, timeout=2.0) for rt in due)
        )
        for rt, ok in zip(due, results, strict=True):
            rt.last_probe = time.monotonic()
            if ok:
                rt.health_failures = 0
                continue
            rt.health_failures += 1
            if rt.health_failures >= self.settings.broker_health_failures and rt.proc:
                log.warning(
                    "cluster %s: broker %d does not answer; restarting it",
                    self.name,
                    rt.record.broker_id,
                )
                rt.proc.kill()  # the next step sees it gone and restarts it (HEALING)

    # ------------------------------------------------------------------ scale-in

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
        keep = [rt.record for rt in runtimes if rt.record.broker_id < count]
        going = [rt for rt in runtimes if rt.record.broker_id >= count]
        removed = {rt.record.broker_id for rt in going}
        ids = ", ".join(str(i) for i in sorted(removed))
        what = f"scale-in to {count} broker(s)"
        timeout = self.settings.kafka_request_timeout_ms / 1000
        poll = self.settings.reassignment_poll_ms / 1000
        order = keep + [rt.record for rt in going]  # any broker answers; prefer those that stay
        if self._scale_in_deadline is None:
            self._scale_in_deadline = (
                time.monotonic() + self.settings.reassignment_timeout_ms / 1000
            )
        started: set[tuple[str, int]] = set()
        ongoing: dict[tuple[str, int], kafka.Reassignment] = {}

        async def look(
            admin: kafka.Admin,
        ) -> tuple[dict[tuple[str, int], kafka.Reassignment], list[kafka.TopicMetadata]]:
            # both from one broker: one metadata image
            return await admin.list_partition_reassignments(), await admin.metadata()

        while True:
            if any(rt.proc is None or not rt.proc.alive() for rt in runtimes):
                return AGAIN  # the next step restarts it; this scale-in resumes after
            try:
                ongoing, topics = await on_any(order, look, timeout, read_only=True)
                if ongoing:
                    moving = ", ".join(f"{t}-{p}" for t, p in sorted(ongoing)[:3])
                    more = f" and {len(ongoing) - 3} more" if len(ongoing) > 3 else ""
                    cluster = self.set_state(
                        cluster,
                        ClusterState.UPDATING,
                        f"{what}: moving partitions off broker(s) {ids}: "
                        f"{len(ongoing)} in progress ({moving}{more})",
                    )
                else:
                    moves, problem = plan_reassignment(topics, removed, [r.broker_id for r in keep])
                    if problem is not None:
                        return await self._scale_in_failed(
                            cluster, f"{what} failed: {problem}", set(), order
                        )
                    if not moves:
                        break
                    cluster = self.set_state(
                        cluster,
                        ClusterState.UPDATING,
                        f"{what}: moving {len(moves)} partition(s) off broker(s) {ids}",
                    )
                    log.info("cluster %s: %s: reassigning %s", self.name, what, moves)
                    targets: dict[tuple[str, int], Sequence[int] | None] = dict(moves)
                    refused = await on_any(
                        order,
                        functools.partial(_reassign, moves=targets),
                        timeout,
                        read_only=True,  # the same targets again are harmless
                    )
                    started |= set(moves) - set(refused)
                    if refused:
                        (key, error), *_ = sorted(refused.items())
                        return await self._scale_in_failed(
                            cluster,
                            f"{what} failed: {len(refused)} partition(s) refused, e.g. "
                            f"{key[0]}-{key[1]}: {error.detail}",
                            started,
                            order,
                        )
            except (KafkaResponseError, OSError, asyncio.IncompleteReadError) as exc:
                log.warning("cluster %s: %s: %s", self.name, what, exc or type(exc).__name__)
                cluster = self.set_state(
                    cluster, ClusterState.UPDATING, f"{what}: waiting for the brokers ({exc})"
                )
            if time.monotonic() > self._scale_in_deadline:
                pending = ", ".join(f"{t}-{p}" for t, p in sorted(ongoing)[:3]) if ongoing else ""
                return await self._scale_in_failed(
                    cluster,
                    f"{what} failed: partitions not moved off broker(s) {ids} within "
                    f"{self.settings.reassignment_timeout_ms} ms (reassignment.timeout.ms)"
                    + (f"; still moving: {pending}" if pending else ""),
                    started | set(ongoing),
                    order,
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), poll)
            self._wake.clear()

        # nothing left on the brokers that go: stop them, then make the cluster forget them
        cluster = self.set_state(
            cluster, ClusterState.UPDATING, f"{what}: stopping broker(s) {ids}"
        )
        stop_timeout = self.settings.broker_stop_timeout_ms / 1000
        for rt in going:
            rt.state = BrokerState.STOPPING
        await asyncio.gather(*(rt.proc.stop(stop_timeout) for rt in going if rt.proc is not None))
        for rt in going:
            rt.proc = None
            rt.state = BrokerState.STOPPED
        cluster = self.set_state(
            cluster, ClusterState.UPDATING, f"{what}: unregistering broker(s) {ids}"
        )
        for broker_id in sorted(removed):
            try:
                await on_any(
                    keep,
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
            self.name, sorted(removed), state_message=f"{what}: deleting data of broker(s) {ids}"
        )
        for rt in going:
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

    # ------------------------------------------------------------------ stopping

    async def stop_all(self) -> None:
        timeout = self.settings.broker_stop_timeout_ms / 1000
        procs = [rt.proc for rt in self.runtimes.values() if rt.proc is not None]
        for rt in self.runtimes.values():
            rt.state = BrokerState.STOPPING if rt.proc is not None else rt.state
        await asyncio.gather(*(proc.stop(timeout) for proc in procs))
        for rt in self.runtimes.values():
            rt.proc = None
            rt.state = BrokerState.STOPPED

    async def delete(self, cluster: ClusterRecord) -> None:
        records = self.store.brokers(self.name)
        self._sync_runtimes(records)
        self.set_state(cluster, ClusterState.DELETING, "stopping brokers")
        await self.stop_all()
        for record in records:
            # a broker started by a step that was interrupted, not yet recorded
            for pid in self.manager.orphans.pop(record.data_dir, []):
                BrokerProcess(pid, record.data_dir).kill()
        cluster_dir = self.manager.cluster_dir(cluster)
        log_dir = self.manager.cluster_log_dir(cluster)
        await asyncio.to_thread(shutil.rmtree, cluster_dir, True)
        await asyncio.to_thread(shutil.rmtree, log_dir, True)
        await self._delete_bucket(self.store.get_cluster(self.name) or cluster)
        self.store.delete_cluster(self.name)
        log.info("cluster %s: deleted", self.name)


async def _reassign(
    admin: kafka.Admin, moves: dict[tuple[str, int], Sequence[int] | None]
) -> dict[tuple[str, int], KafkaResponseError]:
    return await admin.alter_partition_reassignments(moves)


async def _unregister(admin: kafka.Admin, broker_id: int) -> None:
    await admin.unregister_broker(broker_id)


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

    def forget(self, reconciler: ClusterReconciler) -> None:
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
