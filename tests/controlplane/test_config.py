"""Request validation: cluster names, broker counts, broker settings, control-plane settings."""

from __future__ import annotations

import re

import pytest

from controlplane.config import (
    Settings,
    validate_broker_config,
    validate_broker_count,
    validate_cluster_name,
    validate_config_keys,
)
from controlplane.errors import InvalidBrokerCount, InvalidConfig, InvalidName
from controlplane.frontend import new_cluster_id
from controlplane.objectstore import bucket_name


@pytest.mark.parametrize("name", ["a", "demo", "Demo-1", "1st-cluster", "a" * 64, "x-y-z"])
def test_valid_cluster_names(name: str) -> None:
    validate_cluster_name(name)


@pytest.mark.parametrize(
    "name", ["", "a" * 65, "under_score", "dot.name", "space name", "-leading", "ünïcode", "a/b"]
)
def test_invalid_cluster_names(name: str) -> None:
    with pytest.raises(InvalidName, match="1-64"):
        validate_cluster_name(name)


def test_broker_count_range_follows_the_setting() -> None:
    settings = Settings(cluster_max_brokers=4)
    for count in (1, 4):
        validate_broker_count(count, settings)
    for count in (0, -1, 5):
        with pytest.raises(InvalidBrokerCount, match=r"between 1 and 4 \(cluster.max.brokers\)"):
            validate_broker_count(count, settings)


def test_broker_config_is_normalised() -> None:
    checked = validate_broker_config(
        {"log.retention.ms": " 3600000", "auto.create.topics.enable": "TRUE"}
    )
    assert checked == {"log.retention.ms": "3600000", "auto.create.topics.enable": "true"}


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"no.such.key": "1"}, "no.such.key"),
        ({"log.retention.ms": "soon"}, "log.retention.ms"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"node.id": "7"}, "node.id"),
        ({"advertised.listeners": "x:1"}, "advertised.listeners"),
        ({"cluster.id": "abc"}, "cluster.id"),
        ({"controller.quorum.voters": "0@127.0.0.1:1"}, "controller.quorum.voters"),
        ({"controller.quorum.voter.listeners": "0@x:1"}, "controller.quorum.voter.listeners"),
        ({"controller.listener": "127.0.0.1:1"}, "controller.listener"),
    ],
)
def test_bad_broker_config_names_the_key(config: dict[str, str], key: str) -> None:
    with pytest.raises(InvalidConfig, match=key.replace(".", r"\.")):
        validate_broker_config(config)


def test_config_keys_to_remove_must_exist() -> None:
    assert validate_config_keys(["log.retention.ms"]) == ["log.retention.ms"]
    with pytest.raises(InvalidConfig, match="nope"):
        validate_config_keys(["nope"])


def test_settings_from_properties() -> None:
    settings = Settings.from_properties({"cluster.max.brokers": "7", "broker.host": "127.0.0.2"})
    assert settings.cluster_max_brokers == 7
    assert settings.broker_host == "127.0.0.2"
    known = Settings.keys()
    assert "supervisor.interval.ms" in known
    with pytest.raises(InvalidConfig, match=r"cluster\.max\.brokerz"):
        Settings.from_properties({"cluster.max.brokerz": "7"})
    with pytest.raises(InvalidConfig, match="expected an integer"):
        Settings.from_properties({"cluster.max.brokers": "many"})


@pytest.mark.parametrize("name", ["demo", "A", "Upper-Case-9", "x" * 64, "a-" * 32])
def test_bucket_names_are_valid_s3_names(name: str) -> None:
    first, second = bucket_name(name, new_cluster_id()), bucket_name(name, new_cluster_id())
    for bucket in (first, second):
        assert 3 <= len(bucket) <= 63, bucket
        assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*[a-z0-9]", bucket), bucket
        assert bucket.startswith("sluice-")
    assert first != second, "a re-created cluster gets a new bucket"
