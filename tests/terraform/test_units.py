"""The provider's pure parts, in process: durations of the timeouts block, values Terraform
leaves unknown, ACL import ids with a ``/`` in a name, errors mapped to diagnostics."""

from __future__ import annotations

import grpc
import pytest
from msgpack import ExtType
from tf.types import String, Unknown

from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import ApiError, Env
from terraform.api import Settings, explain
from terraform.common import MapOf, known, parse_duration, transient
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


def test_a_busy_cluster_is_tried_again_and_a_refusal_is_not() -> None:
    def error(reason: epb.ErrorReason, kafka: str = "") -> ApiError:
        meta = {"kafkaError": kafka} if kafka else {}
        return ApiError(grpc.StatusCode.UNKNOWN, reason, "x", metadata=meta)

    assert transient(error(epb.CLUSTER_NOT_READY))
    assert transient(error(epb.KAFKA_ERROR, "not_controller"))
    assert not transient(error(epb.KAFKA_ERROR, "topic_authorization_failed"))
    assert not transient(error(epb.INVALID_CONFIG))
