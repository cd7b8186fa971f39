"""Typed errors map to gRPC status codes in one place."""

from __future__ import annotations

import grpc
import pytest

from controlplane import errors


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.InvalidName, grpc.StatusCode.INVALID_ARGUMENT),
        (errors.InvalidBrokerCount, grpc.StatusCode.INVALID_ARGUMENT),
        (errors.InvalidConfig, grpc.StatusCode.INVALID_ARGUMENT),
        (errors.ClusterAlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
        (errors.TopicAlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
        (errors.ClusterNotFound, grpc.StatusCode.NOT_FOUND),
        (errors.TopicNotFound, grpc.StatusCode.NOT_FOUND),
        (errors.OperationInProgress, grpc.StatusCode.FAILED_PRECONDITION),
        (errors.ScaleInNotSupported, grpc.StatusCode.FAILED_PRECONDITION),
        (errors.ClusterNotReady, grpc.StatusCode.FAILED_PRECONDITION),
        (errors.BrokerUnavailable, grpc.StatusCode.UNAVAILABLE),
        (errors.KafkaError, grpc.StatusCode.UNKNOWN),
    ],
)
def test_status_codes(error: type[errors.ControlPlaneError], code: grpc.StatusCode) -> None:
    assert errors.status_code_for(error("x")) is code


def test_unexpected_errors_are_internal() -> None:
    assert errors.status_code_for(ValueError("boom")) is grpc.StatusCode.INTERNAL
