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
from dataclasses import replace
from typing import Any

from billing import catalog
from controlplane import cluster_security, errors, store
from controlplane.config import (
    Settings,
    validate_broker_config,
    validate_broker_count,
    validate_cluster_name,
    validate_config_keys,
    validate_tags,
)
from controlplane.configurations import ConfigurationOps
from controlplane.objectstore import bucket_name
from controlplane.process import free_port
from controlplane.reconciler import ClusterManager
from controlplane.states import ClientAuth, ClusterState, OperationType, StorageMode
from controlplane.store import (
    BrokerRecord,
    ClusterRecord,
    OperationRecord,
    Store,
    choose_voters,
    new_operation_id,
)


def new_cluster_id() -> str:
    """A Kafka-style cluster id: a random UUID in URL-safe base64 (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ClusterFrontend:
    def __init__(self, store_: Store, manager: ClusterManager, settings: Settings) -> None:
        self.store = store_
        self.manager = manager
        self.settings = settings
        self.configurations = ConfigurationOps(store_, settings)

    def get(self, name: str) -> ClusterRecord:
        return errors.existing_cluster(self.store, name)

    def list_clusters(self) -> list[ClusterRecord]:
        return self.store.list_clusters()

    def brokers(self, name: str) -> list[BrokerRecord]:
        return self.store.brokers(name)

    def _new_brokers(self, cluster: ClusterRecord, ids: Sequence[int]) -> list[BrokerRecord]:
        """New brokers' records, with ports for their Kafka listener, their Raft listener and
        the client listener of each mode of ``cluster``."""
        used = self.store.used_ports() | self.manager.reserved_ports()
        out = []
        cluster_dir = self.manager.cluster_dir(cluster)
        log_dir = self.manager.cluster_log_dir(cluster)
        for broker_id in ids:
            host = self.settings.host_for(broker_id)
            port = free_port(host, used)
            used.add(port)
            raft_port = free_port(host, used)
            used.add(raft_port)
            record = BrokerRecord(
                cluster=cluster.name,
                broker_id=broker_id,
                host=host,
                port=port,
                data_dir=str(cluster_dir / f"broker-{broker_id}"),
                log_path=str(log_dir / f"broker-{broker_id}.log"),
                raft_port=raft_port,
            )
            ports: dict[str, Any] = {}
            for column in cluster_security.missing_ports(
                cluster.client_auth, cluster.secured, record
            ):
                ports[column] = free_port(host, used)
                used.add(ports[column])
            out.append(replace(record, **ports))
        return out

    def create(
        self,
        name: str,
        broker_count: int | None,
        config: Mapping[str, str],
        client_auth: Sequence[ClientAuth] = (),
        broker_type: str = "",
        *,
        tags: Mapping[str, str] | None = None,
        storage_mode: StorageMode | None = None,
        configuration: tuple[str, int] | None = None,
    ) -> ClusterRecord:
        """``storage_mode`` None: TIERED when the control plane has an object store;
        ``configuration``: (name, revision; 0 the latest) whose settings it starts with
        (``config`` wins where both set a key)."""
        validate_cluster_name(name)
        count = self.settings.cluster_default_brokers if broker_count is None else broker_count
        validate_broker_count(count, self.settings, name)
        kind = validate_broker_type(broker_type, name)
        labels = validate_tags(tags or {}, self.settings, name)
        objects = self.manager.object_store
        if storage_mode is StorageMode.TIERED and objects is None:
            raise errors.PreconditionFailed(
                f"cluster {name!r}: storage mode TIERED needs an object store, and this control "
                "plane runs without one (start it with one, or ask for LOCAL)",
                cluster=name,
            )
        tiered = objects is not None and storage_mode is not StorageMode.LOCAL
        checked = validate_broker_config(config, name)
        revision = None
        if configuration is not None:
            revision = self.configurations.get(*configuration).current
            checked = {**revision.properties, **checked}
        modes = cluster_security.parse_modes(client_auth, name, default=True)
        existing = self.store.get_cluster(name)
        if existing is not None:
            raise errors.ClusterAlreadyExists(
                f"cluster {name!r} already exists (state {existing.state})", cluster=name
            )
        cluster_id = new_cluster_id()
        operation = OperationRecord(
            id=new_operation_id(),
            cluster=name,
            cluster_id=cluster_id,
            type=OperationType.CREATE,
            detail=f"{count} broker(s)"
            + (f", broker type {kind}" if kind != catalog.DEFAULT_BROKER_TYPE else "")
            + (f", client auth {modes_text(modes)}" if modes != (ClientAuth.NONE,) else "")
            + (f", {settings_text(checked)}" if checked else ""),
        )
        cluster = ClusterRecord(
            name=name,
            cluster_id=cluster_id,
            state=ClusterState.CREATING,
            broker_count=count,
            config=checked,
            operation=store.OP_CREATE,
            operation_id=operation.id,
            state_message=f"starting {count} broker(s)",
            # the reconciler creates the bucket; brokers get the settings once they take them
            s3_endpoint=objects.endpoint if objects is not None and tiered else "",
            s3_bucket=bucket_name(name, cluster_id) if objects is not None and tiered else "",
            voters=choose_voters(range(count)),
            client_auth=modes,
            broker_type=kind,
            tags=labels,
            storage_mode=StorageMode.TIERED if tiered else StorageMode.LOCAL,
            configuration_name=revision.name if revision is not None else "",
            configuration_revision=revision.revision if revision is not None else 0,
        )
        if cluster_security.needs_internal_user(modes):
            credentials = cluster_security.create_internal_user(self.manager.cluster_dir(cluster))
            cluster = replace(
                cluster,
                internal_credentials=str(credentials),
                inter_broker_version=cluster.config_version,
            )
        self.store.insert_cluster(
            cluster,
            self._new_brokers(cluster, range(count)),
            replace(operation, state_message=cluster.state_message),
        )
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

    def update_configuration(self, name: str, configuration: str, revision: int) -> ClusterRecord:
        """Move the cluster to ``revision`` (0: the latest) of ``configuration``: the settings
        it had from its previous revision are replaced, settings given apart kept; applied
        by a rolling restart (UPDATE_CONFIG)."""
        cluster = self.get(name)
        new = self.configurations.get(configuration, revision).current
        old = self.configurations.properties(
            cluster.configuration_name, cluster.configuration_revision
        )
        kept = {k: v for k, v in cluster.config.items() if old.get(k) != v}
        wanted = {**new.properties, **kept}
        same_revision = (cluster.configuration_name, cluster.configuration_revision) == (
            new.name,
            new.revision,
        )
        if same_revision and wanted == cluster.config:
            return cluster
        if wanted == cluster.config:  # nothing to restart for
            return self.store.update_cluster(
                name, configuration_name=new.name, configuration_revision=new.revision
            )
        self._check_idle(cluster, "update the configuration")
        cluster = self.store.start_operation(
            name,
            OperationType.UPDATE_CONFIG,
            f"configuration {new.name} revision {new.revision}",
            config=wanted,
            config_version=cluster.config_version + 1,
            configuration_name=new.name,
            configuration_revision=new.revision,
            state=ClusterState.UPDATING,
            state_message="rolling restart: starting",
        )
        self.manager.notify(name)
        return cluster

    def update_tags(self, name: str, tags: Mapping[str, str]) -> ClusterRecord:
        """Replace the cluster's tags (any state but DELETING; nothing restarts)."""
        cluster = self.get(name)
        labels = validate_tags(tags, self.settings, name)
        if cluster.state is ClusterState.DELETING:
            raise errors.ClusterNotReady(
                f"cluster {name!r} is being deleted: its tags cannot change", cluster=name
            )
        return self.store.update_cluster(name, tags=labels)

    def delete(self, name: str) -> ClusterRecord:
        cluster = self.get(name)
        if cluster.state != ClusterState.DELETING:
            cluster = self.store.start_operation(
                name,
                OperationType.DELETE,
                f"{len(self.store.brokers(name))} broker(s) and their data",
                state=ClusterState.DELETING,
                state_message="stopping brokers",
            )
            self.manager.notify(name, interrupt=True)
        return cluster

    def update_broker_count(
        self, name: str, count: int, config: Mapping[str, str] | None = None
    ) -> ClusterRecord:
        """Scale out or in; ``config`` (broker settings) changes in the same operation: new
        brokers start with it, the others get it by a rolling restart."""
        cluster = self.get(name)
        validate_broker_count(count, self.settings, name)
        checked = validate_broker_config(config or {}, name)
        wanted = {**cluster.config, **checked}
        if count == cluster.broker_count and wanted == cluster.config:
            return cluster
        self._check_idle(cluster, "update the broker count")
        detail = f"{cluster.broker_count} -> {count} brokers"
        changes: dict[str, Any] = {"broker_count": count, "state": ClusterState.UPDATING}
        if wanted != cluster.config:
            detail += f", {settings_text(checked)}"
            changes |= {"config": wanted, "config_version": cluster.config_version + 1}
        if count < cluster.broker_count:
            return self._scale_in(cluster, count, detail, changes)
        new = self._new_brokers(cluster, range(cluster.broker_count, count))
        message = f"adding {len(new)} broker(s)" if new else "rolling restart: starting"
        self.store.start_operation(
            name,
            OperationType.UPDATE_BROKER_COUNT,
            detail,
            new_brokers=new,
            state_message=message,
            **changes,
        )
        self.manager.notify(name)
        return self.get(name)

    def _scale_in(
        self, cluster: ClusterRecord, count: int, detail: str, changes: dict[str, Any]
    ) -> ClusterRecord:
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
        self.store.start_operation(
            cluster.name,
            OperationType.UPDATE_BROKER_COUNT,
            detail,
            state_message=f"scale-in to {count} broker(s): moving partitions off broker(s) {ids}",
            **changes,
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
        detail = "; ".join(
            part
            for part in (
                f"set {settings_text(checked)}" if checked else "",
                f"remove {', '.join(removed)}" if removed else "",
            )
            if part
        )
        cluster = self.store.start_operation(
            name,
            OperationType.UPDATE_CONFIG,
            detail,
            config=wanted,
            config_version=cluster.config_version + 1,
            state=ClusterState.UPDATING,
            state_message="rolling restart: starting",
        )
        self.manager.notify(name)
        return cluster

    def update_security(
        self,
        name: str,
        client_auth: Sequence[ClientAuth],
        config: Mapping[str, str] | None = None,
    ) -> ClusterRecord:
        """Change how clients authenticate (and broker settings in the same operation): new
        listeners, applied by a restart of every broker. The cluster's first secured mode
        also gives it its internal user and listener (``cluster_security``): the brokers'
        ``--listen`` moves to a new port for it, their old port stays the PLAINTEXT client
        listener (so existing clients keep their bootstrap string), and they restart
        together, once."""
        cluster = self.get(name)
        modes = cluster_security.parse_modes(client_auth, name, default=False)
        checked = validate_broker_config(config or {}, name)
        wanted = {**cluster.config, **checked}
        if modes == cluster.client_auth and wanted == cluster.config:
            return cluster
        self._check_idle(cluster, "update the client authentication")
        version = cluster.config_version + 1
        changes: dict[str, Any] = {
            "client_auth": modes,
            "config": wanted,
            "config_version": version,
            "state": ClusterState.UPDATING,
        }
        secured = cluster.secured or cluster_security.needs_internal_user(modes)
        used = self.store.used_ports() | self.manager.reserved_ports()
        moves: dict[int, dict[str, Any]] = {}
        for record in self.store.brokers(name):
            host = record.host
            ports: dict[str, Any] = {}
            if secured and not cluster.secured:
                # the brokers' own port stays their PLAINTEXT client listener; --listen moves
                ports["plaintext_port"] = record.port
                ports["port"] = free_port(host, used)
                used.add(ports["port"])
            broker = replace(record, **ports)
            for column in cluster_security.missing_ports(modes, secured, broker):
                ports[column] = free_port(host, used)
                used.add(ports[column])
            if ports:
                moves[broker.broker_id] = ports
        if secured and not cluster.secured:
            credentials = cluster_security.create_internal_user(self.manager.cluster_dir(cluster))
            changes |= {"internal_credentials": str(credentials), "inter_broker_version": version}
        detail = f"client auth {modes_text(cluster.client_auth)} -> {modes_text(modes)}"
        if checked:
            detail += f", {settings_text(checked)}"
        together = secured and not cluster.secured
        cluster = self.store.start_operation(
            name,
            OperationType.UPDATE_SECURITY,
            detail,
            broker_changes=moves,
            state_message="restarting the brokers together"
            if together
            else "rolling restart: starting",
            **changes,
        )
        self.manager.notify(name)
        return cluster

    def reboot_broker(self, name: str, broker_id: int) -> ClusterRecord:
        """Record the reboot (RebootBroker); the reconciler stops and starts the broker once
        the ISR of every partition is full, then waits for it to be full again."""
        cluster = self.get(name)
        ids = [b.broker_id for b in self.store.brokers(name)]
        if broker_id not in ids:
            raise errors.BrokerNotFound(
                f"cluster {name!r} has no broker {broker_id} (its brokers: "
                f"{', '.join(map(str, ids))})",
                cluster=name,
                broker=broker_id,
            )
        self._check_idle(cluster, f"reboot broker {broker_id}")
        self.store.update_broker(name, broker_id, reboot_requested=1)
        cluster = self.store.start_operation(
            name,
            OperationType.REBOOT_BROKER,
            f"broker {broker_id}",
            state=ClusterState.UPDATING,
            state_message=f"reboot of broker {broker_id}: requested",
        )
        self.manager.notify(name)
        return cluster


def validate_broker_type(name: str, cluster: str) -> str:
    """The broker type of a new cluster (MSK's names, ``billing.catalog``; empty: the
    default); INVALID_ARGUMENT naming the known ones."""
    kind = name.strip() or catalog.DEFAULT_BROKER_TYPE
    try:
        return catalog.broker_type(kind).name
    except catalog.UnknownBrokerType as exc:
        raise errors.BadRequest(str(exc), cluster=cluster, broker_type=kind) from None


def settings_text(config: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(config.items()))


def modes_text(modes: Sequence[ClientAuth]) -> str:
    return "+".join(mode.option for mode in modes)
