"""The provider's pure parts, in process: durations of the timeouts block, values Terraform
leaves unknown, ACL import ids with a ``/`` in a name, errors mapped to diagnostics, Kafka's
properties format of ``server_properties``, configuration ARNs and ``configuration_info``,
and how ``kafka_config`` relates to a cluster's configuration revision."""

from __future__ import annotations

import re

import grpc
import pytest
from msgpack import ExtType
from tf.types import String, Unknown

from proto.sluice.v1 import configurations_pb2 as fpb
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import ApiError, Env
from terraform.api import Settings, explain
from terraform.cluster import config_changes, given_apart
from terraform.common import MapOf, known, parse_duration, transient
from terraform.configuration import (
    ConfigurationResource,
    Revision,
    arn_name,
    configuration_state,
    info_state,
    wanted_revision,
)
from terraform.properties import PropertiesError, parse, render
from terraform.security import acl_id


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0.0), ("45s", 45.0), ("30m", 1800.0), ("1h30m", 5400.0), ("250ms", 0.25)],
)
def test_durations_are_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "5 minutes", "-1m", "1m30", "1d"])
def test_other_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_refined_unknowns_are_unknown() -> None:
    refined = ExtType(12, b"\x81\x01\xc2")  # Terraform >= 1.6: unknown, known not null
    assert not known(refined)
    assert not known(Unknown)
    assert not known(None)
    values: list[object] = ["", 0, {}]
    assert all(known(v) for v in values)
    assert MapOf(String()).decode(refined) is refined
    assert MapOf(String()).decode({"a": "b"}) == {"a": "b"}


def test_an_acl_import_id_quotes_slashes_in_names() -> None:
    state = {
        "cluster": "main",
        "resource_type": "GROUP",
        "resource_pattern_type": "PREFIXED",
        "resource_name": "team/a",
        "principal": "User:CN=app,O=x",
        "host": "*",
        "operation": "READ",
        "permission_type": "ALLOW",
    }
    assert acl_id(state) == "main/GROUP/PREFIXED/team%2Fa/User:CN=app,O=x/*/READ/ALLOW"


def test_a_bad_setting_points_at_its_key() -> None:
    settings = Settings(Env.from_environ("/nonexistent"), "127.0.0.1:1", "t")
    refused = ApiError(
        grpc.StatusCode.INVALID_ARGUMENT,
        epb.INVALID_CONFIG,
        "unknown broker setting 'log.retention.mss'",
        metadata={"key": "log.retention.mss", "cluster": "c"},
    )
    error = explain(refused, settings, resource="sluice_cluster", config="kafka_config")
    assert error.path == ["kafka_config", ("log.retention.mss",)]
    assert "nothing was changed" in error.detail
    exists = ApiError(grpc.StatusCode.ALREADY_EXISTS, epb.TOPIC_ALREADY_EXISTS, "topic exists")
    hint = explain(exists, settings, resource="sluice_topic").detail
    assert "terraform import sluice_topic.NAME ID" in hint


def test_a_missing_object_points_at_the_attribute_that_names_it() -> None:
    settings = Settings(Env.from_environ("/nonexistent"), "127.0.0.1:1", "t")
    gone = ApiError(
        grpc.StatusCode.NOT_FOUND,
        epb.TOPIC_NOT_FOUND,
        "topic 'copies' not found in cluster 'c'",
        metadata={"cluster": "c", "topic": "copies"},
    )
    own = explain(gone, settings, resource="sluice_topic").detail
    assert own == "Check `name`; `cloudctl list-topics --cluster c` lists them."
    assert explain(gone, settings, resource="data.sluice_topic").detail == own
    read = explain(gone, settings, resource="sluice_transform").detail
    assert read.startswith("Check `input_topic`;")


def test_a_busy_cluster_is_tried_again_and_a_refusal_is_not() -> None:
    def error(reason: epb.ErrorReason, kafka: str = "") -> ApiError:
        meta = {"kafkaError": kafka} if kafka else {}
        return ApiError(grpc.StatusCode.UNKNOWN, reason, "x", metadata=meta)

    assert transient(error(epb.CLUSTER_NOT_READY))
    assert transient(error(epb.KAFKA_ERROR, "not_controller"))
    assert not transient(error(epb.KAFKA_ERROR, "topic_authorization_failed"))
    assert not transient(error(epb.INVALID_CONFIG))


AWS_HEREDOC = """auto.create.topics.enable = true
delete.topic.enable = true
"""


def test_server_properties_read_as_kafka_reads_them() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "\n"
        "  log.retention.ms=604800000\n"
        "num.partitions : 6\n"
        "log.cleanup.policy   compact\n"
        "ssl.cipher.suites = TLS_A,\\\n"
        "    TLS_B\n"
        "odd\\:key = tab\\there \\u00e9\n"
    )
    assert parse(text) == {
        "log.retention.ms": "604800000",
        "num.partitions": "6",
        "log.cleanup.policy": "compact",
        "ssl.cipher.suites": "TLS_A,TLS_B",
        "odd:key": "tab\there é",
    }
    assert parse(AWS_HEREDOC) == {
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
    }
    assert parse("") == {}


def test_server_properties_render_as_aws_writes_them_and_read_back_equal() -> None:
    settings = {"delete.topic.enable": "true", "auto.create.topics.enable": "true"}
    assert render(settings) == AWS_HEREDOC
    odd = {"a key": "=x", "b": " lead\\ing\nnew", "#c": "v"}
    assert parse(render(odd)) == odd


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a = 1\nb = 2\na = 3\n", "line 3: 'a' is given twice"),
        ("= 1\n", "line 1: no key"),
        ("a = \\u12\n", "line 1: malformed \\u escape"),
    ],
)
def test_server_properties_mistakes_name_their_line(text: str, error: str) -> None:
    with pytest.raises(PropertiesError, match=re.escape(error)):
        parse(text)


def test_a_configuration_arn_names_the_configuration() -> None:
    arn = "arn:sluice:kafka:local:configuration/retention-1/0f3a9c"
    assert arn_name(arn) == "retention-1"
    assert arn_name("arn:sluice:kafka:local:cluster/retention-1/0f3a9c") is None
    assert arn_name("retention-1") is None
    assert wanted_revision({"arn": arn, "name": None, "revision": 3}) == Revision(
        "retention-1", 3, arn
    )
    assert wanted_revision({"arn": None, "name": "x", "revision": 2.0}) == Revision("x", 2, None)
    assert wanted_revision(None) is None


def test_configuration_info_is_kept_in_the_form_it_was_given() -> None:
    found = fpb.Configuration(name="c", arn="arn:sluice:kafka:local:configuration/c/1", revision=4)
    by_arn = {"arn": "arn:sluice:kafka:local:configuration/c/1", "name": None, "revision": 3}
    assert info_state(by_arn, found) == {"arn": found.arn, "name": None, "revision": 4}
    by_name = {"arn": None, "name": "c", "revision": 3}
    assert info_state(by_name, found) == {"arn": None, "name": "c", "revision": 4}
    assert info_state(None, found) == {"arn": found.arn, "name": None, "revision": 4}, "import"


def test_kafka_config_holds_the_settings_given_apart_from_the_revision() -> None:
    revision = {"log.retention.ms": "3600000", "message.max.bytes": "2000000"}
    config = {"log.retention.ms": "3600000", "message.max.bytes": "3000000", "num.partitions": "3"}
    # the revision's value is left out unless kafka_config names the key
    assert given_apart(config, revision, None) == {
        "message.max.bytes": "3000000",
        "num.partitions": "3",
    }
    declared = {"log.retention.ms": "3600000", "message.max.bytes": "3000000"}
    assert given_apart(config, revision, declared) == config
    # an update: the revision's settings with kafka_config over them; a key dropped from
    # kafka_config returns to the revision's value, else to the broker's default
    assert config_changes(config, revision, {"message.max.bytes": "3000000"}) == (
        {},
        ["num.partitions"],
    )
    assert config_changes(config, revision, {}) == (
        {"message.max.bytes": "2000000"},
        ["num.partitions"],
    )
    moved = {"log.retention.ms": "7200000"}
    assert config_changes(config, moved, {"num.partitions": "3"}) == (
        {"log.retention.ms": "7200000"},
        ["message.max.bytes"],
    )


def test_a_reformatted_server_properties_is_kept_and_makes_no_revision() -> None:
    found = fpb.Configuration(
        name="c",
        arn="arn:sluice:kafka:local:configuration/c/1",
        latest_revision=2,
        server_properties={"a.b": "1", "c.d": "2"},
    )
    written = "# mine\nc.d=2\na.b = 1\n"
    state = configuration_state(found, {"server_properties": written}, ConfigurationResource.SCHEMA)
    assert (state["server_properties"], state["description"]) == (written, None)
    other = configuration_state(
        found, {"server_properties": "a.b = 9\n"}, ConfigurationResource.SCHEMA
    )
    assert other["server_properties"] == "a.b = 1\nc.d = 2\n", "drift: the API's settings"
    assert not ConfigurationResource.new_revision(
        state, {**state, "server_properties": "a.b=1\nc.d=2"}
    )
    assert ConfigurationResource.new_revision(state, {**state, "description": "new"})
