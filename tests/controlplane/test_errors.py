"""Typed errors map to gRPC status codes and ErrorInfo reasons in one place."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from controlplane import errors
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import ERROR_DOMAIN


@pytest.mark.parametrize(
    ("error", "code", "reason"),
    [
        (errors.BadRequest, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
        (errors.InvalidName, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_NAME"),
        (errors.InvalidBrokerCount, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_BROKER_COUNT"),
        (errors.InvalidConfig, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CONFIG"),
        (errors.ClusterAlreadyExists, grpc.StatusCode.ALREADY_EXISTS, "CLUSTER_ALREADY_EXISTS"),
        (errors.TopicAlreadyExists, grpc.StatusCode.ALREADY_EXISTS, "TOPIC_ALREADY_EXISTS"),
        (errors.ClusterNotFound, grpc.StatusCode.NOT_FOUND, "CLUSTER_NOT_FOUND"),
        (errors.TopicNotFound, grpc.StatusCode.NOT_FOUND, "TOPIC_NOT_FOUND"),
        (errors.PreconditionFailed, grpc.StatusCode.FAILED_PRECONDITION, "FAILED_PRECONDITION"),
        (
            errors.OperationInProgress,
            grpc.StatusCode.FAILED_PRECONDITION,
            "OPERATION_IN_PROGRESS",
        ),
        (
            errors.ScaleInNotSupported,
            grpc.StatusCode.FAILED_PRECONDITION,
            "SCALE_IN_NOT_SUPPORTED",
        ),
        (errors.ClusterNotReady, grpc.StatusCode.FAILED_PRECONDITION, "CLUSTER_NOT_READY"),
        (errors.BrokerUnavailable, grpc.StatusCode.UNAVAILABLE, "BROKER_UNAVAILABLE"),
        (errors.ObjectStoreUnavailable, grpc.StatusCode.UNAVAILABLE, "OBJECT_STORE_UNAVAILABLE"),
        (errors.KafkaError, grpc.StatusCode.UNKNOWN, "KAFKA_ERROR"),
        (errors.Unauthenticated, grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID"),
    ],
)
def test_status_codes_and_reasons(
    error: type[errors.ControlPlaneError], code: grpc.StatusCode, reason: str
) -> None:
    assert errors.status_code_for(error("x")) is code
    assert epb.ErrorReason.Name(errors.reason_for(error("x"))) == reason


def test_unexpected_errors_are_internal() -> None:
    assert errors.status_code_for(ValueError("boom")) is grpc.StatusCode.INTERNAL
    assert errors.reason_for(ValueError("boom")) == epb.INTERNAL


def all_error_types() -> list[type[errors.ControlPlaneError]]:
    found, todo = [], [errors.ControlPlaneError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def test_every_reason_is_one_error_type() -> None:
    """A reason names one error type; every reason the server can send has a type (the
    client-side CONTROL_PLANE_UNAVAILABLE and UNSPECIFIED excepted). Conflict and NotFound
    are only bases: never raised, no reason of their own."""
    reasons = [cls.reason for cls in all_error_types() if "reason" in vars(cls)]
    assert len(reasons) == len(set(reasons))
    server_side = set(epb.ErrorReason.values()) - {
        epb.ERROR_REASON_UNSPECIFIED,
        epb.CONTROL_PLANE_UNAVAILABLE,
    }
    assert set(reasons) == server_side


def test_rich_status_carries_an_error_info() -> None:
    exc = errors.InvalidConfig("unknown broker config 'k'", cluster="c", key="k", topic="")
    status = errors.rich_status(exc)
    assert status.code is grpc.StatusCode.INVALID_ARGUMENT
    assert status.details == "unknown broker config 'k'"
    ((key, raw),) = status.trailing_metadata
    assert key == "grpc-status-details-bin"
    rich = status_pb2.Status.FromString(raw)
    assert (rich.code, rich.message) == (grpc.StatusCode.INVALID_ARGUMENT.value[0], status.details)
    info = error_details_pb2.ErrorInfo()
    assert rich.details[0].Unpack(info)
    assert (info.reason, info.domain) == ("INVALID_CONFIG", ERROR_DOMAIN)
    assert dict(info.metadata) == {"cluster": "c", "key": "k"}, "empty values are left out"
    assert rpc_status.to_status(rich).trailing_metadata == status.trailing_metadata


def test_an_unexpected_error_gets_the_message_given() -> None:
    status = errors.rich_status(RuntimeError("boom"), "internal error in X: RuntimeError: boom")
    assert status.code is grpc.StatusCode.INTERNAL
    assert status.details == "internal error in X: RuntimeError: boom"
