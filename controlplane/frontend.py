"""Frontend of the Clusters API: validate a request, write desired state, wake the backend.

Nothing here starts or stops a process; the reconciler (reconciler.py) does that. Every
method either raises a typed error (errors.py) or returns the cluster as recorded. The event
loop runs one handler at a time between awaits, and these methods do not await, so a check
("is another operation running?") and the write that follows are atomic.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence

from controlplane import errors, store
from controlplane.config import (
    Settings,
    validate_broker_config,
    validate_broker_count,
    validate_cluster_name,
    validate_config_keys,
)
from controlplane.objectstore import bucket_name
from controlplane.process import free_port
from controlplane.reconciler import ClusterManager
from controlplane.states import ClusterState
from controlplane.store import BrokerRecord, ClusterRecord, Store, choose_voters


def new_cluster_id() -> str:
    """A Kafka-style cluster id: a random UUID in URL-safe base64 (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ClusterFrontend:
    def __init__(self, store_: Store, manager: ClusterManager, settings: Settings) -> None:
        self.store = store_
        self.manager = manager
        self.settings = settings

    def get(self, name: str) -> ClusterRecord:
        cluster = self.store.get_cluster(name)
        if cluster is None:
            raise errors.ClusterNotFound(f"cluster {name!r} not found", cluster=name)
        return cluster

    def list_clusters(self) -> list[ClusterRecord]:
        return self.store.list_clusters()

    def brokers(self, name: str) -> list[BrokerRecord]:
        return self.store.brokers(name)

    def _new_brokers(self, cluster: ClusterRecord, ids: Sequence[int]) -> list[BrokerRecord]:
        used = self.store.used_ports() | self.manager.reserved_ports()
        out = []
        cluster_dir = self.manager.cluster_dir(cluster)
        log_dir = self.manager.cluster_log_dir(cluster)
        for broker_id in ids:
            port = free_port(self.settings.broker_host, used)
            used.add(port)
            raft_port = free_port(self.settings.broker_host, used)
            used.add(raft_port)
            out.append(
                BrokerRecord(
                    cluster=cluster.name,
                    broker_id=broker_id,
                    host=self.settings.broker_host,
                    port=port,
                    data_dir=str(cluster_dir / f"broker-{broker_id}"),
                    log_path=str(log_dir / f"broker-{broker_id}.log"),
                    raft_port=raft_port,
                )
            )
        return out

    def create(
        self, name: str, broker_count: int | None, config: Mapping[str, str]
    ) -> ClusterRecord:
        validate_cluster_name(name)
        count = self.settings.cluster_default_brokers if broker_count is None else broker_count
        validate_broker_count(count, self.settings, name)
        checked = validate_broker_config(config, name)
        existing = self.store.get_cluster(name)
        if existing is not None:
            raise errors.ClusterAlreadyExists(
                f"cluster {name!r} already exists (state {existing.state})", cluster=name
            )
        cluster_id = new_cluster_id()
        objects = self.manager.object_store
        cluster = ClusterRecord(
            name=name,
            cluster_id=cluster_id,
            state=ClusterState.CREATING,
            broker_count=count,
            config=checked,
            operation=store.OP_CREATE,
            state_message=f"starting {count} broker(s)",
            # the reconciler creates the bucket; brokers get the settings once they take them
            s3_endpoint=objects.endpoint if objects is not None else "",
            s3_bucket=bucket_name(name, cluster_id) if objects is not None else "",
            voters=choose_voters(range(count)),
        )
        self.store.insert_cluster(cluster, self._new_brokers(cluster, range(count)))
        self.manager.notify(name)
        return self.get(name)

    def _check_idle(self, cluster: ClusterRecord, what: str) -> None:
        if cluster.state not in (ClusterState.ACTIVE, ClusterState.FAILED) or cluster.busy:
            doing = f" ({cluster.operation})" if cluster.operation else ""
            raise errors.OperationInProgress(
                f"cannot {what}: cluster {cluster.name!r} is {cluster.state}{doing}; "
                "retry when it is ACTIVE",
                cluster=cluster.name,
            )

    def delete(self, name: str) -> ClusterRecord:
        cluster = self.get(name)
        if cluster.state != ClusterState.DELETING:
            cluster = self.store.update_cluster(
                name,
                state=ClusterState.DELETING,
                operation=store.OP_DELETE,
                state_message="stopping brokers",
            )
            self.manager.notify(name, interrupt=True)
        return cluster

    def update_broker_count(self, name: str, count: int) -> ClusterRecord:
        cluster = self.get(name)
        validate_broker_count(count, self.settings, name)
        if count == cluster.broker_count:
            return cluster
        self._check_idle(cluster, "update the broker count")
        if count < cluster.broker_count:
            return self._scale_in(cluster, count)
        new = self._new_brokers(cluster, range(cluster.broker_count, count))
        self.store.add_brokers(
            name,
            new,
            broker_count=count,
            state=ClusterState.UPDATING,
            operation=store.OP_UPDATE_BROKER_COUNT,
            state_message=f"adding {len(new)} broker(s)",
        )
        self.manager.notify(name)
        return self.get(name)

    def _scale_in(self, cluster: ClusterRecord, count: int) -> ClusterRecord:
        """Record the smaller count; the reconciler moves partitions, then removes brokers."""
        if count < cluster.min_broker_count:
            voters = ", ".join(str(v) for v in cluster.voters)
            raise errors.ScaleInNotSupported(
                f"cannot scale cluster {cluster.name!r} in to {count} broker(s): broker(s) "
                f"{voters} are the voters of its metadata quorum and stay, so it can shrink to "
                f"{cluster.min_broker_count} broker(s) at least",
                cluster=cluster.name,
            )
        ids = ", ".join(str(i) for i in range(count, cluster.broker_count))
        self.store.update_cluster(
            cluster.name,
            broker_count=count,
            state=ClusterState.UPDATING,
            operation=store.OP_UPDATE_BROKER_COUNT,
            state_message=f"scale-in to {count} broker(s): moving partitions off broker(s) {ids}",
        )
        self.manager.notify(cluster.name)
        return self.get(cluster.name)

    def update_config(
        self, name: str, config: Mapping[str, str], remove: Sequence[str]
    ) -> ClusterRecord:
        cluster = self.get(name)
        checked = validate_broker_config(config, name)
        removed = validate_config_keys(remove, name)
        both = set(checked) & set(removed)
        if both:
            key = sorted(both)[0]
            raise errors.InvalidConfig(
                f"broker config {key!r} is both set and removed", cluster=name, key=key
            )
        wanted = {k: v for k, v in {**cluster.config, **checked}.items() if k not in removed}
        if wanted == cluster.config:
            return cluster
        self._check_idle(cluster, "update the configuration")
        cluster = self.store.update_cluster(
            name,
            config=wanted,
            config_version=cluster.config_version + 1,
            state=ClusterState.UPDATING,
            operation=store.OP_UPDATE_CONFIG,
            state_message="rolling restart: starting",
        )
        self.manager.notify(name)
        return cluster
