"""The broker's transforms settings and the engine's limits name the same keys with the
same defaults: the broker owns the keys, the engine only reads them."""

from __future__ import annotations

from dataclasses import fields

import pytest

from dataplane.config.transform_table import ENGINE_KEYS, TRANSFORM_CONFIGS
from transforms import CONFIG_KEYS, Limits

BY_KEY = {d.name: d for d in TRANSFORM_CONFIGS}


def test_engine_keys_are_the_limits_keys() -> None:
    assert set(ENGINE_KEYS) == set(CONFIG_KEYS.values())
    assert {f.name for f in fields(Limits)} == set(CONFIG_KEYS)


@pytest.mark.parametrize("field", sorted(CONFIG_KEYS))
def test_defaults_agree(field: str) -> None:
    key = CONFIG_KEYS[field]
    assert BY_KEY[key].default == getattr(Limits(), field), key
    assert BY_KEY[key].read_only, f"{key}: running instances keep their limits"


def test_broker_defaults_make_valid_limits() -> None:
    limits = Limits.from_config({key: BY_KEY[key].default for key in ENGINE_KEYS})
    assert limits == Limits()


def test_unknown_engine_key_is_refused() -> None:
    with pytest.raises(ValueError, match=r"transforms\.memory\.max\.byte"):
        Limits.from_config({"transforms.memory.max.byte": 1})
