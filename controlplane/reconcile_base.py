"""What every part of a cluster's reconciler shares: its state, the cluster's state changes and
the operation history they drive.

The reconciler (``reconciler.py``) is assembled from one class per job, each in its own
module: process supervision (``supervision.py``: start, adopt, probe, restart, rolling
restart), buckets (``buckets.py``), scale-in (``scaling.py``), broker reboots (``reboot.py``)
and deletion (``deletion.py``). They all derive from :class:`ReconcilerBase`, which holds the
attributes they share and :meth:`ReconcilerBase.set_state`, the one place a cluster's state
changes; it also records the progress and the end of the cluster's operation
(``operations`` in the state store: ``Operations.ListOperations``).

The manager that owns the reconcilers is seen here through :class:`Manager` only, so that no
module of the reconciler imports ``reconciler.py`` (no import cycle).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from controlplane.config import Settings
from controlplane.objectstore import ObjectStoreManager
from controlplane.process import BrokerProcess
from controlplane.states import BrokerState, ClusterState, OperationState, OperationType
from controlplane.store import BrokerRecord, ClusterRecord, Store

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
    incarnation: str = ""
    """The running process's ``broker.incarnation.id`` ("" when it is not known: an adopted
    process started without one)."""
    spawned_at: float = 0.0
    """Monotonic time this control plane started the running process (0: adopted)."""


class Manager(Protocol):
    """What a reconciler uses of the manager that owns it (``reconciler.ClusterManager``)."""

    store: Store
    settings: Settings
    home: Path
    object_store: ObjectStoreManager | None
    orphans: dict[str, list[int]]
    final_meter: Callable[[ClusterRecord], Awaitable[None]] | None
    """Meters a deleted cluster up to its end before its brokers stop (``metering.py``)."""

    def cluster_dir(self, cluster: ClusterRecord) -> Path: ...

    def cluster_log_dir(self, cluster: ClusterRecord) -> Path: ...

    def reserved_ports(self) -> set[int]: ...

    def forget(self, reconciler: ReconcilerBase) -> None: ...


class ReconcilerBase:
    def __init__(self, manager: Manager, name: str) -> None:
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
        self._reboot_deadline: float | None = None
        """Monotonic time by which the running reboot must have a full ISR again."""
        self._fences: set[asyncio.Task[None]] = set()
        """FenceBroker calls for brokers whose process just exited (``supervision``)."""

    @property
    def store(self) -> Store:
        return self.manager.store

    @property
    def settings(self) -> Settings:
        return self.manager.settings

    def wake(self) -> None:
        self._wake.set()

    def set_state(
        self, cluster: ClusterRecord, state: ClusterState, message: str, **changes: object
    ) -> ClusterRecord:
        """Change the cluster's state and message (and other ``changes`` of its columns).

        The operation in progress follows: its progress is the state message, and clearing
        the cluster's ``operation`` ends it, FAILED (with the message as its error) when the
        cluster turns FAILED, else COMPLETED."""
        if cluster.state != state or cluster.state_message != message or changes:
            if cluster.state != state:
                log.info("cluster %s: %s -> %s %s", self.name, cluster.state, state, message)
            ending = bool(cluster.operation) and changes.get("operation") == ""
            if ending:
                changes["operation_id"] = ""
            updated = self.store.update_cluster(
                self.name, state=state, state_message=message, **changes
            )
            if ending:
                failed = state == ClusterState.FAILED
                self.store.finish_operations(
                    cluster.cluster_id,
                    OperationState.FAILED if failed else OperationState.COMPLETED,
                    message if failed else "",
                )
            elif updated.operation_id and message and message != cluster.state_message:
                self.store.note_operation(updated.operation_id, state_message=message)
            cluster = updated
        return cluster

    def begin_operation(
        self, cluster: ClusterRecord, kind: OperationType, detail: str, message: str
    ) -> ClusterRecord:
        """Start an operation the control plane decides on itself (a heal)."""
        log.info("cluster %s: %s %s", self.name, kind.value, detail)
        state = ClusterState.HEALING if kind == OperationType.HEAL else ClusterState.UPDATING
        return self.store.start_operation(
            self.name, kind, detail, state=state, state_message=message
        )

    def fail_operation(
        self, cluster: ClusterRecord, state: ClusterState, message: str, error: str
    ) -> ClusterRecord:
        """End the operation in progress as FAILED with ``error``, the cluster in ``state``."""
        log.warning("cluster %s: %s failed: %s", self.name, cluster.operation, error)
        updated = self.store.update_cluster(
            self.name, state=state, state_message=message, operation="", operation_id=""
        )
        self.store.finish_operations(cluster.cluster_id, OperationState.FAILED, error)
        return updated
