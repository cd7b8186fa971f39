"""The settings of listeners and the bootstrap users file, in process: Kafka's syntax,
compatible defaults, and a clear error naming the key for every bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.config import BrokerConfig
from dataplane.security.bootstrap import read_users
from dataplane.security.credentials import password_matches
from dataplane.security.listeners import check_security, parse_listeners
from tests.security.conftest import users_file
from wire.errors import InvalidConfig


def _config(**overrides: str) -> BrokerConfig:
    return BrokerConfig.build(data_dir="/tmp/x", listen="127.0.0.1:9092", overrides=overrides)


def test_without_listeners_one_plaintext_listener_at_listen() -> None:
    [listener] = parse_listeners(_config(), "127.0.0.1", 9092)
    assert (listener.name, listener.protocol, listener.port) == ("PLAINTEXT", "PLAINTEXT", 9092)
    assert _config().advertised == ("127.0.0.1", 9092)


def test_named_listeners_and_advertised_addresses() -> None:
    config = _config(
        listeners="EXTERNAL://127.0.0.1:9093,INTERNAL://127.0.0.1:9092",
        **{
            "listener.security.protocol.map": "EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT",
            "advertised.listeners": "INTERNAL://broker1:9092,EXTERNAL://public:19093",
        },
    )
    listeners = parse_listeners(config, "127.0.0.1", 9092)
    assert [(x.name, x.protocol) for x in listeners] == [
        ("INTERNAL", "PLAINTEXT"),
        ("EXTERNAL", "SASL_SSL"),
    ]
    assert config.advertised == ("broker1", 9092)
    assert config.advertised_for("EXTERNAL", ("127.0.0.1", 9093)) == ("public", 19093)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"listeners": "SASL_SSL://127.0.0.1:9093"}, "--listen 127.0.0.1:9092 must be one of"),
        ({"listeners": "FOO://127.0.0.1:9092"}, "no security protocol for listener name 'FOO'"),
        ({"listeners": "PLAINTEXT:/127.0.0.1:9092"}, "expected NAME://host:port"),
        (
            {"listeners": "A://127.0.0.1:9092", "listener.security.protocol.map": "A:TLS"},
            "invalid listener.security.protocol.map entry 'A:TLS'",
        ),
        (
            {"listeners": "SASL_SSL://127.0.0.1:9092"},
            "ssl.certificate.location is required by an SSL or SASL_SSL listener",
        ),
    ],
)
def test_bad_listener_settings_name_the_key(overrides: dict[str, str], message: str) -> None:
    config = _config(**overrides)
    with pytest.raises(InvalidConfig) as failure:
        _check(config)
    assert message in failure.value.message


def _check(config: BrokerConfig) -> None:
    check_security(config, parse_listeners(config, "127.0.0.1", 9092))


def test_mechanisms_are_checked() -> None:
    with pytest.raises(InvalidConfig) as failure:
        _config(**{"sasl.enabled.mechanisms": "GSSAPI"})
    assert "sasl.enabled.mechanisms" in failure.value.message


def test_users_file_syntax(tmp_path: Path) -> None:
    path = users_file(
        tmp_path,
        [
            "# the first users",
            "SCRAM-SHA-512=[name=alice,password=alice-secret]",
            'SCRAM-SHA-256=[name=bob,password="a,b=c]",iterations=8192]',
        ],
    )
    alice, bob = read_users(str(path))
    assert (alice.name, alice.mechanism, alice.iterations) == ("alice", 2, 4096)
    assert (bob.name, bob.mechanism, bob.iterations) == ("bob", 1, 8192)
    assert password_matches(bob.record(), "a,b=c]")
    assert not password_matches(alice.record(), "wrong")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256 or SCRAM-SHA-512"),
        ("SCRAM-SHA-512=[name=a]", "name and password are required"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=10]", "iterations must be 4096-16384"),
        ("alice:secret", "expected MECHANISM=[name=...,password=...]"),
    ],
)
def test_bad_users_file_names_the_line_not_the_password(
    tmp_path: Path, line: str, message: str
) -> None:
    path = users_file(tmp_path, ["", line])
    with pytest.raises(InvalidConfig) as failure:
        read_users(str(path))
    assert "sasl.scram.bootstrap.users.file: line 2" in failure.value.message
    assert message in failure.value.message
    assert "secret" not in failure.value.message
