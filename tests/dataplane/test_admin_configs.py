"""Config validation and alter operations of the admin handlers, without a broker."""

from __future__ import annotations

import pytest

from dataplane.config import BROKER_CONFIGS, TOPIC_CONFIGS, rules
from dataplane.handlers import _configs
from dataplane.handlers._configs import AlterOp
from wire.errors import InvalidConfig, InvalidRequest, InvalidTopic


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        (
            "retention.ms",
            "1h",
            "Invalid value 1h for configuration retention.ms: Not a number of type LONG",
        ),
        (
            "segment.bytes",
            "4294967296",
            "Invalid value 4294967296 for configuration segment.bytes: Not a number of type INT",
        ),
        (
            "segment.bytes",
            "1_000",
            "Invalid value 1_000 for configuration segment.bytes: Not a number of type INT",
        ),
        (
            "retention.ms",
            "-2",
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        ),
        (
            "min.cleanable.dirty.ratio",
            "3",
            "Invalid value 3.0 for configuration "
            "min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        (
            "cleanup.policy",
            "compact,purge",
            "Invalid value purge for configuration "
            "cleanup.policy: String must be one of: compact, delete",
        ),
        (
            "unclean.leader.election.enable",
            "1",
            "Invalid value 1 for configuration "
            "unclean.leader.election.enable: Expected value to be either true or false",
        ),
    ],
)
def test_values_are_refused_with_kafkas_message(key: str, raw: str, message: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        rules.parse_value(TOPIC_CONFIGS[key], raw)
    assert info.value.message == message


def test_values_parse_as_the_log_manager_reads_them() -> None:
    assert rules.parse_value(TOPIC_CONFIGS["retention.ms"], " 60000 ") == 60000
    assert rules.parse_value(TOPIC_CONFIGS["cleanup.policy"], "compact, delete") == [
        "compact",
        "delete",
    ]
    assert rules.parse_value(TOPIC_CONFIGS["unclean.leader.election.enable"], "TRUE")
    assert rules.parse_value(TOPIC_CONFIGS["min.cleanable.dirty.ratio"], "0.25") == 0.25


def test_topic_config_sets() -> None:
    with pytest.raises(InvalidConfig, match=r"^Unknown topic config name: no\.such\.key$"):
        rules.validate_topic_configs({"retention.ms": "x", "no.such.key": "1"})
    with pytest.raises(InvalidConfig, match="Null value not supported for topic configs: a,b"):
        rules.validate_topic_configs({"a": None, "b": None})
    rules.validate_topic_configs({"retention.ms": "1000", "cleanup.policy": ""})


def test_broker_configs_are_dynamic_only_for_log_settings() -> None:
    assert "log.retention.ms" in _configs.DYNAMIC_BROKER_KEYS
    assert "num.partitions" not in _configs.DYNAMIC_BROKER_KEYS
    assert _configs.DYNAMIC_BROKER_KEYS.issubset(BROKER_CONFIGS)
    with pytest.raises(InvalidRequest, match=r"dynamically: \[node.id, num.partitions\]"):
        rules.validate_broker_configs({"num.partitions": "2", "node.id": "3"})
    with pytest.raises(InvalidRequest, match="Not a number of type INT"):
        rules.validate_broker_configs({"message.max.bytes": "big"})


def test_incremental_operations() -> None:
    ops = [
        ("retention.ms", AlterOp.SET, "5"),
        ("segment.ms", AlterOp.DELETE, None),
        ("cleanup.policy", AlterOp.APPEND, "compact"),
    ]
    result = _configs.apply_ops({"segment.ms": "9"}, ops, TOPIC_CONFIGS)
    assert result == {"retention.ms": "5", "cleanup.policy": "delete,compact"}
    again = _configs.apply_ops(
        result, [("cleanup.policy", AlterOp.APPEND, "compact")], TOPIC_CONFIGS
    )
    assert again == result  # appending what is there changes nothing
    removed = _configs.apply_ops(
        result, [("cleanup.policy", AlterOp.SUBTRACT, "delete,never")], TOPIC_CONFIGS
    )
    assert removed["cleanup.policy"] == "compact"
    with pytest.raises(InvalidConfig, match=r"Can.t APPEND to key retention\.ms because its type"):
        _configs.apply_ops({}, [("retention.ms", AlterOp.APPEND, "1")], TOPIC_CONFIGS)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        (
            "a/b",
            "Topic name is invalid: 'a/b' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        ),
    ],
)
def test_topic_names(name: str, message: str) -> None:
    with pytest.raises(InvalidTopic) as info:
        rules.check_topic_name(name)
    assert info.value.message == message


def test_collisions() -> None:
    assert rules.colliding_topic("a_b", ["a.b", "c"]) == "a.b"
    assert rules.colliding_topic("a_b", ["a_b"]) is None
    assert rules.colliding_topic("ab", ["a.b"]) is None


def test_remote_storage_needs_tiered_brokers_and_no_compaction() -> None:
    tiered = {"remote.storage.enable": "true"}
    rules.validate_topic_configs(tiered, tiered=True)
    rules.validate_topic_configs({"remote.storage.enable": "false"}, tiered=False)
    with pytest.raises(InvalidConfig, match="Tiered Storage functionality is disabled"):
        rules.validate_topic_configs(tiered, tiered=False)
    with pytest.raises(InvalidConfig, match="unsupported for the compacted topics"):
        rules.validate_topic_configs({**tiered, "cleanup.policy": "compact"}, tiered=True)
