"""``sluice_topic`` (resource and data source): a Kafka topic of a cluster, managed through
the control plane's Topics API (no Kafka client needed).

Partitions grow in place (CreatePartitions); a smaller count is refused when Terraform
plans, since Kafka cannot remove partitions. Topic settings change in place (incremental
alter configs); a new cluster, name or replication factor replaces the topic. Import id:
``CLUSTER/NAME``.

``config`` holds the topic-level overrides. The control plane gives a topic with 3 replicas
``min.insync.replicas=2`` unless told otherwise (MSK's default): that override is not shown
as drift while the configuration does not name the key.
"""

from __future__ import annotations

from typing import Any

from tf.schema import Attribute, Schema
from tf.types import Number, String
from tf.utils import Diagnostics

from proto.sluice.v1 import errors_pb2 as epb
from proto.sluice.v1 import topics_pb2 as pb
from sluice_client.client import ApiError
from terraform.api import Api, ProviderError
from terraform.common import (
    DataSourceBase,
    Deadline,
    MapOf,
    ResourceBase,
    State,
    Timeouts,
    blank,
    create_busy,
    given,
    id_parts,
    known,
    map_value,
    retry_busy,
)

IMPLIED = ("min.insync.replicas", "2", 3)
"""(key, value, replication factor): the override the control plane adds by itself."""
GONE = (epb.TOPIC_NOT_FOUND, epb.CLUSTER_NOT_FOUND)
REPLACING = frozenset({"cluster", "name", "replication_factor"})


def overrides(topic: pb.Topic, declared: Any) -> dict[str, str]:
    """The topic's overrides without the one the control plane implied (unless declared)."""
    found = dict(topic.config)
    key, value, factor = IMPLIED
    names = declared if isinstance(declared, dict) else {}
    if topic.replication_factor == factor and found.get(key) == value and key not in names:
        del found[key]
    return found


def describe(api: Api, cluster: str, name: str) -> pb.Topic | None:
    try:
        topic: pb.Topic = api.call(
            api.topics.DescribeTopic, pb.DescribeTopicRequest(cluster=cluster, name=name)
        )
    except ApiError as exc:
        if exc.reason in GONE:
            return None
        raise
    return topic


def _whole(diags: Diagnostics, config: State, field: str, minimum: int) -> None:
    value = config.get(field)
    if known(value) and (value != int(value) or value < minimum):
        diags.add_error(
            f"{field} must be a whole number of at least {minimum}, not {value}",
            f"Give `{field}` as a whole number, or leave it out for the cluster's default.",
            path=[field],
        )


class TopicResource(ResourceBase):
    NAME = "topic"
    TIMEOUTS = Timeouts(create=5 * 60, update=5 * 60, delete=5 * 60)
    CONFIG_MAP = "config"
    SCHEMA = Schema(
        version=0,
        description="A topic of a cluster (Redpanda's `redpanda_topic`). Import id: "
        "`CLUSTER/NAME`.",
        attributes=[
            Attribute("id", String(), description="`CLUSTER/NAME`.", computed=True),
            Attribute(
                "cluster",
                String(),
                description="Name of the cluster (e.g. `sluice_cluster.x.name`); a new one "
                "replaces the topic.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "name",
                String(),
                description="Topic name (Kafka's rules); a new name replaces the topic.",
                required=True,
                requires_replace=True,
            ),
            Attribute(
                "partitions",
                Number(),
                description="Number of partitions (default: the brokers' `num.partitions`). "
                "Grows in place; a smaller number is refused at plan time (Kafka cannot remove "
                "partitions).",
                optional=True,
                computed=True,
            ),
            Attribute(
                "replication_factor",
                Number(),
                description="Replicas per partition, 1 to the number of brokers (default: "
                "min(3, brokers), as MSK). A new value replaces the topic.",
                optional=True,
                computed=True,
                requires_replace=True,
            ),
            Attribute(
                "config",
                MapOf(String()),
                description="Topic settings, Kafka's names (`retention.ms`, `cleanup.policy`, "
                "`remote.storage.enable` for tiered storage, ...). Changed in place; a key "
                "removed returns to the cluster's default.",
                optional=True,
            ),
            Attribute(
                "topic_id", String(), description="Kafka's topic id (a UUID).", computed=True
            ),
        ],
        block_types=[TIMEOUTS.block()],
    )

    def check(self, diags: Diagnostics, config: State) -> None:
        _whole(diags, config, "partitions", 1)
        _whole(diags, config, "replication_factor", 1)

    def state_of(self, topic: pb.Topic, prior: State | None) -> State:
        prior = prior or {}
        state = blank(self.SCHEMA)
        state.update(
            id=f"{topic.cluster}/{topic.name}",
            cluster=topic.cluster,
            name=topic.name,
            partitions=topic.partitions,
            replication_factor=topic.replication_factor,
            config=map_value(prior.get("config"), overrides(topic, prior.get("config"))),
            topic_id=topic.topic_id,
            timeouts=prior.get("timeouts"),
        )
        return state

    def _settled(self, api: Api, cluster: str, name: str, deadline: Deadline) -> pb.Topic:
        def found() -> pb.Topic:
            topic = describe(api, cluster, name)
            if topic is None:
                raise ProviderError(
                    f"Topic {name!r} of cluster {cluster!r} is gone",
                    "Something deleted it meanwhile; apply again to create it.",
                )
            return topic

        return retry_busy(api, deadline, found)

    def do_create(self, planned: State) -> State:
        api = self.api()
        cluster, name = planned["cluster"], planned["name"]
        deadline = Deadline(self.TIMEOUTS.of(planned, "create"), "create")
        request = pb.CreateTopicRequest(
            cluster=cluster, name=name, config=given(planned, "config") or {}
        )
        if known(planned.get("partitions")):
            request.partitions = int(planned["partitions"])
        if known(planned.get("replication_factor")):
            request.replication_factor = int(planned["replication_factor"])
        create_busy(api, deadline, lambda: api.call(api.topics.CreateTopic, request))
        return self.state_of(self._settled(api, cluster, name, deadline), planned)

    def do_read(self, current: State) -> State | None:
        topic = describe(self.api(), current["cluster"], current["name"])
        return None if topic is None else self.state_of(topic, current)

    def do_plan(self, current: State, planned: State, changed: set[str]) -> State:
        before, after = current.get("partitions"), planned.get("partitions")
        if changed & REPLACING or not (known(before) and known(after)) or after >= before:
            return planned
        raise ProviderError(
            f"Topic {current['name']!r}: partitions cannot shrink from {before} to {after}",
            f"Kafka cannot remove partitions. Keep `partitions` at {before} or more; to start "
            "over with fewer, give the topic a new name (it is replaced and its records are "
            "lost).",
            ["partitions"],
        )

    def do_update(self, current: State, planned: State) -> State:
        api = self.api()
        cluster, name = current["cluster"], current["name"]
        deadline = Deadline(self.TIMEOUTS.of(planned, "update"), "update")
        count = planned.get("partitions")
        if known(count) and int(count) > current["partitions"]:
            grow = pb.AddPartitionsRequest(cluster=cluster, name=name, total=int(count))
            retry_busy(api, deadline, lambda: api.call(api.topics.AddPartitions, grow))
        old = given(current, "config") or {}
        new = given(planned, "config") or {}
        changed = {k: v for k, v in new.items() if old.get(k) != v}
        removed = [k for k in old if k not in new]
        if changed or removed:
            alter = pb.AlterTopicConfigRequest(
                cluster=cluster, name=name, config=changed, remove=removed
            )
            retry_busy(api, deadline, lambda: api.call(api.topics.AlterTopicConfig, alter))
        return self.state_of(self._settled(api, cluster, name, deadline), planned)

    def do_delete(self, current: State) -> None:
        api = self.api()
        deadline = Deadline(self.TIMEOUTS.of(current, "delete"), "delete")
        request = pb.DeleteTopicRequest(cluster=current["cluster"], name=current["name"])
        try:
            retry_busy(api, deadline, lambda: api.call(api.topics.DeleteTopic, request))
        except ApiError as exc:
            if exc.reason not in GONE:
                raise

    def do_import(self, id_: str) -> State | None:
        cluster, name = id_parts(id_, ("cluster", "name"), "sluice_topic")
        topic = describe(self.api(), cluster, name)
        return None if topic is None else self.state_of(topic, None)


class TopicData(DataSourceBase):
    NAME = "topic"
    SCHEMA = Schema(
        version=0,
        description="An existing topic.",
        attributes=[
            Attribute("id", String(), description="`CLUSTER/NAME`.", computed=True),
            Attribute("cluster", String(), description="Name of the cluster.", required=True),
            Attribute("name", String(), description="Topic name.", required=True),
            Attribute("partitions", Number(), description="Number of partitions.", computed=True),
            Attribute(
                "replication_factor", Number(), description="Replicas per partition.", computed=True
            ),
            Attribute(
                "config",
                MapOf(String()),
                description="Topic-level overrides (Kafka's names).",
                computed=True,
            ),
            Attribute("topic_id", String(), description="Kafka's topic id.", computed=True),
        ],
    )

    def do_read(self, config: State) -> State:
        cluster, name = config["cluster"], config["name"]
        topic = describe(self.api(), cluster, name)
        if topic is None:
            raise ProviderError(
                f"No topic {name!r} in cluster {cluster!r}",
                f"Check `cluster` and `name`; `cloudctl list-topics --cluster {cluster}` lists "
                "the topics.",
                ["name"],
            )
        return {
            "id": f"{topic.cluster}/{topic.name}",
            "cluster": topic.cluster,
            "name": topic.name,
            "partitions": topic.partitions,
            "replication_factor": topic.replication_factor,
            "config": dict(topic.config),
            "topic_id": topic.topic_id,
        }
