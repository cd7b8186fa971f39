"""Typed control-plane errors, named after the AWS error types they stand for.

Everything below the gRPC boundary raises one of these; the mapping to a gRPC status happens
once, in :func:`rich_status`, used by the servicers' ``rpc`` decorator
(``controlplane/api/common.py``) and the token check (``auth.py``): the class's gRPC code, its
message, and a ``google.rpc.ErrorInfo`` (AIP-193) in the ``grpc-status-details-bin`` trailer
whose reason is the class's ``sluice.v1.ErrorReason`` (``proto/sluice/v1/errors.proto``) and
whose metadata names the resource (``cluster``, ``topic``, ``key`` ...: the keyword arguments
the error was raised with). Messages are one line, say what is wrong and name the offending
value or key; clients tell errors apart by the reason, never by the message.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from controlplane.states import ClusterState
from proto.sluice.v1 import errors_pb2 as epb
from sluice_client.client import ERROR_DOMAIN

if TYPE_CHECKING:
    from controlplane.store import BrokerRecord, ClusterRecord, Store


class ControlPlaneError(Exception):
    """Base class: an expected failure with a gRPC status code and an ErrorInfo reason."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    reason: epb.ErrorReason = epb.INTERNAL

    def __init__(self, message: str, **resource: str | int) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = {key: str(value) for key, value in resource.items() if value != ""}
        """ErrorInfo metadata: what the error is about (``cluster="orders"``, ...)."""


class BadRequest(ControlPlaneError):
    """Malformed or out-of-range input: names, counts, config keys and values."""

    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = epb.INVALID_ARGUMENT


class InvalidName(BadRequest):
    reason = epb.INVALID_NAME


class InvalidBrokerCount(BadRequest):
    reason = epb.INVALID_BROKER_COUNT


class InvalidConfig(BadRequest):
    """A broker or topic setting that does not exist, cannot be set, or has a bad value."""

    reason = epb.INVALID_CONFIG


class InvalidTransform(BadRequest):
    """A transform's module or definition refused (by the brokers' validation, or the
    name's rule): nothing changed."""

    reason = epb.INVALID_TRANSFORM


class Conflict(ControlPlaneError):
    """The thing to create exists already (a base: raise a subclass, which has a reason)."""

    code = grpc.StatusCode.ALREADY_EXISTS


class ClusterAlreadyExists(Conflict):
    reason = epb.CLUSTER_ALREADY_EXISTS


class TopicAlreadyExists(Conflict):
    reason = epb.TOPIC_ALREADY_EXISTS


class UserAlreadyExists(Conflict):
    """The SCRAM user has a credential of that mechanism (metadata ``user``)."""

    reason = epb.USER_ALREADY_EXISTS


class NotFound(ControlPlaneError):
    """A base: raise a subclass, which has a reason."""

    code = grpc.StatusCode.NOT_FOUND


class ClusterNotFound(NotFound):
    reason = epb.CLUSTER_NOT_FOUND


class TopicNotFound(NotFound):
    reason = epb.TOPIC_NOT_FOUND


class GroupNotFound(NotFound):
    reason = epb.GROUP_NOT_FOUND


class BrokerNotFound(NotFound):
    reason = epb.BROKER_NOT_FOUND


class OperationNotFound(NotFound):
    reason = epb.OPERATION_NOT_FOUND


class TransformNotFound(NotFound):
    """No transform of that name in the cluster (metadata ``transform``)."""

    reason = epb.TRANSFORM_NOT_FOUND


class UserNotFound(NotFound):
    """No SCRAM user of that name in the cluster (metadata ``user``)."""

    reason = epb.USER_NOT_FOUND


class EndpointNotFound(NotFound):
    """No private endpoint of that name in the cluster (metadata ``private_endpoint``)."""

    reason = epb.ENDPOINT_NOT_FOUND


class EndpointAlreadyExists(Conflict):
    """The cluster has a private endpoint of that name (metadata ``private_endpoint``)."""

    reason = epb.ENDPOINT_ALREADY_EXISTS


class ConfigurationNotFound(NotFound):
    """No configuration of that name, or no such revision (metadata ``configuration``)."""

    reason = epb.CONFIGURATION_NOT_FOUND


class ConfigurationAlreadyExists(Conflict):
    reason = epb.CONFIGURATION_ALREADY_EXISTS


class ReplicatorNotFound(NotFound):
    """No replicator of that name (metadata ``replicator``)."""

    reason = epb.REPLICATOR_NOT_FOUND


class ReplicatorAlreadyExists(Conflict):
    """A replicator of that name exists (metadata ``replicator``)."""

    reason = epb.REPLICATOR_ALREADY_EXISTS


class BillingRunNotFound(NotFound):
    """No billing run of that id (metadata ``billing_run``)."""

    reason = epb.BILLING_RUN_NOT_FOUND


class InvoiceNotFound(NotFound):
    """The billing pipeline has no invoice of that month (metadata ``month``)."""

    reason = epb.INVOICE_NOT_FOUND


class PreconditionFailed(ControlPlaneError):
    """Valid request, wrong moment: another operation runs, or the change needs a later issue."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = epb.FAILED_PRECONDITION


class OperationInProgress(PreconditionFailed):
    reason = epb.OPERATION_IN_PROGRESS


class ClusterNotReady(PreconditionFailed):
    reason = epb.CLUSTER_NOT_READY


class ScaleInNotSupported(PreconditionFailed):
    reason = epb.SCALE_IN_NOT_SUPPORTED


class GroupNotEmpty(PreconditionFailed):
    """A consumer group with members: its offsets cannot be reset nor the group deleted."""

    reason = epb.GROUP_NOT_EMPTY


class BrokerUnavailable(ControlPlaneError):
    """A broker did not answer the Kafka protocol in time."""

    code = grpc.StatusCode.UNAVAILABLE
    reason = epb.BROKER_UNAVAILABLE


class ObjectStoreUnavailable(ControlPlaneError):
    """A cluster's object store (S3) failed or did not answer."""

    code = grpc.StatusCode.UNAVAILABLE
    reason = epb.OBJECT_STORE_UNAVAILABLE


class KafkaError(ControlPlaneError):
    """A broker answered an admin request with an error we have no better type for."""

    code = grpc.StatusCode.UNKNOWN
    reason = epb.KAFKA_ERROR


class Unauthenticated(ControlPlaneError):
    """No bearer token, or not the control plane's (``auth.py``)."""

    code = grpc.StatusCode.UNAUTHENTICATED
    reason = epb.TOKEN_INVALID


def status_code_for(exc: BaseException) -> grpc.StatusCode:
    """The gRPC status code of an error; INTERNAL for anything unexpected."""
    if isinstance(exc, ControlPlaneError):
        return exc.code
    return grpc.StatusCode.INTERNAL


def reason_for(exc: BaseException) -> epb.ErrorReason:
    """The ErrorInfo reason of an error; INTERNAL for anything unexpected."""
    if isinstance(exc, ControlPlaneError):
        return exc.reason
    return epb.INTERNAL


def rich_status(exc: BaseException, message: str | None = None) -> grpc.Status:
    """The status a call ends with: code, message (default: the error's) and the
    ``grpc-status-details-bin`` trailer holding a ``google.rpc.Status`` with the ErrorInfo."""
    code = status_code_for(exc)
    if message is None:
        message = exc.message if isinstance(exc, ControlPlaneError) else str(exc)
    info = error_details_pb2.ErrorInfo(
        reason=epb.ErrorReason.Name(reason_for(exc)),
        domain=ERROR_DOMAIN,
        metadata=exc.metadata if isinstance(exc, ControlPlaneError) else {},
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    return rpc_status.to_status(status)


def existing_cluster(store: Store, name: str) -> ClusterRecord:
    """The cluster ``name``; ClusterNotFound when there is none."""
    cluster = store.get_cluster(name)
    if cluster is None:
        raise ClusterNotFound(f"cluster {name!r} not found", cluster=name)
    return cluster


def ready_brokers(store: Store, name: str, hint: str = "") -> list[BrokerRecord]:
    """The brokers of ``name`` when it is neither CREATING nor DELETING (ClusterNotReady
    then, with ``hint`` after the state)."""
    cluster = existing_cluster(store, name)
    if cluster.state in (ClusterState.CREATING, ClusterState.DELETING):
        raise ClusterNotReady(f"cluster {name!r} is {cluster.state}{hint}", cluster=name)
    return store.brokers(name)


def broker_unavailable(
    exc: BaseException, cluster: str, what: str, **about: str | int
) -> BrokerUnavailable:
    """A transport failure (timeout, refused or closed connection) talking to a cluster."""
    why: object = "closed the connection" if isinstance(exc, asyncio.IncompleteReadError) else exc
    return BrokerUnavailable(
        f"cluster {cluster!r} did not answer {what}: {why or type(exc).__name__}",
        cluster=cluster,
        **about,
    )
