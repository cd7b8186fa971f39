"""``sluice_cluster`` (resource and data source) and ``sluice_bootstrap_brokers``.

A cluster is created, waited for until ACTIVE (the ``timeouts`` block bounds every wait),
scaled (UpdateBrokerCount), reconfigured (UpdateClusterConfig: a rolling restart), moved to
another configuration revision (UpdateClusterConfiguration: a rolling restart), given other
client-authentication modes (UpdateClusterSecurity) and other tags (UpdateClusterTags:
nothing restarts) in place; a new name, broker type or storage mode replaces it. A cluster
that turns FAILED is an error with the control plane's message, and its state is kept
(tainted) so that ``terraform destroy`` removes it.

``kafka_config`` and ``configuration_info``: the API's ``Cluster.config`` holds both the
revision's settings and those given apart. ``kafka_config`` holds the ones given apart: a
key whose value is the revision's is left out when reading, unless ``kafka_config`` names
it. An update reconciles the cluster's settings to the revision's with ``kafka_config`` over
them (a key removed from ``kafka_config`` returns to the revision's value, else to the
broker's default).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tf.schema import Attribute, Schema
from tf.types import Number, String, Unknown
from tf.utils import Diagnostics

from proto.sluice.v1 import clusters_pb2 as pb
from proto.sluice.v1 import configurations_pb2 as cpb
from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import operations_pb2 as opb
from sluice_client.client import ApiError, cluster_state_name
from terraform.api import Api, ProviderError
from terraform.common import (
    POLL_INTERVAL,
    DataSourceBase,
    Deadline,
    ListOf,
    MapOf,
    ResourceBase,
    State,
    Timeouts,
    blank,
    given,
    known,
    log,
    map_value,
    retry_busy,
)
from terraform.configuration import (
    INFO_BLOCK,
    check_info,
    find_revision,
    get_configuration,
    info_state,
    wanted_revision,
)

CLIENT_AUTH: dict[str, Any] = {
    "none": pb.CLIENT_AUTH_NONE,
    "scram": pb.CLIENT_AUTH_SCRAM,
    "tls": pb.CLIENT_AUTH_TLS,
}
"""``client_authentication`` values (cloudctl's ``--client-auth``): MSK's modes."""
AUTH_NAME = {value: name for name, value in CLIENT_AUTH.items()}
BOOTSTRAP = {
    "bootstrap_brokers": pb.CLIENT_AUTH_NONE,
    "bootstrap_brokers_sasl_scram": pb.CLIENT_AUTH_SCRAM,
    "bootstrap_brokers_tls": pb.CLIENT_AUTH_TLS,
}
"""MSK's attribute names of the bootstrap strings, by the listener they name."""
UNREACHABLE = frozenset({"CONTROL_PLANE_UNAVAILABLE"})
STORAGE_MODES: dict[str, Any] = {"LOCAL": pb.STORAGE_MODE_LOCAL, "TIERED": pb.STORAGE_MODE_TIERED}
"""``storage_mode`` values (MSK's): fixed for a cluster's life."""
STORAGE_NAME = {value: name for name, value in STORAGE_MODES.items()}


def arn(cluster: pb.Cluster) -> str:
    """An ARN-like id, MSK's form: ``arn:sluice:kafka:local:cluster/NAME/CLUSTER_ID``."""
    return f"arn:sluice:kafka:local:cluster/{cluster.name}/{cluster.cluster_id}"


def bootstrap_of(cluster: pb.Cluster, mode: int) -> str:
    """``host:port,...`` of the listener of ``mode`` on every broker (as GetBootstrapBrokers
    gives it); empty when the cluster does not have the mode."""
    if mode not in cluster.client_auth:
        return ""
    addresses = []
    for broker in sorted(cluster.brokers, key=lambda b: b.id):
        for listener in broker.listeners:
            if listener.client_auth == mode:
                addresses.append(f"{broker.host}:{listener.port}")
    return ",".join(addresses)


def _computed(name: str, description: str, kind: Any = None) -> Attribute:
    return Attribute(name, kind or String(), description=description, computed=True)


COMPUTED = [
    _computed("id", "The cluster's name (its import id)."),
    _computed("arn", "ARN-like id, as MSK's: `arn:sluice:kafka:local:cluster/NAME/CLUSTER_ID`."),
    _computed("cluster_id", "Unique id of this cluster (also its brokers' Kafka cluster.id)."),
    _computed("state", "ACTIVE, CREATING, UPDATING, DELETING, FAILED or HEALING (MSK's)."),
    _computed(
        "bootstrap_brokers",
        "host:port,... of the PLAINTEXT listener (`none`); empty without that mode (MSK's).",
    ),
    _computed(
        "bootstrap_brokers_sasl_scram",
        "host:port,... of the SASL_SSL / SCRAM-SHA-512 listener (`scram`); empty without it.",
    ),
    _computed(
        "bootstrap_brokers_tls",
        "host:port,... of the SSL listener with client certificates (`tls`); empty without it.",
    ),
]
BOOTSTRAP_FIELDS = tuple(BOOTSTRAP)


def given_apart(
    config: Mapping[str, str], revision: Mapping[str, str], declared: Any
) -> dict[str, str]:
    """The cluster's settings but those whose value is its revision's, unless ``declared``
    (the configuration's ``kafka_config``) names them."""
    names = declared if isinstance(declared, dict) else {}
    return {k: v for k, v in config.items() if k in names or revision.get(k) != v}


def config_changes(
    config: Mapping[str, str], revision: Mapping[str, str], declared: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """(settings to set, keys to remove) that make ``config`` the revision's settings with
    ``declared`` over them."""
    wanted = {**revision, **declared}
    pending = {k: v for k, v in wanted.items() if config.get(k) != v}
    return pending, sorted(k for k in config if k not in wanted)


def storage_name(mode: int) -> str:
    return STORAGE_NAME.get(mode) or pb.StorageMode.Name(mode).removeprefix("STORAGE_MODE_")


def state_of(
    cluster: pb.Cluster,
    prior: State | None,
    schema: Schema,
    configuration: cpb.Configuration | None = None,
) -> State:
    """The state of ``cluster`` as the API gives it, ``configuration`` being the revision
    it uses; ``prior`` keeps null maps null, the form of ``configuration_info`` and the
    timeouts block."""
    prior = prior or {}
    state = blank(schema)
    revision = dict(configuration.server_properties) if configuration else {}
    declared = prior.get("kafka_config")
    state.update(
        id=cluster.name,
        arn=arn(cluster),
        cluster_id=cluster.cluster_id,
        state=cluster_state_name(cluster.state),
        name=cluster.name,
        broker_count=cluster.broker_count,
        broker_type=cluster.broker_type,
        kafka_config=map_value(declared, given_apart(cluster.config, revision, declared)),
        client_authentication=[AUTH_NAME.get(m, str(m)) for m in cluster.client_auth],
        tags=map_value(prior.get("tags"), cluster.tags),
        storage_mode=storage_name(cluster.storage_mode),
    )
    for field, mode in BOOTSTRAP.items():
        state[field] = bootstrap_of(cluster, mode)
    if "configuration_info" in state and configuration is not None:
        state["configuration_info"] = info_state(prior.get("configuration_info"), configuration)
    if "timeouts" in state:
        state["timeouts"] = prior.get("timeouts")
    return {k: v for k, v in state.items() if k in _names(schema)}


def _names(schema: Schema) -> set[str]:
    return {a.name for a in schema.attributes} | {b.type_name for b in schema.block_types}


def used_revision(api: Api, cluster: pb.Cluster) -> cpb.Configuration | None:
    """The configuration revision the cluster uses (None: none)."""
    if not cluster.HasField("configuration_info"):
        return None
    info = cluster.configuration_info
    return get_configuration(api, info.name, info.revision)


def read_state(api: Api, cluster: pb.Cluster, prior: State | None, schema: Schema) -> State:
    """:func:`state_of` with the revision the cluster uses, read from the API."""
    return state_of(cluster, prior, schema, used_revision(api, cluster))


def get_cluster(api: Api, name: str) -> pb.Cluster | None:
    """The cluster, or None when there is none of that name (or it is being deleted)."""
    try:
        cluster: pb.Cluster = api.call(api.clusters.GetCluster, pb.GetClusterRequest(name=name))
    except ApiError as exc:
        if exc.reason == epb.CLUSTER_NOT_FOUND:
            return None
        raise
    if cluster.state == pb.CLUSTER_STATE_DELETING:
        return None
    return cluster


class ClusterWaiter:
    """Polls a cluster until its operation is done; FAILED and the deadline are errors that
    keep the cluster's state (Terraform records it)."""

    def __init__(self, api: Api, name: str, deadline: Deadline, prior: State) -> None:
        self.api = api
        self.name = name
        self.deadline = deadline
        self.prior = prior
        self.last = ""

    def idle(self, *, failed_ok: bool = False) -> pb.Cluster:
        """The cluster once ACTIVE with no operation running; FAILED is an error, unless
        ``failed_ok`` and no operation runs (a failed scale-in is final: the next update
        may start from there)."""
        cluster: pb.Cluster | None = None
        while True:
            try:
                cluster = self.api.call(
                    self.api.clusters.GetCluster, pb.GetClusterRequest(name=self.name), 10
                )
            except ApiError as exc:
                if exc.reason_name not in UNREACHABLE and exc.code.name != "DEADLINE_EXCEEDED":
                    raise
                self._check(cluster, "the control plane is not answering")
                time.sleep(1.0)
                continue
            self._progress(cluster)
            if cluster.state == pb.CLUSTER_STATE_ACTIVE and not cluster.operation:
                return cluster
            if cluster.state == pb.CLUSTER_STATE_FAILED:
                if failed_ok and not cluster.operation:
                    return cluster
                raise self._failed(cluster)
            if cluster.state == pb.CLUSTER_STATE_DELETING:
                raise ProviderError(
                    f"Cluster {self.name!r} is being deleted",
                    "Something outside Terraform deletes it (`cloudctl list-operations "
                    f"{self.name}` tells); apply again once it is gone.",
                )
            self._check(cluster, f"still {cluster_state_name(cluster.state)}")
            time.sleep(POLL_INTERVAL)

    def gone(self) -> None:
        """Returns once the cluster no longer exists."""
        cluster: pb.Cluster | None = None
        while True:
            try:
                cluster = self.api.call(
                    self.api.clusters.GetCluster, pb.GetClusterRequest(name=self.name), 10
                )
            except ApiError as exc:
                if exc.reason == epb.CLUSTER_NOT_FOUND:
                    return
                if exc.reason_name not in UNREACHABLE and exc.code.name != "DEADLINE_EXCEEDED":
                    raise
                cluster = None
            if cluster is not None:
                self._progress(cluster)
            if self.deadline.passed():
                raise ProviderError(
                    f"Cluster {self.name!r} still exists {self.deadline.describe()}",
                    "The delete goes on in the control plane; follow it with `cloudctl "
                    f"describe-cluster {self.name}`, then run destroy again.",
                )
            time.sleep(POLL_INTERVAL)

    def _progress(self, cluster: pb.Cluster) -> None:
        running = sum(1 for b in cluster.brokers if b.state == pb.BROKER_STATE_RUNNING)
        line = f"{cluster_state_name(cluster.state)} {running}/{cluster.broker_count} brokers"
        if cluster.state_message:
            line += f": {cluster.state_message}"
        if line != self.last:
            log.info("sluice: [%5.1fs] cluster %s: %s", self.deadline.elapsed(), self.name, line)
            self.last = line

    def state(self, cluster: pb.Cluster) -> State:
        """The state to keep despite an error: as read, or (the API not answering) with the
        prior's settings and configuration."""
        try:
            return read_state(self.api, cluster, self.prior, ClusterResource.SCHEMA)
        except ApiError:
            state = state_of(cluster, self.prior, ClusterResource.SCHEMA)
            for field in ("kafka_config", "configuration_info"):
                state[field] = self.prior.get(field)
            return state

    def _check(self, cluster: pb.Cluster | None, what: str) -> None:
        if not self.deadline.passed():
            return
        state = self.state(cluster) if cluster else None
        raise ProviderError(
            f"Cluster {self.name!r}: {what} {self.deadline.describe()}",
            "The operation goes on in the control plane: follow it with `cloudctl "
            f"describe-cluster {self.name}`, and apply again once it is ACTIVE (or give the "
            "`timeouts` block more time).",
            state=state,
        )

    def _failed(self, cluster: pb.Cluster) -> ProviderError:
        message = cluster.state_message or "no message"
        if cluster.operation_id:
            op = self.api.call(
                self.api.operations.GetOperation, opb.GetOperationRequest(id=cluster.operation_id)
            )
            if op.error and op.error not in message:
                message += f" ({op.error})"
        if self.deadline.operation == "create":
            what = (
                "The control plane keeps retrying its start. The resource is tainted: the next "
                "apply replaces it, `terraform destroy` removes it."
            )
        else:
            what = "The cluster keeps its brokers; fix the cause and apply again."
        return ProviderError(
            f"Cluster {self.name!r} FAILED: {message}",
            f"{what} `cloudctl describe-cluster {self.name}` and `cloudctl logs {self.name}` "
            "tell more.",
            state=self.state(cluster),
        )


# ---------------------------------------------------------------------- the resource


class ClusterResource(ResourceBase):
    NAME = "cluster"
    TIMEOUTS = Timeouts(create=30 * 60, update=60 * 60, delete=30 * 60)
    CONFIG_MAP = "kafka_config"
    SCHEMA = Schema(
        version=0,
        description="A Kafka-compatible cluster (MSK's `aws_msk_cluster`). Import id: its name.",
        attributes=[
            *COMPUTED[:2],
            Attribute(
                "name",
                String(),
                description="1-64 ASCII letters, digits and hyphens, not starting with a hyphen. "
                "A new name replaces the cluster.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "broker_count",
                Number(),
                description="Number of brokers (default 3, at most the control plane's "
                "`cluster.max.brokers`). Changed in place: new brokers start empty; fewer brokers "
                "move the partitions of the removed ones first.",
                optional=True,
                computed=True,
            ),
            Attribute(
                "broker_type",
                String(),
                description="Instance type, MSK's names (`kafka.m5.large`, the default, "
                "`kafka.m7g.large`, `express.m7g.large`, ...): what broker-hours are billed as. "
                "A new type replaces the cluster (the API has no in-place change).",
                optional=True,
                computed=True,
                requires_replace=True,
            ),
            Attribute(
                "storage_mode",
                String(),
                description="`TIERED` (topics may set `remote.storage.enable`: the control "
                "plane's object store) or `LOCAL` (brokers' disks only), as MSK's. Default: "
                "TIERED when the control plane has an object store. Fixed for the cluster's "
                "life: a new value replaces the cluster.",
                optional=True,
                computed=True,
                requires_replace=True,
            ),
            Attribute(
                "kafka_config",
                MapOf(String()),
                description="Broker settings, Kafka's names (e.g. `log.retention.ms`), given "
                "apart from `configuration_info` and winning over its revision. Changed in place "
                "by a rolling restart, one broker at a time; a key removed returns to the "
                "revision's value, else to the broker's default. A setting whose value is the "
                "revision's is not shown here unless named here.",
                optional=True,
            ),
            Attribute(
                "client_authentication",
                ListOf(String()),
                description="How clients authenticate, one listener per mode: `none` "
                "(PLAINTEXT), `scram` (SASL_SSL, SCRAM-SHA-512), `tls` (SSL, client "
                'certificates). Default `["none"]`. Changed in place (the brokers restart).',
                optional=True,
                computed=True,
            ),
            Attribute(
                "tags",
                MapOf(String()),
                description="Labels (MSK's tags): at most the control plane's `cluster.max.tags` "
                "(50); keys of 1-128 characters, not starting with `aws:`; values of at most 256. "
                "Changed in place; nothing restarts.",
                optional=True,
            ),
            *COMPUTED[2:],
        ],
        block_types=[INFO_BLOCK, TIMEOUTS.block()],
    )

    def check(self, diags: Diagnostics, config: State) -> None:
        modes = config.get("client_authentication")
        if known(modes):
            for i, mode in enumerate(modes):
                if known(mode) and mode not in CLIENT_AUTH:
                    diags.add_error(
                        f"Unknown client_authentication mode {mode!r}",
                        "Use none, scram or tls.",
                        path=["client_authentication", (i,)],
                    )
            if not modes:
                diags.add_error(
                    "client_authentication is empty",
                    'Give at least one mode (none, scram, tls), or leave it out for ["none"].',
                    path=["client_authentication"],
                )
        count = config.get("broker_count")
        if known(count) and (count != int(count) or count < 1):
            diags.add_error(
                f"broker_count must be a whole number of at least 1, not {count}",
                "Give the number of brokers (the control plane allows up to its "
                "cluster.max.brokers).",
                path=["broker_count"],
            )
        mode = config.get("storage_mode")
        if known(mode) and mode not in STORAGE_MODES:
            diags.add_error(
                f"Unknown storage_mode {mode!r}",
                "Use TIERED or LOCAL (MSK's), or leave it out for the control plane's default.",
                path=["storage_mode"],
            )
        check_info(diags, config)

    def do_create(self, planned: State) -> State:
        api = self.api()
        name = planned["name"]
        deadline = Deadline(self.TIMEOUTS.of(planned, "create"), "create")
        request = pb.CreateClusterRequest(
            name=name,
            config=given(planned, "kafka_config") or {},
            client_auth=[CLIENT_AUTH[m] for m in given(planned, "client_authentication") or ()],
            tags=given(planned, "tags") or {},
        )
        if known(planned.get("broker_count")):
            request.broker_count = int(planned["broker_count"])
        if known(planned.get("broker_type")):
            request.broker_type = planned["broker_type"]
        if known(planned.get("storage_mode")):
            request.storage_mode = STORAGE_MODES[planned["storage_mode"]]
        wanted = wanted_revision(planned.get("configuration_info"))
        revision = find_revision(api, wanted) if wanted else None
        if wanted:
            request.configuration_info.CopyFrom(
                pb.ConfigurationInfo(name=wanted.name, revision=wanted.revision)
            )
        api.call(api.clusters.CreateCluster, request)
        cluster = ClusterWaiter(api, name, deadline, planned).idle()
        return state_of(cluster, planned, self.SCHEMA, revision)

    def do_read(self, current: State) -> State | None:
        api = self.api()
        cluster = get_cluster(api, current["name"])
        return None if cluster is None else read_state(api, cluster, current, self.SCHEMA)

    def do_plan(self, current: State, planned: State, changed: set[str]) -> State:
        before, after = current.get("configuration_info"), planned.get("configuration_info")
        if before is not None and after is None:
            name = before.get("name") or before.get("arn")
            raise ProviderError(
                f"Cluster {current['name']!r} cannot leave its configuration ({name}, "
                f"revision {before.get('revision')})",
                "The API keeps the configuration revision a cluster uses until it moves to "
                "another: keep a `configuration_info` block (another revision or configuration "
                "is applied in place), or replace the cluster (`terraform apply -replace=...`).",
                ["configuration_info"],
            )
        if before != after:
            changed = changed | {"configuration_info"}
        if changed & {"broker_count", "client_authentication"}:
            modes = planned.get("client_authentication")
            for field, mode in BOOTSTRAP.items():
                if not known(modes) or AUTH_NAME[mode] in modes:
                    planned[field] = Unknown  # other brokers, or a new listener
                else:
                    planned[field] = ""  # a mode the cluster will not have
        if changed - {"timeouts"} and current.get("state") != "ACTIVE":
            planned["state"] = Unknown
        return planned

    def do_update(self, current: State, planned: State) -> State:
        api = self.api()
        name = current["name"]
        waiter = ClusterWaiter(
            api, name, Deadline(self.TIMEOUTS.of(planned, "update"), "update"), planned
        )
        modes = planned.get("client_authentication")
        count = planned.get("broker_count")

        def run(method: Any, request: Any) -> pb.Cluster:
            waiter.idle(failed_ok=True)  # an operation in progress (a heal...) ends first
            retry_busy(api, waiter.deadline, lambda: api.call(method, request))
            return waiter.idle()

        tags = given(planned, "tags") or {}
        if tags != (given(current, "tags") or {}):  # at once, in any state: nothing restarts
            labels = pb.UpdateClusterTagsRequest(name=name, tags=tags)
            retry_busy(
                api, waiter.deadline, lambda: api.call(api.clusters.UpdateClusterTags, labels)
            )
        cluster = None
        wanted = wanted_revision(planned.get("configuration_info"))
        revision = find_revision(api, wanted) if wanted else None
        if wanted and planned.get("configuration_info") != current.get("configuration_info"):
            info = pb.ConfigurationInfo(name=wanted.name, revision=wanted.revision)
            move = pb.UpdateClusterConfigurationRequest(name=name, configuration_info=info)
            cluster = run(api.clusters.UpdateClusterConfiguration, move)
        found = cluster or waiter.idle(failed_ok=True)
        pending, removed = config_changes(
            found.config,
            dict(revision.server_properties) if revision else {},
            given(planned, "kafka_config") or {},
        )
        if known(modes) and modes != current.get("client_authentication"):
            request = pb.UpdateClusterSecurityRequest(
                name=name, client_auth=[CLIENT_AUTH[m] for m in modes], config=pending
            )
            cluster, pending = run(api.clusters.UpdateClusterSecurity, request), {}
        if known(count) and int(count) != current.get("broker_count"):
            request = pb.UpdateBrokerCountRequest(
                name=name, broker_count=int(count), config=pending
            )
            cluster, pending = run(api.clusters.UpdateBrokerCount, request), {}
        if pending or removed:
            request = pb.UpdateClusterConfigRequest(name=name, config=pending, remove=removed)
            cluster = run(api.clusters.UpdateClusterConfig, request)
        return state_of(cluster or found, planned, self.SCHEMA, revision)

    def do_delete(self, current: State) -> None:
        api = self.api()
        name = current["name"]
        try:
            api.call(api.clusters.DeleteCluster, pb.DeleteClusterRequest(name=name))
        except ApiError as exc:
            if exc.reason == epb.CLUSTER_NOT_FOUND:
                return
            raise
        ClusterWaiter(
            api, name, Deadline(self.TIMEOUTS.of(current, "delete"), "delete"), current
        ).gone()

    def do_import(self, id_: str) -> State | None:
        api = self.api()
        cluster = get_cluster(api, id_)
        return None if cluster is None else read_state(api, cluster, None, self.SCHEMA)


# ---------------------------------------------------------------------- data sources


class ClusterData(DataSourceBase):
    NAME = "cluster"
    SCHEMA = Schema(
        version=0,
        description="An existing cluster (MSK's `aws_msk_cluster` data source).",
        attributes=[
            Attribute("name", String(), description="The cluster's name.", required=True),
            *COMPUTED,
            Attribute("broker_count", Number(), description="Number of brokers.", computed=True),
            Attribute(
                "broker_type", String(), description="Instance type (MSK's names).", computed=True
            ),
            Attribute(
                "kafka_config",
                MapOf(String()),
                description="Its broker settings (Kafka's names), its configuration revision's "
                "included.",
                computed=True,
            ),
            Attribute(
                "client_authentication",
                ListOf(String()),
                description="Its client-authentication modes: none, scram, tls.",
                computed=True,
            ),
            Attribute("storage_mode", String(), description="TIERED or LOCAL.", computed=True),
            Attribute("tags", MapOf(String()), description="Its tags.", computed=True),
        ],
    )

    def do_read(self, config: State) -> State:
        name = config["name"]
        cluster = get_cluster(self.api(), name)
        if cluster is None:
            raise ProviderError(
                f"No cluster named {name!r}",
                "Check `name`; `cloudctl list-clusters` lists the clusters.",
                ["name"],
            )
        state = state_of(cluster, None, self.SCHEMA)
        state.update(kafka_config=dict(cluster.config), tags=dict(cluster.tags))
        return state


class BootstrapBrokersData(DataSourceBase):
    NAME = "bootstrap_brokers"
    SCHEMA = Schema(
        version=0,
        description="The bootstrap strings of a cluster (MSK's `aws_msk_bootstrap_brokers`).",
        attributes=[
            Attribute("cluster", String(), description="The cluster's name.", required=True),
            *[a for a in COMPUTED if a.name in BOOTSTRAP],
        ],
    )

    def do_read(self, config: State) -> State:
        api = self.api()
        name = config["cluster"]
        reply = api.call(api.clusters.GetBootstrapBrokers, pb.GetBootstrapBrokersRequest(name=name))
        return {
            "cluster": name,
            "bootstrap_brokers": reply.bootstrap_broker_string,
            "bootstrap_brokers_sasl_scram": reply.bootstrap_broker_string_sasl_scram,
            "bootstrap_brokers_tls": reply.bootstrap_broker_string_tls,
        }
