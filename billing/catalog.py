"""Broker types (MSK's names) and the pricing model each one is billed under.

A cluster has one broker type (``cloudctl create-cluster --broker-type T``); the control
plane meters ``broker_ms`` with ``resource`` = that type, and the type's pricing model
picks which prices of the rate card apply to the cluster's usage:

- ``provisioned``: MSK Provisioned with Standard brokers (``kafka.*``): broker-hours by
  instance size, storage, tiered storage and retrieval;
- ``express``: MSK Provisioned with Express brokers (``express.*``): broker-hours, storage
  and data written;
- ``serverless``: MSK Serverless, one pseudo type (``serverless``): cluster-hours,
  partition-hours, storage, data in and out.

Sizes (vCPUs, memory) are those of the EC2 instance behind each MSK name. Sluice runs the
same broker process whatever the type: the type says what the cluster would cost.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


class PricingModel(enum.StrEnum):
    PROVISIONED = "provisioned"
    EXPRESS = "express"
    SERVERLESS = "serverless"


@dataclass(frozen=True, slots=True)
class BrokerType:
    name: str
    """MSK's name, e.g. ``kafka.m5.large``."""
    model: PricingModel
    vcpus: int
    """0 for ``serverless`` (no broker instances to size)."""
    memory_gib: int
    """0 for ``serverless``."""


class UnknownBrokerType(ValueError):
    """A broker type that is not in :data:`BROKER_TYPES`."""


DEFAULT_BROKER_TYPE = "kafka.m5.large"
SERVERLESS = "serverless"

# (size suffix, vCPUs, memory GiB) of the m5 / m7g instance sizes MSK offers
_SIZES = {
    "large": (2, 8),
    "xlarge": (4, 16),
    "2xlarge": (8, 32),
    "4xlarge": (16, 64),
    "8xlarge": (32, 128),
    "12xlarge": (48, 192),
    "16xlarge": (64, 256),
    "24xlarge": (96, 384),
}
_M5 = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
_M7G = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")


def _family(prefix: str, model: PricingModel, sizes: tuple[str, ...]) -> list[BrokerType]:
    return [BrokerType(f"{prefix}.{s}", model, *_SIZES[s]) for s in sizes]


_ALL = [
    BrokerType("kafka.t3.small", PricingModel.PROVISIONED, 2, 2),
    *_family("kafka.m5", PricingModel.PROVISIONED, _M5),
    *_family("kafka.m7g", PricingModel.PROVISIONED, _M7G),
    *_family("express.m7g", PricingModel.EXPRESS, _M7G),
    BrokerType(SERVERLESS, PricingModel.SERVERLESS, 0, 0),
]

BROKER_TYPES: Mapping[str, BrokerType] = MappingProxyType({t.name: t for t in _ALL})
"""Every broker type by name, in the order MSK lists them."""


def broker_type(name: str) -> BrokerType:
    """The broker type called ``name``; :class:`UnknownBrokerType` names the known ones."""
    found = BROKER_TYPES.get(name)
    if found is not None:
        return found
    close = difflib.get_close_matches(name, list(BROKER_TYPES), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UnknownBrokerType(
        f"unknown broker type {name!r}{hint}: use one of {', '.join(BROKER_TYPES)}"
    )


def model_of(name: str) -> PricingModel:
    """The pricing model of broker type ``name`` (:class:`UnknownBrokerType` if none)."""
    return broker_type(name).model
