"""GROUP config resources (type 32) on Sluice and on Apache Kafka 4.3: the same answers.

DescribeConfigs of a group (existing or not), IncrementalAlterConfigs and AlterConfigs with
valid and invalid values (Kafka's bounds and messages), DELETE back to the default, and
the same through confluent-kafka's admin client. Every group name is fresh per system, and
answers are compared as sets (Kafka lists group configs in hash order).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.conftest import unique
from tests.support.raw_client import RawClient
from wire.framing import build

pytestmark = pytest.mark.oracle

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
DC = load_payload_module(32, 4, EntityType.request)
IAC = load_payload_module(44, 1, EntityType.request)
AC = load_payload_module(33, 2, EntityType.request)

CASES: list[list[tuple[str, int, str | None]]] = [
    [("consumer.session.timeout.ms", SET, "50000")],
    [("consumer.session.timeout.ms", SET, "5")],
    [("consumer.session.timeout.ms", SET, "-5")],
    [("consumer.session.timeout.ms", SET, "60001")],
    [("consumer.session.timeout.ms", SET, "abc")],
    [("consumer.session.timeout.ms", SET, "2147483648")],
    [("no.such.key", SET, "1")],
    [("consumer.heartbeat.interval.ms", SET, "15001")],
    [("consumer.assignment.interval.ms", SET, "-1")],
    [("consumer.assignment.interval.ms", SET, "15001")],
    [("share.record.lock.duration.ms", SET, "100")],
    [("share.record.lock.duration.ms", SET, "1000")],
    [("share.delivery.count.limit", SET, "11")],
    [("share.partition.max.record.locks", SET, "4001")],
    [("share.auto.offset.reset", SET, "bogus")],
    [("share.auto.offset.reset", SET, "by_duration:PT1H")],
    [("share.auto.offset.reset", SET, "by_duration:-PT1H")],
    [("share.auto.offset.reset", APPEND, "latest")],
    [("share.isolation.level", SET, "READ_COMMITTED")],
    [("share.renew.acknowledge.enable", SET, "yes")],
    [("streams.num.standby.replicas", SET, "3")],
    [("streams.initial.rebalance.delay.ms", SET, "2147483647")],
    [("share.session.timeout.ms", SET, "45000"), ("share.heartbeat.interval.ms", SET, "15000")],
    [
        ("consumer.heartbeat.interval.ms", SET, "6000"),
        ("share.isolation.level", SET, "read_committed"),
    ],
    [("consumer.heartbeat.interval.ms", DELETE, None)],
]


def describe(client: RawClient, name: str, keys: tuple[str, ...] | None = None) -> Any:
    answer = client.request(
        build(
            DC.DescribeConfigsRequest,
            resources=(
                build(
                    DC.DescribeConfigsResource,
                    resource_type=GROUP,
                    resource_name=name,
                    configuration_keys=keys,
                ),
            ),
            include_synonyms=True,
            include_documentation=False,
        )
    )
    (result,) = answer.results
    return (
        result.error_code.name,
        result.error_message or "",
        sorted(
            (
                c.name,
                c.value,
                c.read_only,
                c.config_source,
                c.config_type,
                tuple((s.name, s.value, s.source) for s in c.synonyms),
            )
            for c in result.configs
        ),
    )


def incremental(client: RawClient, name: str, ops: list[tuple[str, int, str | None]]) -> Any:
    answer = client.request(
        build(
            IAC.IncrementalAlterConfigsRequest,
            resources=(
                build(
                    IAC.AlterConfigsResource,
                    resource_type=GROUP,
                    resource_name=name,
                    configs=tuple(
                        build(IAC.AlterableConfig, name=k, config_operation=op, value=v)
                        for k, op, v in ops
                    ),
                ),
            ),
            validate_only=False,
        )
    )
    (result,) = answer.responses
    return result.error_code.name, result.error_message


def legacy(client: RawClient, name: str, configs: dict[str, str]) -> Any:
    answer = client.request(
        build(
            AC.AlterConfigsRequest,
            resources=(
                build(
                    AC.AlterConfigsResource,
                    resource_type=GROUP,
                    resource_name=name,
                    configs=tuple(
                        build(AC.AlterableConfig, name=k, value=v) for k, v in configs.items()
                    ),
                ),
            ),
            validate_only=False,
        )
    )
    (result,) = answer.responses
    return result.error_code.name, result.error_message


def settled(client: RawClient, group: str, ops: list[tuple[str, int, str | None]]) -> Any:
    """The group's configs once they show ``ops`` (Kafka applies a committed change on its
    broker a moment after it answers the alter)."""
    deadline = time.monotonic() + 10
    while True:
        described = describe(client, group)
        shown = {c[0]: (c[1], c[3]) for c in described[2]}
        if (
            all(
                (op == SET and shown.get(k, (None,))[0] == v) or (op == DELETE and shown[k][1] != 8)
                for k, op, v in ops
            )
            or time.monotonic() > deadline
        ):
            return described
        time.sleep(0.05)


def scenario(bootstrap: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    group = unique("gcfg")
    with RawClient(bootstrap) as client:
        seen["describe unknown group"] = describe(client, unique("gcfg-none"))
        seen["describe empty name"] = describe(client, "")
        seen["alter empty name"] = incremental(client, "", CASES[0])
        for i, ops in enumerate(CASES):
            seen[f"case {i} {ops}"] = answer = incremental(client, group, ops)
            seen[f"case {i} after"] = settled(client, group, ops if answer[0] == "none" else [])
        seen["legacy"] = legacy(client, group, {"share.delivery.count.limit": "3"})
        seen["legacy after"] = settled(client, group, [("share.delivery.count.limit", SET, "3")])
        seen["legacy bad"] = legacy(client, group, {"share.delivery.count.limit": "30"})
        seen["selected keys"] = describe(client, group, ("share.delivery.count.limit",))
    return seen


def test_group_configs_match_kafka(both: dict[str, str]) -> None:
    ours, kafkas = scenario(both["sluice"]), scenario(both["kafka"])
    assert ours.keys() == kafkas.keys()
    differing = {k: (ours[k], kafkas[k]) for k in ours if ours[k] != kafkas[k]}
    assert not differing, differing
    assert len(kafkas["describe unknown group"][2]) == 17
    refused = [k for k, v in kafkas.items() if k.startswith("case") and v[0] == "invalid_config"]
    assert len(refused) == 19, refused
    final = {c[0]: (c[1], c[3]) for c in kafkas["legacy after"][2]}
    assert final["share.delivery.count.limit"] == ("3", 8)
    assert final["consumer.session.timeout.ms"] == ("45000", 5)  # legacy replaced the rest


def test_group_configs_through_confluent_kafka(sluice: Any) -> None:
    admin = AdminClient({"bootstrap.servers": sluice.bootstrap})
    group = unique("gcfg-ck")
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "consumer.session.timeout.ms",
                "55000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    (described,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    configs = described.result(timeout=30)
    assert configs["consumer.session.timeout.ms"].value == "55000"
    assert configs["consumer.heartbeat.interval.ms"].value == "5000"
