"""The backend of replicators: one loop that converges MirrorMaker processes to the
``replicators`` table (``replicators.py``), and the lag of each replicated partition.

Every ``replicator.check.interval.ms`` (and at once when woken: a request, a process exit
seen through its pidfd) each replicator is reconciled:

1. its clusters: a source or target cluster that is gone (or DELETING) stops the process
   and leaves the replicator FAILED with a message that says so (final: nothing to copy
   from or to); one that is CREATING makes it wait (CREATING, "waiting for ...");
2. its process: one found running (a control plane restarted while it ran: adopted, by its
   command line) is kept; one that exited is noted (FAILED, with its exit code and the last
   lines of its log) and started again after a backoff that doubles from 1 s up to
   ``replicator.restart.backoff.max.ms`` (``restarts`` counts these); the files are
   rewritten before each start (the clusters' brokers may have moved);
3. MirrorMaker's status topic on the target (``mm2-status.ALIAS.internal``), only the
   records the current process wrote: RUNNING once MirrorSourceConnector and its tasks run;
   a FAILED connector or task restarts the process (with the same backoff), the state
   message naming it and the first line of its trace.

The lag of a partition (DescribeReplicator) is the source's end offset minus the next
offset MirrorMaker will copy: MirrorSourceConnector's source offset as Connect committed it
in ``mm2-offsets.ALIAS.internal`` (every ``replicator.offset.flush.interval.ms``), so it
runs up to that interval behind what was copied. A partition with no committed offset has
lag 0 when it is empty (log start = end), else -1 (unknown).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from controlplane.config import Settings
from controlplane.kafka import BrokerAddress, KafkaResponseError
from controlplane.process import log_tail
from controlplane.replicator_kafka import (
    Broker,
    CompactedReader,
    KafkaAccess,
    Partition,
    offsets_topic,
    parse_offsets,
    parse_status,
    status_topic,
    summarize,
)
from controlplane.replicator_process import (
    ClusterAccess,
    Flow,
    MirrorMakerProcess,
    classpath_dir,
    command,
    directory,
    java_binary,
    log_path,
    missing,
    replicated,
    scan,
    seconds,
    target_topic,
    write_files,
)
from controlplane.replicators import (
    ReplicatedPartition,
    Replicator,
    Replicators,
    ReplicatorState,
)
from controlplane.states import ClusterState
from controlplane.store import Store

log = logging.getLogger("sluice.controlplane.replicators")

BACKOFF_START_S = 1.0
STATUS_TIMEOUT_S = 5.0
"""Timeout of one request reading a status topic (a target that does not answer must not
hold the other replicators back for long)."""


@dataclass
class Runtime:
    """What the runner knows of one replicator beyond its row."""

    proc: MirrorMakerProcess | None = None
    failures: int = 0
    """Deaths and failures since it last ran (the backoff's exponent)."""
    next_attempt: float = 0.0
    status: CompactedReader = field(default_factory=lambda: CompactedReader(""))
    status_since: dict[int, int] | None = None
    """Status records before these offsets are an earlier process's (None: trust all)."""
    offsets: CompactedReader = field(default_factory=lambda: CompactedReader(""))
    offsets_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ClusterProblem(Exception):
    """A cluster of the replicator is gone (``final``) or not ready yet."""

    def __init__(self, message: str, *, final: bool) -> None:
        super().__init__(message)
        self.message = message
        self.final = final


class ReplicatorRunner:
    def __init__(self, store: Store, settings: Settings, home: Path, table: Replicators) -> None:
        self.store = store
        self.settings = settings
        self.home = home
        self.table = table
        self.runtimes: dict[str, Runtime] = {}
        self.found: dict[str, list[int]] = {}
        """MirrorMaker processes found at start-up, not adopted yet: name -> pids."""
        self.halted = False
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Find the processes a previous control plane left running, stop those of no
        replicator, and start the loop."""
        self.found = await asyncio.to_thread(scan, self.home)
        known = {r.name for r in self.table.list()}
        for name in [n for n in self.found if n not in known]:
            for pid in self.found.pop(name):
                log.warning("stopping MirrorMaker pid %d of no recorded replicator %s", pid, name)
                MirrorMakerProcess(pid, "").kill()
        self._task = asyncio.create_task(self._loop(), name="replicators")

    def wake(self) -> None:
        self._wake.set()

    def pids(self) -> list[int]:
        return [rt.proc.pid for rt in self.runtimes.values() if rt.proc and rt.proc.alive()]

    async def shutdown(self) -> None:
        """Stop the loop, then every MirrorMaker process (``cloudctl down``); the table keeps
        the replicators, which start again with the control plane."""
        self.halted = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        timeout = self.settings.replicator_stop_timeout_ms / 1000
        procs = [rt.proc for rt in self.runtimes.values() if rt.proc is not None]
        procs += [MirrorMakerProcess(p, "") for pids in self.found.values() for p in pids]
        await asyncio.gather(*(proc.stop(timeout) for proc in procs))
        for name in self.runtimes:
            self.table.update(name, pid=0)
        self.runtimes.clear()
        self.found.clear()

    async def remove(self, name: str) -> None:
        """Stop a replicator's process and forget it (DeleteReplicator)."""
        async with self._lock:
            rt = self.runtimes.pop(name, None)
            procs = [MirrorMakerProcess(p, "") for p in self.found.pop(name, [])]
            if rt is not None and rt.proc is not None:
                procs.append(rt.proc)
            await asyncio.gather(
                *(p.stop(self.settings.replicator_stop_timeout_ms / 1000) for p in procs)
            )
            await asyncio.to_thread(shutil.rmtree, directory(self.home, name), True)
        log.info("replicator %s: stopped and removed", name)

    async def _loop(self) -> None:
        interval = self.settings.replicator_check_interval_ms / 1000
        while not self.halted:
            self._wake.clear()
            async with self._lock:
                for record in self.table.list():
                    try:
                        await self._reconcile(record.name)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("replicator %s: reconcile failed", record.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    # ------------------------------------------------------------------ one replicator

    async def _reconcile(self, name: str) -> None:
        record = self.table.get(name)
        if record is None or record.state == ReplicatorState.DELETING:
            return
        rt = self.runtimes.get(name)
        if rt is None:
            rt = self.runtimes[name] = self._adopt(record)
            record = self.table.get(name) or record
        try:
            self._check_clusters(record)
        except ClusterProblem as problem:
            if problem.final:
                if rt.proc is not None:
                    await rt.proc.stop(self.settings.replicator_stop_timeout_ms / 1000)
                    rt.proc = None
                self._set(record, ReplicatorState.FAILED, problem.message, pid=0)
            elif rt.proc is None:
                self._set(record, record.state, problem.message)
            return
        if rt.proc is not None and not rt.proc.alive():
            record = self._died(record, rt)
        if rt.proc is None:
            if time.monotonic() >= rt.next_attempt:
                await self._spawn(record, rt)
            return
        await self._observe(record, rt)

    def _adopt(self, record: Replicator) -> Runtime:
        rt = Runtime(
            status=CompactedReader(status_topic(record.source_alias)),
            offsets=CompactedReader(offsets_topic(record.source_alias)),
        )
        properties = str(directory(self.home, record.name) / "mm2.properties")
        pids = self.found.pop(record.name, [])
        keep, *extra = pids or [0]
        for pid in extra:  # never two processes of one replicator
            log.warning("replicator %s: stopping duplicate MirrorMaker pid %d", record.name, pid)
            MirrorMakerProcess(pid, properties).kill()
        if keep:
            rt.proc = MirrorMakerProcess(keep, properties)
            rt.proc.watch(self.wake)
            self.table.update(record.name, pid=keep)
            log.info("replicator %s: adopted MirrorMaker pid %d", record.name, keep)
        elif record.pid:
            # it ran when the control plane stopped without stopping it (kill -9), and died
            rt.failures = 1
            self._set(
                record,
                ReplicatorState.FAILED,
                f"MirrorMaker (pid {record.pid}) stopped while the control plane was away; "
                "restarting it",
                pid=0,
            )
        return rt

    def _check_clusters(self, record: Replicator) -> None:
        for role, name in (("source", record.source_cluster), ("target", record.target_cluster)):
            if not name:
                continue
            cluster = self.store.get_cluster(name)
            if cluster is None or cluster.state == ClusterState.DELETING:
                raise ClusterProblem(
                    f"its {role} cluster {name!r} was deleted: the replicator cannot run; "
                    f"delete it (`cloudctl delete-replicator {record.name}`)",
                    final=True,
                )
            if cluster.state == ClusterState.CREATING:
                raise ClusterProblem(
                    f"waiting for its {role} cluster {name!r} (CREATING)", final=False
                )

    def _set(self, record: Replicator, state: ReplicatorState, message: str, **more: int) -> None:
        if record.state != state or record.state_message != message:
            log.info("replicator %s: %s %s", record.name, state, message)
        self.table.update(record.name, state=state, state_message=message, **more)

    def _backoff(self, rt: Runtime) -> float:
        rt.failures += 1
        most = self.settings.replicator_restart_backoff_max_ms / 1000
        wait = min(BACKOFF_START_S * 2 ** (rt.failures - 1), most)
        rt.next_attempt = time.monotonic() + wait
        return wait

    def _died(self, record: Replicator, rt: Runtime) -> Replicator:
        assert rt.proc is not None
        code = rt.proc.returncode
        rt.proc.unwatch()
        rt.proc = None
        wait = self._backoff(rt)
        path = log_path(self.home, record.name)
        tail = log_tail(str(path), 2)
        how = f"exited with code {code}" if code is not None else "exited"
        self._set(
            record,
            ReplicatorState.FAILED,
            f"MirrorMaker {how}: {tail or 'no output'} (log: {path}); restarting in {wait:.0f} s",
            pid=0,
        )
        return self.table.get(record.name) or record

    def access(self, cluster: str, bootstrap: str = "") -> tuple[ClusterAccess, KafkaAccess, int]:
        """How MirrorMaker and the control plane reach a cluster, and its broker count."""
        timeout = min(STATUS_TIMEOUT_S, self.settings.kafka_request_timeout_ms / 1000)
        if not cluster:
            brokers: list[BrokerAddress] = []
            for i, address in enumerate(bootstrap.split(",")):
                host, _, port = address.rpartition(":")
                brokers.append(Broker(-1 - i, host.strip("[]"), int(port)))
            return ClusterAccess(bootstrap), KafkaAccess(brokers, timeout), len(brokers)
        records = self.store.brokers(cluster)
        credentials = records[0].credentials if records else None
        addresses = ",".join(r.address for r in records)
        return ClusterAccess(addresses, credentials), KafkaAccess(records, timeout), len(records)

    async def _spawn(self, record: Replicator, rt: Runtime) -> None:
        reason = await asyncio.to_thread(
            missing, self.settings.replicator_java, self.settings.replicator_classpath
        )
        java = java_binary(self.settings.replicator_java)
        if reason or java is None:
            wait = self._backoff(rt)
            self._set(record, ReplicatorState.FAILED, f"{reason}; retrying in {wait:.0f} s")
            return
        try:
            source, _, source_brokers = self.access(record.source_cluster, record.source_bootstrap)
            target, target_kafka, brokers = self.access(record.target_cluster)
        except OSError as exc:  # a credentials file that cannot be read
            wait = self._backoff(rt)
            self._set(record, ReplicatorState.FAILED, f"{exc}; retrying in {wait:.0f} s")
            return
        flow = Flow(
            source_alias=record.source_alias,
            target_alias=record.target_alias,
            source=source,
            target=target,
            topics=record.topics,
            groups=record.groups,
            sync_group_offsets=record.sync_group_offsets,
            identical_names=record.identical_names,
            replication_factor=self._replication_factor(brokers),
            source_replication_factor=(
                self._replication_factor(source_brokers) if record.source_cluster else -1
            ),
            refresh_s=seconds(self.settings.replicator_refresh_interval_ms),
            sync_s=seconds(self.settings.replicator_sync_interval_ms),
            offset_flush_ms=self.settings.replicator_offset_flush_interval_ms,
        )
        properties = await asyncio.to_thread(write_files, self.home, record.name, flow)
        rt.status_since = await self._status_end(target_kafka, rt)
        argv = command(
            java,
            classpath_dir(self.settings.replicator_classpath),
            properties,
            record.target_alias,
            self.settings.replicator_heap_mb,
        )
        path = log_path(self.home, record.name)
        try:
            rt.proc = MirrorMakerProcess.launch(argv, properties, path)
        except OSError as exc:
            wait = self._backoff(rt)
            self._set(record, ReplicatorState.FAILED, f"cannot start {java}: {exc}")
            log.warning(
                "replicator %s: cannot start MirrorMaker; retry in %.0f s", record.name, wait
            )
            return
        rt.proc.watch(self.wake)
        restarts = record.restarts + (1 if rt.failures else 0)
        log.info(
            "replicator %s: started MirrorMaker pid %d (log %s)", record.name, rt.proc.pid, path
        )
        starting = f"MirrorMaker (pid {rt.proc.pid}) starting"
        state = ReplicatorState.CREATING  # a first start, or again after `cloudctl down`
        if record.state == ReplicatorState.FAILED:
            state = record.state
            starting = f"{record.state_message.partition('; restarting')[0]}; restarted: {starting}"
        self._set(record, state, starting, pid=rt.proc.pid, restarts=restarts)

    def _replication_factor(self, brokers: int) -> int:
        """As a topic created without one: ``topic.default.replication.factor``, capped by
        the cluster's broker count."""
        return max(1, min(self.settings.topic_default_replication_factor, brokers))

    async def _status_end(self, target: KafkaAccess, rt: Runtime) -> dict[int, int]:
        """The status topic read to its end: what a process started now writes comes after
        (an absent topic: everything will be new)."""
        try:
            await target.read(rt.status)
        except (OSError, asyncio.IncompleteReadError, KafkaResponseError):
            rt.status.reset()
            return {}
        return dict(rt.status.positions)

    async def _observe(self, record: Replicator, rt: Runtime) -> None:
        assert rt.proc is not None
        try:
            _, target, _ = self.access(record.target_cluster)
            await target.read(rt.status)
        except (OSError, asyncio.IncompleteReadError, KafkaResponseError) as exc:
            if record.state != ReplicatorState.RUNNING:
                self._set(
                    record,
                    record.state,
                    f"MirrorMaker (pid {rt.proc.pid}) starting: its status topic "
                    f"{rt.status.topic} cannot be read yet ({exc})",
                )
            return
        summary = summarize(parse_status(rt.status, rt.status_since))
        if summary.failed:
            what = "; ".join(f"{s.what} FAILED: {s.reason}" for s in summary.failed)
            await rt.proc.stop(self.settings.replicator_stop_timeout_ms / 1000)
            rt.proc = None
            wait = self._backoff(rt)
            path = log_path(self.home, record.name)
            self._set(
                record,
                ReplicatorState.FAILED,
                f"{what} (log: {path}); restarting MirrorMaker in {wait:.0f} s",
                pid=0,
            )
        elif summary.running:
            rt.failures = 0
            self._set(record, ReplicatorState.RUNNING, "")
        else:
            detail = summary.detail
            if record.source_bootstrap and not await self._answers(record):
                detail = f"the source {record.source_bootstrap} does not answer"
            self._set(record, record.state, f"MirrorMaker (pid {rt.proc.pid}) starting: {detail}")

    async def _answers(self, record: Replicator) -> bool:
        """Whether the source answers Metadata."""
        _, source, _ = self.access(record.source_cluster, record.source_bootstrap)
        try:
            await source.metadata([])
        except (OSError, asyncio.IncompleteReadError):
            return False
        return True

    # ------------------------------------------------------------------ lag

    async def partitions(self, record: Replicator) -> list[ReplicatedPartition]:
        """Each replicated partition with its lag; [] when the source does not answer."""
        try:
            return await asyncio.wait_for(
                self._partitions(record), self.settings.kafka_request_timeout_ms / 1000
            )
        except (OSError, asyncio.IncompleteReadError, KafkaResponseError, TimeoutError) as exc:
            log.warning("replicator %s: lag not known: %s", record.name, exc)
            return []

    async def _partitions(self, record: Replicator) -> list[ReplicatedPartition]:
        _, source, _ = self.access(record.source_cluster, record.source_bootstrap)
        _, topics = await source.metadata()
        pattern = re.compile(record.topics)
        chosen: list[Partition] = sorted(
            (topic, partition)
            for topic, partitions in topics.items()
            if replicated(topic, pattern, record.target_alias, record.identical_names)
            for partition in partitions
        )
        ends = await source.offsets(chosen)
        committed = await self._committed(record)
        out = []
        for topic, partition in chosen:
            lag = -1
            if (topic, partition) in ends:
                start, end = ends[(topic, partition)]
                position = committed.get((topic, partition))
                if position is not None:
                    lag = max(0, end - max(position, start))
                elif start >= end:
                    lag = 0
            out.append(
                ReplicatedPartition(
                    source_topic=topic,
                    target_topic=target_topic(record.source_alias, topic, record.identical_names),
                    partition=partition,
                    lag=lag,
                )
            )
        return out

    async def _committed(self, record: Replicator) -> dict[Partition, int]:
        """MirrorSourceConnector's committed positions ({} while none can be read)."""
        rt = self.runtimes.get(record.name)
        if rt is None:
            return {}
        _, target, _ = self.access(record.target_cluster)
        async with rt.offsets_lock:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, KafkaResponseError):
                await target.read(rt.offsets)
            return parse_offsets(rt.offsets, record.source_alias)
