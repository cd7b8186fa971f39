"""Typed control-plane errors, named after the AWS error types they stand for.

Everything below the gRPC boundary raises one of these; the mapping to a gRPC status code
happens once, in :func:`status_code_for`, used by the servicers' ``rpc`` decorator
(``controlplane/api/common.py``). Messages are one line, say what is wrong and name the
offending value or key.
"""

from __future__ import annotations

import grpc


class ControlPlaneError(Exception):
    """Base class: an expected failure with a gRPC status code."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ControlPlaneError):
    """Malformed or out-of-range input: names, counts, config keys and values."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class InvalidName(BadRequest):
    pass


class InvalidBrokerCount(BadRequest):
    pass


class InvalidConfig(BadRequest):
    """A broker or topic setting that does not exist, cannot be set, or has a bad value."""


class Conflict(ControlPlaneError):
    """The thing to create exists already."""

    code = grpc.StatusCode.ALREADY_EXISTS


class ClusterAlreadyExists(Conflict):
    pass


class TopicAlreadyExists(Conflict):
    pass


class NotFound(ControlPlaneError):
    code = grpc.StatusCode.NOT_FOUND


class ClusterNotFound(NotFound):
    pass


class TopicNotFound(NotFound):
    pass


class PreconditionFailed(ControlPlaneError):
    """Valid request, wrong moment: another operation runs, or the change needs a later issue."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class OperationInProgress(PreconditionFailed):
    pass


class ClusterNotReady(PreconditionFailed):
    pass


class ScaleInNotSupported(PreconditionFailed):
    pass


class BrokerUnavailable(ControlPlaneError):
    """A broker did not answer the Kafka protocol in time."""

    code = grpc.StatusCode.UNAVAILABLE


class ObjectStoreUnavailable(ControlPlaneError):
    """A cluster's object store (S3) failed or did not answer. Messages start with "the
    object store" (the CLI tells them from an unreachable control plane by that)."""

    code = grpc.StatusCode.UNAVAILABLE


class KafkaError(ControlPlaneError):
    """A broker answered an admin request with an error we have no better type for."""

    code = grpc.StatusCode.UNKNOWN


def status_code_for(exc: BaseException) -> grpc.StatusCode:
    """The gRPC status code of an error; INTERNAL for anything unexpected."""
    if isinstance(exc, ControlPlaneError):
        return exc.code
    return grpc.StatusCode.INTERNAL
