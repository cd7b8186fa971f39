"""The admin APIs on the wire: every version kio has, and the cases clients rarely send.

Requests are built with kio for each version (fields a version lacks are dropped), sent
with the raw client to a real broker process, and the answers checked field by field.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from tests.conftest import BrokerProcess, unique
from tests.support.raw_client import RawClient
from tests.support.records import (
    fetch_request,
    metadata_request,
    partition_response,
    produce_request,
)
from wire.framing import build, kio_versions
from wire.record_batch import encode_batch

CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 19, 20, 21
DESCRIBE_CONFIGS, ALTER_CONFIGS, CREATE_PARTITIONS = 32, 33, 37
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 44, 60
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SECONDS = datetime.timedelta(seconds=30)
ZERO_UUID = uuid.UUID(int=0)


def versions(api_key: int) -> list[int]:
    found = kio_versions(api_key)
    assert found is not None
    return list(range(found[0], found[1] + 1))


class Req:
    """Builds request entities of one API version from keyword values."""

    def __init__(self, api_key: int, version: int) -> None:
        self.module = load_payload_module(api_key, version, EntityType.request)
        self.version = version

    def __getattr__(self, entity: str) -> Any:
        cls = getattr(self.module, entity)
        return lambda **values: build(cls, **values)


def call(bootstrap: str, request: Any) -> Any:
    with RawClient(bootstrap) as client:
        return client.request(request)


def create_topics_request(version: int, *topics: Any, validate_only: bool = False) -> Any:
    r = Req(CREATE_TOPICS, version)
    return r.CreateTopicsRequest(
        topics=tuple(
            r.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=-1,
                assignments=(),
                configs=tuple(r.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()),
            )
            for name, partitions, configs in topics
        ),
        timeout=SECONDS,
        validate_only=validate_only,
    )


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    response = call(bootstrap, create_topics_request(7, (name, partitions, configs)))
    assert response.topics[0].error_code == ErrorCode.none, response


def delete_topics_request(version: int, *topics: str | uuid.UUID | None) -> Any:
    r = Req(DELETE_TOPICS, version)
    if version < 6:
        return r.DeleteTopicsRequest(topic_names=tuple(topics), timeout=SECONDS)
    states = tuple(
        r.DeleteTopicState(name=None, topic_id=t)
        if isinstance(t, uuid.UUID)
        else r.DeleteTopicState(name=t, topic_id=ZERO_UUID)
        for t in topics
    )
    return r.DeleteTopicsRequest(topics=states, timeout=SECONDS)


def describe_configs_request(
    version: int, *resources: tuple[int, str, tuple[str, ...] | None], docs: bool = True
) -> Any:
    r = Req(DESCRIBE_CONFIGS, version)
    return r.DescribeConfigsRequest(
        resources=tuple(
            r.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=k)
            for t, n, k in resources
        ),
        include_synonyms=True,
        include_documentation=docs,
    )


def incremental_request(
    version: int, resource_type: int, name: str, *ops: tuple[str, int, str | None]
) -> Any:
    r = Req(INCREMENTAL_ALTER_CONFIGS, version)
    return r.IncrementalAlterConfigsRequest(
        resources=(
            r.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=tuple(
                    r.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                ),
            ),
        ),
        validate_only=False,
    )


def topic_configs(bootstrap: str, topic: str) -> dict[str, Any]:
    response = call(bootstrap, describe_configs_request(4, (TOPIC, topic, None)))
    (result,) = response.results
    assert result.error_code == ErrorCode.none, result
    return {c.name: c for c in result.configs}


def produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    with RawClient(bootstrap) as client:
        # now, not a fixed old time: retention.ms (7 days) would expire the records at the
        # broker's next retention check and move the log start under the test
        now = int(time.time() * 1000)
        batch = encode_batch([(b"k", b"v%d" % i) for i in range(n)], timestamp_ms=now)
        part = partition_response(
            client.request(produce_request(topic, batch, partition=partition))
        )
        assert part.error_code == ErrorCode.none, part


def metadata_error(bootstrap: str, topic: str) -> ErrorCode:
    response = call(bootstrap, metadata_request(topic))
    code: ErrorCode = response.topics[0].error_code
    return code


# --------------------------------------------------------------------------- every version


@pytest.mark.parametrize("version", versions(CREATE_TOPICS))
def test_create_topics_every_version(broker: BrokerProcess, version: int) -> None:
    name = unique(f"ct-v{version}")
    request = create_topics_request(
        version, (name, 2, {"retention.ms": "60000"}), (name + "x", 0, {})
    )
    ok, bad = call(broker.bootstrap, request).topics
    assert (ok.name, ok.error_code) == (name, ErrorCode.none)
    assert (bad.error_code, bad.error_message if version >= 1 else None) == (
        ErrorCode.invalid_partitions,
        "Number of partitions was set to an invalid non-positive value.",
    )
    if version >= 5:
        assert (ok.num_partitions, ok.replication_factor) == (2, 1)
        configs = {c.name: c for c in ok.configs}
        assert configs["retention.ms"].value == "60000"
        assert configs["retention.ms"].config_source == 1
        assert configs["segment.bytes"].config_source == 5
        assert (bad.num_partitions, bad.replication_factor, bad.configs) == (-1, -1, ())
    if version >= 7:
        assert ok.topic_id not in (None, ZERO_UUID)
    assert metadata_error(broker.bootstrap, name) == ErrorCode.none


@pytest.mark.parametrize("version", versions(DELETE_TOPICS))
def test_delete_topics_every_version(broker: BrokerProcess, version: int) -> None:
    name = unique(f"dt-v{version}")
    create_topic(broker.bootstrap, name)
    missing = unique("dt-missing")
    response = call(broker.bootstrap, delete_topics_request(version, name, missing))
    results = {r.name: r for r in response.responses}
    assert results[name].error_code == ErrorCode.none
    assert results[missing].error_code == ErrorCode.unknown_topic_or_partition
    if version >= 5:
        assert results[missing].error_message == "This server does not host this topic-partition."
    assert metadata_error(broker.bootstrap, name) == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize("version", versions(CREATE_PARTITIONS))
def test_create_partitions_every_version(broker: BrokerProcess, version: int) -> None:
    name = unique(f"cp-v{version}")
    create_topic(broker.bootstrap, name)
    r = Req(CREATE_PARTITIONS, version)
    request = r.CreatePartitionsRequest(
        topics=(
            r.CreatePartitionsTopic(name=name, count=3, assignments=None),
            r.CreatePartitionsTopic(name=unique("cp-none"), count=3, assignments=None),
        ),
        timeout=SECONDS,
        validate_only=False,
    )
    grown, unknown = call(broker.bootstrap, request).results
    assert (grown.error_code, grown.error_message) == (ErrorCode.none, None)
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.unknown_topic_or_partition,
        None,
    )
    produce(broker.bootstrap, name, 2, partition=2)


@pytest.mark.parametrize("version", versions(DESCRIBE_CONFIGS))
def test_describe_configs_every_version(broker: BrokerProcess, version: int) -> None:
    name = unique(f"dc-v{version}")
    create_topic(broker.bootstrap, name, **{"cleanup.policy": "compact"})
    request = describe_configs_request(
        version,
        (TOPIC, name, ("cleanup.policy", "retention.ms")),
        (BROKER, "1", ("log.retention.ms", "node.id")),
        (TOPIC, unique("dc-none"), None),
    )
    topic, node, unknown = call(broker.bootstrap, request).results
    configs = {c.name: c for c in topic.configs}
    assert set(configs) == {"cleanup.policy", "retention.ms"}
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.read_only) == ("compact", 1, False)
    assert [(s.name, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", 1),
        ("log.cleanup.policy", 5),
    ]
    if version >= 3:
        assert policy.config_type == 7  # LIST
        assert policy.documentation
    settings = {c.name: c for c in node.configs}
    assert settings["log.retention.ms"].read_only is False
    assert settings["node.id"].read_only is True
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert unknown.configs == ()


@pytest.mark.parametrize("version", versions(ALTER_CONFIGS))
def test_alter_configs_every_version(broker: BrokerProcess, version: int) -> None:
    name = unique(f"ac-v{version}")
    create_topic(broker.bootstrap, name, **{"retention.ms": "60000"})
    r = Req(ALTER_CONFIGS, version)
    request = r.AlterConfigsRequest(
        resources=(
            r.AlterConfigsResource(
                resource_type=TOPIC,
                resource_name=name,
                configs=(r.AlterableConfig(name="segment.ms", value="120000"),),
            ),
        ),
        validate_only=False,
    )
    (result,) = call(broker.bootstrap, request).responses
    assert (result.error_code, result.resource_name) == (ErrorCode.none, name)
    configs = topic_configs(broker.bootstrap, name)
    assert (configs["segment.ms"].value, configs["segment.ms"].config_source) == ("120000", 1)
    assert configs["retention.ms"].config_source == 5  # replaced: back to the default


@pytest.mark.parametrize("version", versions(INCREMENTAL_ALTER_CONFIGS))
def test_incremental_alter_configs_every_version(broker: BrokerProcess, version: int) -> None:
    name = unique(f"iac-v{version}")
    create_topic(broker.bootstrap, name, **{"retention.ms": "60000"})
    request = incremental_request(
        version,
        TOPIC,
        name,
        ("segment.ms", 0, "120000"),
        ("retention.ms", 1, None),
        ("cleanup.policy", 2, "compact"),
    )
    (result,) = call(broker.bootstrap, request).responses
    assert result.error_code == ErrorCode.none, result
    configs = topic_configs(broker.bootstrap, name)
    assert configs["segment.ms"].value == "120000"
    assert configs["retention.ms"].config_source == 5
    assert configs["cleanup.policy"].value == "delete,compact"
    request = incremental_request(version, TOPIC, name, ("cleanup.policy", 3, "delete"))
    assert call(broker.bootstrap, request).responses[0].error_code == ErrorCode.none
    assert topic_configs(broker.bootstrap, name)["cleanup.policy"].value == "compact"


@pytest.mark.parametrize("version", versions(DELETE_RECORDS))
def test_delete_records_every_version(broker: BrokerProcess, version: int) -> None:
    name = unique(f"dr-v{version}")
    create_topic(broker.bootstrap, name)
    produce(broker.bootstrap, name, 5)
    r = Req(DELETE_RECORDS, version)

    def delete(offset: int) -> Any:
        request = r.DeleteRecordsRequest(
            topics=(
                r.DeleteRecordsTopic(
                    name=name,
                    partitions=(r.DeleteRecordsPartition(partition_index=0, offset=offset),),
                ),
            ),
            timeout=SECONDS,
        )
        return call(broker.bootstrap, request).topics[0].partitions[0]

    assert (delete(2).low_watermark, delete(2).error_code) == (2, ErrorCode.none)
    assert delete(1).low_watermark == 2  # never backwards
    assert (delete(6).low_watermark, delete(6).error_code) == (-1, ErrorCode.offset_out_of_range)
    assert delete(-2).error_code == ErrorCode.offset_out_of_range
    assert delete(-1).low_watermark == 5  # -1: the high watermark
    with RawClient(broker.bootstrap) as client:
        part = partition_response(client.request(fetch_request(name, 0)))
    assert part.error_code == ErrorCode.offset_out_of_range
    assert part.log_start_offset == 5


@pytest.mark.parametrize("version", versions(DESCRIBE_CLUSTER))
def test_describe_cluster_every_version(broker: BrokerProcess, version: int) -> None:
    r = Req(DESCRIBE_CLUSTER, version)
    request = r.DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1, include_fenced_brokers=True
    )
    response = call(broker.bootstrap, request)
    assert response.error_code == ErrorCode.none
    assert response.controller_id == 1
    (node,) = response.brokers
    assert (node.broker_id, f"{node.host}:{node.port}") == (1, broker.bootstrap)
    assert response.cluster_authorized_operations == 8096  # as Kafka without an authorizer
    quiet = call(
        broker.bootstrap,
        r.DescribeClusterRequest(
            include_cluster_authorized_operations=False, include_fenced_brokers=False
        ),
    )
    assert quiet.cluster_authorized_operations == -(2**31)
    if version >= 1:
        wrong = call(
            broker.bootstrap,
            r.DescribeClusterRequest(
                include_cluster_authorized_operations=False,
                endpoint_type=2,
                include_fenced_brokers=False,
            ),
        )
        assert wrong.error_code == ErrorCode.mismatched_endpoint_type
        assert wrong.error_message == (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            "type CONTROLLER"
        )


# --------------------------------------------------------------------------- cases


def test_delete_topics_by_id_and_bad_references(broker: BrokerProcess) -> None:
    name, twice = unique("by-id"), unique("twice")
    create_topic(broker.bootstrap, name, 2)
    create_topic(broker.bootstrap, twice)
    (topic,) = call(broker.bootstrap, metadata_request(name)).topics
    r = Req(DELETE_TOPICS, 6)
    request = r.DeleteTopicsRequest(
        topics=(
            r.DeleteTopicState(name=None, topic_id=topic.topic_id),
            r.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
            r.DeleteTopicState(name=twice, topic_id=ZERO_UUID),
            r.DeleteTopicState(name=twice, topic_id=ZERO_UUID),
            r.DeleteTopicState(name=None, topic_id=ZERO_UUID),
            r.DeleteTopicState(name=twice, topic_id=topic.topic_id),
        ),
        timeout=SECONDS,
    )
    results = [
        (r.name, r.error_code, r.error_message) for r in call(broker.bootstrap, request).responses
    ]
    assert results == [
        (name, ErrorCode.none, None),
        (None, ErrorCode.unknown_topic_id, "This server does not host this topic ID."),
        (twice, ErrorCode.invalid_request, "Duplicate topic name."),
        (None, ErrorCode.invalid_request, "Neither topic name nor id were specified."),
        (twice, ErrorCode.invalid_request, "You may not specify both topic name and topic id."),
    ]
    assert metadata_error(broker.bootstrap, name) == ErrorCode.unknown_topic_or_partition
    assert metadata_error(broker.bootstrap, twice) == ErrorCode.none
    data_dir = broker.data_dir
    assert not list(data_dir.glob(f"{name}-*")), "partition directories left behind"


def test_internal_topics_are_protected(broker: BrokerProcess) -> None:
    offsets = "__consumer_offsets"
    f = Req(10, 4)  # FindCoordinator creates the offsets topic, as in Kafka
    call(broker.bootstrap, f.FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)))
    response = call(broker.bootstrap, delete_topics_request(6, offsets))
    assert response.responses[0].error_code == ErrorCode.invalid_topic_exception
    r = Req(CREATE_PARTITIONS, 3)
    grow = r.CreatePartitionsRequest(
        topics=(r.CreatePartitionsTopic(name=offsets, count=100, assignments=None),),
        timeout=SECONDS,
        validate_only=False,
    )
    assert call(broker.bootstrap, grow).results[0].error_code == ErrorCode.invalid_topic_exception
    d = Req(DELETE_RECORDS, 2)
    request = d.DeleteRecordsRequest(
        topics=(
            d.DeleteRecordsTopic(
                name=offsets, partitions=(d.DeleteRecordsPartition(partition_index=0, offset=0),)
            ),
        ),
        timeout=SECONDS,
    )
    part = call(broker.bootstrap, request).topics[0].partitions[0]
    assert part.error_code == ErrorCode.invalid_topic_exception
    assert metadata_error(broker.bootstrap, offsets) == ErrorCode.none


def test_create_topics_request_limits_and_manual_assignment(broker: BrokerProcess) -> None:
    r = Req(CREATE_TOPICS, 7)
    manual = unique("manual")
    request = r.CreateTopicsRequest(
        topics=(
            r.CreatableTopic(
                name=manual,
                num_partitions=-1,
                replication_factor=-1,
                assignments=tuple(
                    r.CreatableReplicaAssignment(partition_index=i, broker_ids=(1,))
                    for i in range(3)
                ),
                configs=(),
            ),
            r.CreatableTopic(
                name=unique("elsewhere"),
                num_partitions=-1,
                replication_factor=-1,
                assignments=(r.CreatableReplicaAssignment(partition_index=0, broker_ids=(2,)),),
                configs=(),
            ),
        ),
        timeout=SECONDS,
        validate_only=False,
    )
    ok, elsewhere = call(broker.bootstrap, request).topics
    assert (ok.error_code, ok.num_partitions, ok.replication_factor) == (ErrorCode.none, 3, 1)
    assert elsewhere.error_code == ErrorCode.invalid_replica_assignment
    assert elsewhere.error_message == (
        "The manual partition assignment includes broker 2, but no such broker is registered."
    )
    huge = create_topics_request(7, (unique("big1"), 6000, {}), (unique("big2"), 6000, {}))
    results = call(broker.bootstrap, huge).topics
    assert {(t.error_code, t.error_message) for t in results} == {
        (ErrorCode.policy_violation, "Excessively large number of partitions per request.")
    }


def test_describe_configs_refuses_unknown_resource_types(broker: BrokerProcess) -> None:
    request = describe_configs_request(4, (TOPIC, "__consumer_offsets", None), (99, "x", None))
    results = call(broker.bootstrap, request).results
    assert [r.error_code for r in results] == [ErrorCode.invalid_request] * 2
    request = describe_configs_request(4, (BROKER_LOGGER, "1", None), (BROKER, "", None))
    logger, cluster = call(broker.bootstrap, request).results
    assert logger.error_code == ErrorCode.invalid_request
    assert (cluster.error_code, cluster.configs) == (ErrorCode.none, ())


def test_topic_config_changes_apply_at_once(broker: BrokerProcess) -> None:
    name = unique("limits")
    create_topic(broker.bootstrap, name)
    produce(broker.bootstrap, name, 20)
    request = incremental_request(1, TOPIC, name, ("max.message.bytes", 0, "100"))
    assert call(broker.bootstrap, request).responses[0].error_code == ErrorCode.none
    with RawClient(broker.bootstrap) as client:
        batch = encode_batch([(b"k", b"x" * 200)], timestamp_ms=1000)
        part = partition_response(client.request(produce_request(name, batch)))
    assert part.error_code == ErrorCode.message_too_large


def test_delete_and_recreate_pipelined(broker: BrokerProcess) -> None:
    """A CreateTopics right behind the DeleteTopics of the same name gets a fresh topic."""
    name = unique("pipelined")
    create_topic(broker.bootstrap, name)
    produce(broker.bootstrap, name, 3)
    with RawClient(broker.bootstrap) as client:
        delete = delete_topics_request(6, name)
        create = create_topics_request(7, (name, 1, {}))
        client.send(delete)
        client.send(create)
        _, deleted = client.receive(delete)
        _, created = client.receive(create)
    assert deleted.responses[0].error_code == ErrorCode.none
    assert created.topics[0].error_code == ErrorCode.none
    with RawClient(broker.bootstrap) as client:
        part = partition_response(client.request(fetch_request(name, 0)))
    assert (part.error_code, part.high_watermark) == (ErrorCode.none, 0)
    produce(broker.bootstrap, name, 1)


def test_long_poll_on_deleted_topic_is_answered(broker: BrokerProcess) -> None:
    name = unique("polled")
    create_topic(broker.bootstrap, name)
    produce(broker.bootstrap, name, 2)
    # The fetch could wait ten minutes; the socket gives up after 60 s: only the deletion
    # can answer it in time, and it must say the partition is gone.
    with RawClient(broker.bootstrap, timeout=60) as poller:
        poller.send(fetch_request(name, 2, max_wait_ms=600_000))
        call(broker.bootstrap, delete_topics_request(6, name))
        _, response = poller.receive(fetch_request(name, 2))
    partition = response.responses[0].partitions[0]
    assert partition.records in (None, b"")
    assert partition.error_code == ErrorCode.unknown_topic_or_partition


# --------------------------------------------------------------------------- restarts


@pytest.fixture
def own_broker(make_broker: Any) -> BrokerProcess:
    proc: BrokerProcess = make_broker({"delete.topic.enable": "false"})
    return proc


def test_deletion_disabled_and_dynamic_configs_survive_restart(own_broker: BrokerProcess) -> None:
    bootstrap = own_broker.bootstrap
    name = unique("kept")
    create_topic(bootstrap, name)
    old = call(bootstrap, delete_topics_request(1, name)).responses[0]
    assert old.error_code == ErrorCode.invalid_request
    new = call(bootstrap, delete_topics_request(6, name)).responses[0]
    assert (new.error_code, new.error_message) == (
        ErrorCode.topic_deletion_disabled,
        "Topic deletion is disabled.",
    )

    cluster = incremental_request(1, BROKER, "", ("log.retention.ms", 0, "7200000"))
    node = incremental_request(1, BROKER, "1", ("log.segment.bytes", 0, "2097152"))
    for request in (cluster, node):
        assert call(bootstrap, request).responses[0].error_code == ErrorCode.none
    refused = incremental_request(1, BROKER, "1", ("delete.topic.enable", 0, "true"))
    result = call(bootstrap, refused).responses[0]
    assert (result.error_code, result.error_message) == (
        ErrorCode.invalid_request,
        "Cannot update these configs dynamically: [delete.topic.enable]",
    )

    own_broker.restart()
    configs = topic_configs(bootstrap, name)
    retention, segment = configs["retention.ms"], configs["segment.bytes"]
    assert (retention.value, retention.config_source) == ("7200000", 3)
    assert (segment.value, segment.config_source) == ("2097152", 2)
    assert [s.source for s in segment.synonyms] == [2, 5]
    response = call(bootstrap, describe_configs_request(4, (BROKER, "", None)))
    assert [(c.name, c.value) for c in response.results[0].configs] == [
        ("log.retention.ms", "7200000")
    ]
    assert metadata_error(bootstrap, name) == ErrorCode.none


def test_data_dir_has_no_leftovers(make_broker: Any) -> None:
    proc: BrokerProcess = make_broker()
    name = unique("gone")
    create_topic(proc.bootstrap, name, 3)
    produce(proc.bootstrap, name, 4, partition=1)
    assert len(list(proc.data_dir.glob(f"{name}-*"))) == 3
    call(proc.bootstrap, delete_topics_request(6, name))
    assert not [p for p in proc.data_dir.iterdir() if p.name.startswith(name)]
