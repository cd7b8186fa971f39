"""Process supervision, one job of a cluster's reconciler: start the brokers that are down,
re-adopt the ones a previous control plane left running, wait until they answer, probe them,
restart those that exit or hang (HEALING: an operation of type HEAL), and roll them one at a
time for a config change (all together, once, when the cluster gets its internal listener:
``_restart_together``).

Each broker gets its id, the cluster id, the voters' Raft and Kafka addresses, its own Raft
listener and advertises its own Kafka address (``_settings_for``); the cluster's remote tier
comes as the ``tiered.s3.*`` settings, its static credentials (the embedded S3 server's)
through the environment, never on the command line (``_tiered_settings``). A secured
cluster's listeners, certificates and internal user come from ``cluster_security``: file
names on the command line, never a password. Its private endpoints' listeners too
(``endpoints.listeners_for``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from controlplane import cluster_security, endpoints, kafka, store
from controlplane.process import (
    BrokerProcess,
    broker_command,
    cmdline_setting,
    exec_prefix,
    free_port,
    log_tail,
    port_free,
    process_state,
    runs_broker,
)
from controlplane.reconcile_base import BrokerRuntime, ReconcilerBase, log
from controlplane.states import BrokerState, ClusterState, OperationType
from controlplane.store import BrokerRecord, ClusterRecord, choose_voters
from dataplane.config import WATCHDOG_FILE

RETENTION_CHECK = "log.retention.check.interval.ms"
INCARNATION = "broker.incarnation.id"
FENCE_TIMEOUT_S = 2.0
"""Longest wait for a FenceBroker's answer (the session timeout is the bound anyway)."""


@dataclass
class _Watch:
    """A running broker's watchdog file as last seen (``Supervision.watchdog``)."""

    mtime: int
    since: float
    """When the file was seen to change (monotonic)."""
    cpu: int | None
    """The CPU time of all its threads when last seen (clock ticks); None: not looked at
    since the file changed."""
    quiet: float
    """Since when no thread used CPU or was seen running, runnable or waiting on the
    disk (monotonic)."""
    armed: bool
    """The process has changed its file at least once."""


class Supervision(ReconcilerBase):
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
        rt.incarnation = cmdline_setting(keep, INCARNATION)
        self._watch(rt)
        rt.state = BrokerState.STARTING
        rt.ever_ran = True
        if keep != record.pid:
            self.store.update_broker(self.name, record.broker_id, pid=keep)
        log.info("cluster %s: adopted broker %d (pid %d)", self.name, record.broker_id, keep)
        cluster = self.store.get_cluster(self.name)
        if cluster is not None and not self._has_current_key(cluster, keep):
            log.warning(
                "cluster %s: broker %d (pid %d) runs without its current object-store key "
                "(started before credentials were enforced); it gets a rolling restart",
                self.name,
                record.broker_id,
                keep,
            )
            self.store.update_broker(self.name, record.broker_id, config_version=-1)

    def _has_current_key(self, cluster: ClusterRecord, pid: int) -> bool:
        """Whether a running broker's environment holds the key it would be started with
        (True when it needs none, or its environment cannot be read)."""
        wanted = self._broker_environment(cluster)
        if not wanted:
            return True
        try:
            raw = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return True
        found = dict(
            entry.decode(errors="replace").partition("=")[::2] for entry in raw.split(b"\0")
        )
        return all(found.get(name) == value for name, value in wanted.items())

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
            # the cluster's config may set it; the control plane's default is lower than the
            # broker's own (5 min), so that local retention acts within seconds
            RETENTION_CHECK: str(self.settings.broker_retention_check_interval_ms),
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
            **cluster_security.broker_settings(
                self.manager.home,
                cluster,
                record,
                endpoints.listeners_for(self.store, self.name, record.broker_id),
            ),
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
        return out

    def _broker_environment(self, cluster: ClusterRecord) -> dict[str, str]:
        """The cluster's own read-write key of the embedded object store (scoped to its
        bucket) for the broker's process environment (boto3's default chain reads it): never
        on its command line, which `ps` shows and its log records. Empty for an external
        store (the brokers inherit the control plane's environment, as boto3's default chain
        expects)."""
        objects = self.manager.object_store
        if objects is None or not cluster.s3_bucket:
            return {}
        store = objects.cluster_settings(cluster.s3_endpoint, cluster.s3_bucket, read_only=False)
        if not (store.access_key_id and store.secret_access_key):
            return {}
        return {
            "AWS_ACCESS_KEY_ID": store.access_key_id,
            "AWS_SECRET_ACCESS_KEY": store.secret_access_key,
        }

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
        if rt.failures:  # a private endpoint's port taken meanwhile moves too
            endpoints.move_taken_ports(self.store, record, self.manager.reserved_ports())
        incarnation = str(uuid.uuid4())
        command = broker_command(
            record.data_dir,
            record.address,
            {**self._settings_for(cluster, record), INCARNATION: incarnation},
            exec_prefix(self.settings.broker_exec_prefix, record.broker_id, record.host),
        )
        rt.proc = BrokerProcess.spawn(
            command, record.data_dir, record.log_path, self._broker_environment(cluster)
        )
        rt.incarnation = incarnation
        rt.spawned_at = time.monotonic()
        self._watch(rt)
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
            message = f"restarting broker(s) {ids} {why}"
            if not cluster.operation:
                cluster = self.begin_operation(
                    cluster, OperationType.HEAL, f"broker(s) {ids} {why}", message
                )
            cluster = self.set_state(cluster, ClusterState.HEALING, message)
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
        """None once the broker answers ApiVersions and its metadata shows it registered
        and unfenced (a topic may then be placed on it), else why not."""
        proc = rt.proc
        assert proc is not None
        record = rt.record
        deadline = time.monotonic() + self.settings.broker_ready_timeout_ms / 1000
        delay = 0.02
        answered = False
        while time.monotonic() < deadline:
            if not proc.alive():
                tail = log_tail(record.log_path)
                return f"exited during start-up{f': {tail}' if tail else ''}"
            answered = answered or await kafka.probe_broker(record, timeout=1.0)
            if answered and await kafka.registered(record, timeout=1.0):
                return None
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.2)
        within = f"within {self.settings.broker_ready_timeout_ms} ms"
        if answered:
            return f"answered on {record.address} but was not registered, unfenced, {within}"
        return f"did not answer on {record.address} {within}"

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
        if cluster.operation_id:  # the operation goes on (retried); its last failure shows
            self.store.note_operation(cluster.operation_id, error=message)
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

    async def _restart_together(
        self, cluster: ClusterRecord, runtimes: list[BrokerRuntime]
    ) -> None:
        """Stop ``runtimes`` (each with a controlled shutdown), then start them all at once:
        brokers that run without the internal user cannot talk to brokers that run with it
        (the Raft quorum admits only peers that prove its password), so a cluster's first
        secured mode restarts its brokers together, once. Acknowledged records are on disk and
        stay; clients are refused until the brokers answer again."""
        ids = ", ".join(str(rt.record.broker_id) for rt in runtimes)
        cluster = self.set_state(
            cluster,
            ClusterState.UPDATING,
            f"restarting broker(s) {ids} together: they authenticate to each other from now on",
        )
        timeout = self.settings.broker_stop_timeout_ms / 1000
        for rt in runtimes:
            if rt.proc is not None:
                rt.state = BrokerState.STOPPING
                await rt.proc.stop(timeout)
                rt.proc = None
            rt.state = BrokerState.STOPPED
            self.store.update_broker(self.name, rt.record.broker_id, pid=0)
        for rt in runtimes:
            try:
                self._spawn(cluster, rt)
            except OSError as exc:
                self._failed_start(cluster, rt, f"cannot start: {exc}")
        await self._await_ready(
            cluster, [rt for rt in runtimes if rt.state == BrokerState.STARTING]
        )

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
        results = await asyncio.gather(*(kafka.probe_broker(rt.record, timeout=2.0) for rt in due))
        for rt, ok in zip(due, results, strict=True):
            rt.last_probe = time.monotonic()
            if ok:
                rt.health_failures = 0
                continue
            rt.health_failures += 1
            if rt.health_failures >= self.settings.broker_health_failures and rt.proc:
                self._kill_stuck(rt, f"it did not answer {rt.health_failures} probes")

    def _kill_stuck(self, rt: BrokerRuntime, why: str) -> None:
        """Fence and kill a broker whose process lives but makes no progress; the next step
        sees it gone and restarts it (HEALING)."""
        assert rt.proc is not None
        log.warning(
            "cluster %s: broker %d (pid %d) is stuck: %s; killing it to restart it",
            self.name,
            rt.record.broker_id,
            rt.proc.pid,
            why,
        )
        self._fence(rt, why)
        rt.proc.kill()
        self.wake()

    async def watchdog(self) -> None:
        """Kill the running brokers that live but make no progress (``_kill_stuck``):
        their watchdog file has not changed for ``broker_watchdog_timeout_ms``, and for the
        last half of that none of its threads used CPU or was seen running, runnable or
        waiting on the disk (a stopped process, or one blocked on a lock or a socket). A
        broker starved of CPU on a busy machine runs now and then; one whose loop waits
        for the interpreter lock or a log handler's lock while another of its threads
        works or writes (compiling a Wasm module, a log line to a busy disk) has that
        thread running or in D state: none is killed (the slower ApiVersions probes
        remain). Checked every tenth of a second: a stat of the file per broker, and once
        the file has not changed for nearly half the timeout, a read of ``/proc/PID/stat``
        and of each thread's too (reading those at every check was most of an idle control
        plane's CPU).

        The file is read through ``/proc/PID/root``, so a broker in a mount namespace of its
        own (``broker_exec_prefix``) is seen as it sees its data directory. A process is
        watched once it has changed its file (a broker started with ``watchdog.interval.ms``
        0 never is); a check that comes late (this loop was held up) starts over."""
        timeout = self.settings.broker_watchdog_timeout_ms / 1000
        if timeout <= 0:
            return
        every = min(max(timeout / 15, 0.01), 0.1)
        watches: dict[int, _Watch] = {}
        checked = time.monotonic()
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            late, checked = now - checked > timeout / 2, now
            running = {
                rt.proc.pid: rt
                for rt in self.runtimes.values()
                if rt.proc is not None and rt.state == BrokerState.RUNNING
            }
            for pid in set(watches) - set(running):
                del watches[pid]
            for pid, rt in running.items():
                path = Path(f"/proc/{pid}/root") / rt.record.data_dir.lstrip("/") / WATCHDOG_FILE
                try:
                    mtime = path.stat().st_mtime_ns
                except OSError:
                    mtime = -1
                watch = watches.get(pid)
                if watch is None or watch.mtime != mtime or late:
                    armed = watch is not None and (watch.armed or watch.mtime != mtime)
                    watches[pid] = _Watch(mtime, now, None, now, armed)
                    continue
                stale = now - watch.since
                if stale < timeout / 2 - every:
                    continue  # quiet counts over the second half only: first looked at here
                busy, cpu = process_state(pid)
                if watch.cpu is None or busy or cpu != watch.cpu:
                    watch.cpu, watch.quiet = cpu, now
                quiet = now - watch.quiet
                if watch.armed and stale >= timeout and quiet >= timeout / 2:
                    del watches[pid]
                    self._kill_stuck(
                        rt,
                        f"its watchdog file did not change for {stale:.2f} s, and its "
                        f"threads neither ran nor waited on the disk for {quiet:.2f} s",
                    )

    # ------------------------------------------------------------------ exits

    def _watch(self, rt: BrokerRuntime) -> None:
        """When the process exits unasked (a planned stop unwatches it first): wake the
        reconciler to restart it, and have the controller fence it now."""
        proc, incarnation = rt.proc, rt.incarnation  # this process's, not a later one's
        assert proc is not None

        def exited() -> None:
            self.wake()
            self._fence(rt, f"its process (pid {proc.pid}) exited", incarnation)

        proc.watch(exited)

    def _fence(self, rt: BrokerRuntime, why: str, incarnation: str | None = None) -> None:
        """FenceBroker through another broker of the cluster, in the background: the
        controller moves the process's leaderships at once instead of after
        ``broker.session.timeout.ms``. Best effort (the session timeout remains the bound):
        a failure is logged, never retried. ``incarnation``: the process's (default: the
        one running now)."""
        incarnation = rt.incarnation if incarnation is None else incarnation
        if not incarnation or not self.settings.broker_exit_fencing_enable:
            return
        broker_id = rt.record.broker_id
        # serving ones first, the longest running first: the broker asked campaigns when
        # the exited one was the controller, and one that has just restarted may still be
        # catching up on the metadata log (its vote request refused: an election timeout)
        others = [
            other.record
            for other in sorted(
                self.runtimes.values(),
                key=lambda o: (o.state != BrokerState.RUNNING, o.spawned_at),
            )
            if other is not rt and other.proc is not None
        ]

        async def fence() -> None:
            try:
                fenced = await kafka.on_any(
                    others,
                    lambda admin: admin.fence_broker(broker_id, incarnation, why),
                    FENCE_TIMEOUT_S,
                )
            except (OSError, kafka.KafkaResponseError) as exc:
                log.info(
                    "cluster %s: broker %d %s; not fenced early (%s): its session timeout "
                    "fences it",
                    self.name,
                    broker_id,
                    why,
                    exc,
                )
                return
            log.info(
                "cluster %s: broker %d %s: %s",
                self.name,
                broker_id,
                "fenced" if fenced else "nothing to fence (fenced already, or registered again)",
                why,
            )

        task = asyncio.get_running_loop().create_task(fence())
        self._fences.add(task)
        task.add_done_callback(self._fences.discard)

    # ------------------------------------------------------------------ stopping

    async def stop_all(self) -> None:
        for task in list(self._fences):
            task.cancel()
        timeout = self.settings.broker_stop_timeout_ms / 1000
        procs = [rt.proc for rt in self.runtimes.values() if rt.proc is not None]
        for rt in self.runtimes.values():
            rt.state = BrokerState.STOPPING if rt.proc is not None else rt.state
        await asyncio.gather(*(proc.stop(timeout) for proc in procs))
        for rt in self.runtimes.values():
            rt.proc = None
            rt.state = BrokerState.STOPPED
