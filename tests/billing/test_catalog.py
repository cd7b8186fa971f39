"""Broker types: MSK's names, their pricing models, and the error for an unknown one."""

from __future__ import annotations

import pytest

from billing.catalog import (
    BROKER_TYPES,
    DEFAULT_BROKER_TYPE,
    PricingModel,
    UnknownBrokerType,
    broker_type,
    model_of,
)

PROVISIONED = [
    "kafka.t3.small",
    *(
        f"kafka.m5.{s}"
        for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")
    ),
    "kafka.m5.24xlarge",
    *(
        f"kafka.m7g.{s}"
        for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")
    ),
]
EXPRESS = [
    f"express.m7g.{s}"
    for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")
]


def test_the_catalog_has_msk_names_and_nothing_else() -> None:
    assert list(BROKER_TYPES) == [*PROVISIONED, *EXPRESS, "serverless"]


@pytest.mark.parametrize(
    ("name", "model"),
    [
        *((n, PricingModel.PROVISIONED) for n in PROVISIONED),
        *((n, PricingModel.EXPRESS) for n in EXPRESS),
        ("serverless", PricingModel.SERVERLESS),
    ],
)
def test_model_of_each_type(name: str, model: PricingModel) -> None:
    assert model_of(name) is model
    assert broker_type(name).name == name


def test_sizes() -> None:
    assert (broker_type("kafka.t3.small").vcpus, broker_type("kafka.t3.small").memory_gib) == (2, 2)
    assert (broker_type("kafka.m5.large").vcpus, broker_type("kafka.m5.large").memory_gib) == (2, 8)
    big = broker_type("kafka.m5.24xlarge")
    assert (big.vcpus, big.memory_gib) == (96, 384)
    express = broker_type("express.m7g.16xlarge")
    assert (express.vcpus, express.memory_gib) == (64, 256)
    # memory is 4 GiB per vCPU for every m5 / m7g size
    for t in BROKER_TYPES.values():
        if ".m5." in t.name or ".m7g." in t.name:
            assert t.memory_gib == 4 * t.vcpus, t.name


def test_default_is_a_provisioned_m5_large() -> None:
    assert DEFAULT_BROKER_TYPE == "kafka.m5.large"
    assert model_of(DEFAULT_BROKER_TYPE) is PricingModel.PROVISIONED


def test_unknown_type_lists_the_known_names_and_the_closest() -> None:
    with pytest.raises(UnknownBrokerType) as caught:
        broker_type("kafka.m5.larg")
    message = str(caught.value)
    assert "'kafka.m5.larg'" in message
    assert "did you mean kafka.m5.large?" in message
    for name in BROKER_TYPES:
        assert name in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", ["", "m5.large", "KAFKA.M5.LARGE", "kafka.m7g.24xlarge"])
def test_not_broker_types(name: str) -> None:
    with pytest.raises(UnknownBrokerType, match=r"use one of kafka\.t3\.small"):
        model_of(name)
