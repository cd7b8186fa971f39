"""Authorization with Kafka's semantics, Sluice beside Apache Kafka 4.3.1 configured the same
(StandardAuthorizer, ``super.users=User:ANONYMOUS`` for the PLAINTEXT admin listener,
``allow.everyone.if.no.acl.found=false``, a SASL_PLAINTEXT listener with SCRAM-SHA-512
users alice and bob, the same topics and the same ACLs).

Every probe is a raw request on an authenticated connection, so the error codes compared
are the brokers' own, not a client library's interpretation: Metadata without DESCRIBE
(listing hides the topic, asking for it is TOPIC_AUTHORIZATION_FAILED), produce without
WRITE, fetch and ListOffsets without READ / DESCRIBE, joining, committing and fetching
offsets without READ on the group, a DENY over an ALLOW, PREFIXED ACLs, CreateTopics and
DeleteTopics without CREATE / DELETE, InitProducerId without any WRITE, the ACL APIs
without cluster rights, and the authorized-operations bit fields."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
)
from confluent_kafka.admin import UserScramCredentialUpsertion as Upsert
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v8.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64
from scramp import ScramClient

from tests.security.conftest import users_file
from tests.security.test_kafka_differential import SaslKafka
from tests.support.broker import BrokerProcess
from tests.support.kafka_oracle import oracle_available
from tests.support.processes import free_ports
from tests.support.raw_client import RawClient
from wire.record_batch import Record, encode_batch

pytestmark = pytest.mark.oracle
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZED = {
    "authorizer.class.name": STANDARD,
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
    "auto.create.topics.enable": "false",
}
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
TOPICS = ["secret", "open", "payments", "payouts", "pub-a", "pub-b"]
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ACLS = [
    AclBinding(ResourceType.TOPIC, "open", LIT, "User:alice", "*", AclOperation.WRITE, ALLOW),
    AclBinding(ResourceType.TOPIC, "pub-", PRE, "User:alice", "*", AclOperation.DESCRIBE, ALLOW),
    AclBinding(ResourceType.TOPIC, "pay", PRE, "User:alice", "*", AclOperation.READ, ALLOW),
    AclBinding(ResourceType.TOPIC, "payments", LIT, "User:alice", "*", AclOperation.READ, DENY),
    AclBinding(ResourceType.TOPIC, "team-", PRE, "User:alice", "*", AclOperation.CREATE, ALLOW),
    AclBinding(ResourceType.GROUP, "readers", LIT, "User:alice", "*", AclOperation.READ, ALLOW),
]
TIMEOUT = 30


class AuthorizedKafka(SaslKafka):
    def server_properties(self) -> dict[str, str]:
        return {**super().server_properties(), **AUTHORIZED}


def _set_up(admin: AdminClient, *, kafka: bool) -> None:
    if kafka:  # Sluice's users come from its bootstrap file
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        upserts = [Upsert(u, info, p.encode()) for u, p in USERS.items()]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(TIMEOUT)
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
        future.result(TIMEOUT)
    for future in admin.create_acls(ACLS, request_timeout=TIMEOUT).values():
        future.result(TIMEOUT)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, str]]]:
    """name -> (PLAINTEXT admin address, SASL_PLAINTEXT address), the same set-up on each."""
    reason = oracle_available()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("authorization")
    users = users_file(work, [f"SCRAM-SHA-512=[name={u},password={p}]" for u, p in USERS.items()])
    port, sasl = free_ports(2)
    sluice = BrokerProcess(
        work / "sluice",
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.scram.bootstrap.users.file": str(users),
            **AUTHORIZED,
        },
        port=port,
    ).start()
    try:
        _set_up(AdminClient({"bootstrap.servers": sluice.bootstrap}), kafka=False)
        with AuthorizedKafka(work / "kafka") as kafka:
            _set_up(AdminClient({"bootstrap.servers": kafka.bootstrap}), kafka=True)
            yield {
                "sluice": (sluice.bootstrap, f"127.0.0.1:{sasl}"),
                "kafka": (kafka.bootstrap, f"127.0.0.1:{kafka.sasl_port}"),
            }
    finally:
        sluice.stop()
        sluice.kill()


def login(address: str, user: str) -> RawClient:
    """A connection authenticated as ``user`` (SCRAM-SHA-512)."""
    client = RawClient(address)
    assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code == 0
    scram = ScramClient(["SCRAM-SHA-512"], user, USERS[user])
    first = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode()))
    scram.set_server_first(first.auth_bytes.decode())
    final = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode()))
    assert final.error_code == 0, final.error_message
    return client


def metadata(client: RawClient, topics: list[str] | None, *, operations: bool = False) -> Any:
    return client.request(
        MetadataRequest(
            topics=None
            if topics is None
            else tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=operations,
        )
    )


def produce(client: RawClient, topic: str) -> int:
    batch = encode_batch([Record(offset=0, timestamp=0, key=None, value=b"v")])
    response = client.request(
        ProduceRequest(
            transactional_id=None,
            acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            topic_data=(
                TopicProduceData(
                    name=TopicName(topic),
                    partition_data=(PartitionProduceData(index=i32(0), records=Records(batch)),),
                ),
            ),
        )
    )
    return int(response.responses[0].partition_responses[0].error_code)


def fetch(client: RawClient, topic: str) -> int:
    response = client.request(
        FetchRequest(
            cluster_id=None,
            replica_id=i32(-1),
            max_wait=i32Timedelta.parse(datetime.timedelta(0)),
            min_bytes=i32(0),
            max_bytes=i32(1 << 20),
            isolation_level=i8(0),
            session_id=i32(0),
            session_epoch=i32(-1),
            topics=(
                FetchTopic(
                    topic=TopicName(topic),
                    partitions=(
                        FetchPartition(
                            partition=i32(0),
                            current_leader_epoch=i32(-1),
                            fetch_offset=i64(0),
                            last_fetched_epoch=i32(-1),
                            log_start_offset=i64(-1),
                            partition_max_bytes=i32(1 << 20),
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
    )
    return int(response.responses[0].partitions[0].error_code)


def list_offsets(client: RawClient, topic: str) -> int:
    response = client.request(
        ListOffsetsRequest(
            replica_id=i32(-1),
            isolation_level=i8(0),
            topics=(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=(
                        ListOffsetsPartition(
                            partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(-1)
                        ),
                    ),
                ),
            ),
        )
    )
    return int(response.topics[0].partitions[0].error_code)


def group_probes(client: RawClient, group: str) -> tuple[int, ...]:
    found = client.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)))
    join = client.request(
        JoinGroupRequest(
            group_id=GroupId(group),
            session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None,
        )
    )
    commit = client.request(
        OffsetCommitRequest(
            group_id=GroupId(group),
            generation_id_or_member_epoch=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(
                OffsetCommitRequestTopic(
                    name=TopicName("payouts"),
                    partitions=(
                        OffsetCommitRequestPartition(
                            partition_index=i32(0),
                            committed_offset=i64(0),
                            committed_leader_epoch=i32(-1),
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        )
    )
    fetched = client.request(
        OffsetFetchRequest(
            groups=(
                OffsetFetchRequestGroup(
                    group_id=GroupId(group),
                    topics=(
                        OffsetFetchRequestTopics(
                            name=TopicName("payouts"), partition_indexes=(i32(0),)
                        ),
                    ),
                ),
            ),
            require_stable=False,
        )
    )
    return (
        int(found.coordinators[0].error_code),
        int(join.error_code) if join.error_code != 79 else 0,  # MEMBER_ID_REQUIRED: allowed
        int(commit.topics[0].partitions[0].error_code),
        int(fetched.groups[0].error_code),
    )


def probes(address: str) -> dict[str, Any]:
    """What alice and bob get (error codes, visible topics, bit fields)."""
    with login(address, "alice") as alice:
        listed = metadata(alice, None, operations=True)
        visible = sorted(t.name for t in listed.topics if not t.name.startswith("__"))
        asked = metadata(alice, ["secret", "open", "pub-a", "missing"], operations=True)
        out: dict[str, Any] = {
            "visible": visible,
            "asked": [(t.name, int(t.error_code)) for t in asked.topics],
            "operations": {
                t.name: int(t.topic_authorized_operations)
                for t in asked.topics
                if t.error_code == 0
            },
            "produce secret": produce(alice, "secret"),
            "produce open": produce(alice, "open"),
            "fetch secret": fetch(alice, "secret"),
            "fetch payouts (PREFIXED allow)": fetch(alice, "payouts"),
            "fetch payments (DENY over ALLOW)": fetch(alice, "payments"),
            "list offsets secret": list_offsets(alice, "secret"),
            "list offsets payouts": list_offsets(alice, "payouts"),
            "group without READ": group_probes(alice, "others"),
            "init producer id": int(
                alice.request(
                    InitProducerIdRequest(
                        transactional_id=None,
                        transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
                        producer_id=i64(-1),
                        producer_epoch=i16(-1),
                    )
                ).error_code
            ),
            "create topics": _create(alice, ["nope", "team-1"]),
            "delete topics": _delete(alice, ["secret", "team-1"]),
            "describe configs secret": int(
                alice.request(
                    DescribeConfigsRequest(
                        resources=(
                            DescribeConfigsResource(
                                resource_type=i8(2), resource_name="secret", configuration_keys=None
                            ),
                        ),
                        include_synonyms=False,
                        include_documentation=False,
                    )
                )
                .results[0]
                .error_code
            ),
            "describe acls": int(alice.request(any_acls()).error_code),
        }
    with login(address, "bob") as bob:
        out["bob init producer id"] = int(
            bob.request(
                InitProducerIdRequest(
                    transactional_id=None,
                    transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
                    producer_id=i64(-1),
                    producer_epoch=i16(-1),
                )
            ).error_code
        )
        out["bob visible"] = sorted(
            t.name for t in metadata(bob, None).topics if not t.name.startswith("__")
        )
    return out


def _create(client: RawClient, names: list[str]) -> list[tuple[str, int]]:
    response = client.request(
        CreateTopicsRequest(
            topics=tuple(
                CreatableTopic(
                    name=TopicName(n),
                    num_partitions=i32(1),
                    replication_factor=i16(1),
                    assignments=(),
                    configs=(),
                )
                for n in names
            ),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            validate_only=True,
        )
    )
    return sorted((t.name, int(t.error_code)) for t in response.topics)


def _delete(client: RawClient, names: list[str]) -> list[tuple[str | None, int]]:
    response = client.request(
        DeleteTopicsRequest(
            topics=tuple(DeleteTopicState(name=TopicName(n), topic_id=None) for n in names),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        )
    )
    return sorted((t.name, int(t.error_code)) for t in response.responses)


def any_acls() -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=i8(1),
        resource_name_filter=None,
        pattern_type_filter=i8(1),
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )


def test_the_same_answers_as_kafka(both: dict[str, tuple[str, str]]) -> None:
    deadline = time.monotonic() + TIMEOUT  # ACLs reach a broker's image asynchronously
    while True:
        answers = {name: probes(sasl) for name, (_, sasl) in both.items()}
        if answers["sluice"] == answers["kafka"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert answers["sluice"] == answers["kafka"]
    seen = answers["sluice"]  # and what Kafka's semantics are, spelled out
    assert seen["visible"] == ["open", "payments", "payouts", "pub-a", "pub-b"]
    assert ("secret", 29) in seen["asked"]
    assert seen["produce secret"] == 29
    assert seen["produce open"] == 0
    assert seen["fetch payments (DENY over ALLOW)"] == 29
    assert seen["fetch payouts (PREFIXED allow)"] == 0
    assert seen["group without READ"][1:] == (30, 30, 30)
    assert seen["bob init producer id"] == 31
    assert seen["bob visible"] == []


def test_acls_apply_without_a_restart(both: dict[str, tuple[str, str]]) -> None:
    """A new ALLOW takes effect without a restart; its deletion too (on both)."""
    grant = AclBinding(ResourceType.TOPIC, "pub-b", LIT, "User:bob", "*", AclOperation.WRITE, ALLOW)
    for plaintext, sasl in both.values():
        admin = AdminClient({"bootstrap.servers": plaintext})
        with login(sasl, "bob") as bob:
            assert produce(bob, "pub-b") == 29
            for future in admin.create_acls([grant], request_timeout=TIMEOUT).values():
                future.result(TIMEOUT)
            _until(lambda b=bob: produce(b, "pub-b") == 0, "the ALLOW applies")
            revoke = AclBindingFilter(
                ResourceType.TOPIC, "pub-b", LIT, "User:bob", "*", AclOperation.WRITE, ALLOW
            )
            admin.delete_acls([revoke], request_timeout=TIMEOUT)[revoke].result(TIMEOUT)
            _until(lambda b=bob: produce(b, "pub-b") == 29, "the deletion applies")


def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
